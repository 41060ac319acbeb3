//! JSON text of plain data, written in one pass over QuickJS's C API.
//!
//! QuickJS's `JSON.stringify` is general, and it pays for it on every object:
//! a JavaScript array of the keys, `toJSON` looked up the prototype chain, a
//! new string for every quoted key and every array index, cycles checked with
//! `Array.prototype.includes`. That was half of W3's time (docs/benchmarks.md).
//! What code mode stringifies is nearly always plain data (tool arguments,
//! results): ordinary objects and arrays of strings, numbers, booleans and
//! null. Their text depends only on their own data properties, so this walk
//! reads those, runs no JavaScript at all (no getter, no `toJSON`, no proxy
//! trap, nothing that could change the data under it) and writes the text
//! itself. On anything else it answers [`Plain::No`] and the caller uses
//! QuickJS's own, which then gives every answer and error the specification
//! asks for. The generated tests (`plain_json/tests.rs`) hold the two to the
//! same text.

use rquickjs::function::Opt;
use rquickjs::{Ctx, Function, IntoJs, Value, qjs};

/// Text longer than this is left to QuickJS's own, whose string is counted
/// against the memory limit as it grows (this one is the host's until the end).
const MAX_TEXT_BYTES: usize = 4 << 20;
/// Deeper data is left to QuickJS's own, which checks the stack as it goes.
const MAX_DEPTH: usize = 64;
/// Nor does the walk start on a nearly full stack.
const MIN_STACK_BYTES: usize = 256 << 10;

pub(crate) enum Plain {
    /// `JSON.stringify`'s text of the value.
    Text(String),
    /// `JSON.stringify` answers `undefined` (the value is `undefined`).
    Undefined,
    /// Not plain data: QuickJS's own must answer.
    No,
}

/// What the walk found at one value.
enum Step {
    Wrote,
    /// `undefined`: left out of an object, `null` in an array.
    Skipped,
    No,
}

/// The class id of ordinary objects in this QuickJS build, read off one.
pub(crate) fn object_class(ctx: &Ctx<'_>) -> rquickjs::Result<u32> {
    let object = rquickjs::Object::new(ctx.clone())?;
    // SAFETY: reading the class id of a live object.
    Ok(unsafe { qjs::JS_GetClassID(object.as_raw()) })
}

/// The sandbox's `JSON.stringify`: plain data written here, anything else
/// (or a replacer, or an indent) by QuickJS's own.
pub(crate) fn stringify<'js>(ctx: &Ctx<'js>, object_class: u32) -> rquickjs::Result<Function<'js>> {
    let stringify = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, value: Opt<Value<'js>>, replacer: Opt<Value<'js>>, space: Opt<Value<'js>>| {
            let undefined = || Value::new_undefined(ctx.clone());
            let value = value.0.unwrap_or_else(undefined);
            let (replacer, space) = (replacer.0.unwrap_or_else(undefined), space.0.unwrap_or_else(undefined));
            if replacer.is_undefined() && space.is_undefined() {
                match text(&ctx, &value, object_class)? {
                    Plain::Text(text) => return text.into_js(&ctx),
                    Plain::Undefined => return Ok(undefined()),
                    Plain::No => {}
                }
            }
            // SAFETY: three live values of `ctx`, borrowed; the answer is a new value or an exception.
            unsafe {
                let out =
                    qjs::JS_JSONStringify(ctx.as_raw().as_ptr(), value.as_raw(), replacer.as_raw(), space.as_raw());
                if qjs::JS_IsException(out) {
                    return Err(rquickjs::Error::Exception);
                }
                Ok(Value::from_raw(ctx.clone(), out))
            }
        },
    )?
    .with_name("stringify")?
    .with_length(3)?;
    stringify.set_constructor(false);
    Ok(stringify)
}

/// The text `JSON.stringify(value)` gives, when `value` is plain data.
/// An error is an exception QuickJS raised (out of memory), pending in `ctx`.
pub(crate) fn text(ctx: &Ctx<'_>, value: &Value<'_>, object_class: u32) -> rquickjs::Result<Plain> {
    if stacker::remaining_stack().is_none_or(|left| left < MIN_STACK_BYTES) {
        return Ok(Plain::No);
    }
    let mut walk =
        Walk { ctx: ctx.as_raw().as_ptr(), object_class, out: Vec::new(), path: Vec::new(), protos: Vec::new() };
    // SAFETY: `value` is a live value of `ctx`, and the walk frees every value it takes.
    let step = unsafe { walk.value(value.as_raw()) };
    match step {
        Ok(Step::Wrote) => Ok(String::from_utf8(walk.out).map_or(Plain::No, Plain::Text)),
        Ok(Step::Skipped) => Ok(Plain::Undefined),
        Ok(Step::No) => Ok(Plain::No),
        Err(()) => Err(rquickjs::Error::Exception),
    }
}

struct Walk {
    ctx: *mut qjs::JSContext,
    object_class: u32,
    out: Vec<u8>,
    /// The objects being written, outermost first: a cycle is left to QuickJS's TypeError.
    path: Vec<usize>,
    /// Prototypes met, and whether their chain is free of `toJSON` and proxies.
    protos: Vec<(usize, bool)>,
}

/// `Err(())`: QuickJS raised an exception, pending in the context.
type Walked = Result<Step, ()>;

/// An own property, read without running any code.
enum Own {
    Absent,
    /// Its value, to be freed.
    Data(qjs::JSValue),
    Accessor,
}

impl Walk {
    /// Write `v`, borrowed.
    unsafe fn value(&mut self, v: qjs::JSValue) -> Walked {
        unsafe {
            match qjs::JS_VALUE_GET_NORM_TAG(v) {
                qjs::JS_TAG_INT => {
                    let mut digits = itoa::Buffer::new();
                    self.out.extend_from_slice(digits.format(qjs::JS_VALUE_GET_INT(v)).as_bytes());
                }
                qjs::JS_TAG_FLOAT64 if qjs::JS_VALUE_GET_FLOAT64(v).is_finite() => {
                    // Number::toString's shortest form, as QuickJS prints it.
                    let text = qjs::JS_ToString(self.ctx, v);
                    let wrote = self.text_of(text, false);
                    qjs::JS_FreeValue(self.ctx, text);
                    wrote?;
                }
                qjs::JS_TAG_FLOAT64 | qjs::JS_TAG_NULL => self.out.extend_from_slice(b"null"),
                qjs::JS_TAG_BOOL => {
                    self.out.extend_from_slice(if qjs::JS_VALUE_GET_BOOL(v) { b"true" } else { b"false" });
                }
                qjs::JS_TAG_UNDEFINED => return Ok(Step::Skipped),
                qjs::JS_TAG_STRING | qjs::JS_TAG_STRING_ROPE => self.text_of(v, true)?,
                qjs::JS_TAG_OBJECT => {
                    if !matches!(self.object(v)?, Step::Wrote) {
                        return Ok(Step::No);
                    }
                }
                // Symbols, BigInts: QuickJS's own leaves them out or throws.
                _ => return Ok(Step::No),
            }
        }
        Ok(if self.out.len() > MAX_TEXT_BYTES { Step::No } else { Step::Wrote })
    }

    unsafe fn object(&mut self, v: qjs::JSValue) -> Walked {
        unsafe {
            // Arrays and ordinary objects only: not proxies, functions, boxed
            // primitives, dates, errors or any other class.
            let array = qjs::JS_IsArray(v);
            if !array && qjs::JS_GetClassID(v) != self.object_class {
                return Ok(Step::No);
            }
            let at = qjs::JS_VALUE_GET_PTR(v) as usize;
            if self.path.len() >= MAX_DEPTH || self.path.contains(&at) || !self.prototype_plain(v)? {
                return Ok(Step::No);
            }
            self.path.push(at);
            let step = if array { self.array(v) } else { self.properties(v) };
            self.path.pop();
            step
        }
    }

    unsafe fn array(&mut self, v: qjs::JSValue) -> Walked {
        unsafe {
            if !matches!(self.own(v, qjs::JS_ATOM_toJSON as qjs::JSAtom)?, Own::Absent) {
                return Ok(Step::No);
            }
            let length = match self.own(v, qjs::JS_ATOM_length as qjs::JSAtom)? {
                Own::Data(length) if qjs::JS_VALUE_GET_NORM_TAG(length) == qjs::JS_TAG_INT => {
                    qjs::JS_VALUE_GET_INT(length)
                }
                Own::Data(length) => {
                    qjs::JS_FreeValue(self.ctx, length);
                    return Ok(Step::No);
                }
                _ => return Ok(Step::No),
            };
            self.out.push(b'[');
            for index in 0..length.max(0) as u32 {
                // Checked here too: `null`s for `undefined`s, one object many times.
                if self.out.len() > MAX_TEXT_BYTES {
                    return Ok(Step::No);
                }
                if index > 0 {
                    self.out.push(b',');
                }
                let atom = qjs::JS_NewAtomUInt32(self.ctx, index);
                let element = self.own(v, atom);
                qjs::JS_FreeAtom(self.ctx, atom);
                // A hole reads through the prototypes, an accessor runs code: QuickJS's own.
                let Own::Data(element) = element? else { return Ok(Step::No) };
                let step = self.value(element);
                qjs::JS_FreeValue(self.ctx, element);
                match step? {
                    Step::Wrote => {}
                    Step::Skipped => self.out.extend_from_slice(b"null"),
                    Step::No => return Ok(Step::No),
                }
            }
            self.out.push(b']');
            Ok(Step::Wrote)
        }
    }

    unsafe fn properties(&mut self, v: qjs::JSValue) -> Walked {
        unsafe {
            let mut names: *mut qjs::JSPropertyEnum = std::ptr::null_mut();
            let mut count = 0u32;
            if qjs::JS_GetOwnPropertyNames(self.ctx, &mut names, &mut count, v, qjs::JS_GPN_STRING_MASK as i32) < 0 {
                return Err(());
            }
            let step = if count == 0 {
                self.out.extend_from_slice(b"{}");
                Ok(Step::Wrote)
            } else {
                self.entries(v, std::slice::from_raw_parts(names, count as usize))
            };
            qjs::JS_FreePropertyEnum(self.ctx, names, count);
            step
        }
    }

    /// The keys come in `JSON.stringify`'s order: integer keys ascending, then
    /// the others as they were created.
    unsafe fn entries(&mut self, v: qjs::JSValue, names: &[qjs::JSPropertyEnum]) -> Walked {
        unsafe {
            self.out.push(b'{');
            let mut first = true;
            for name in names {
                if self.out.len() > MAX_TEXT_BYTES {
                    return Ok(Step::No);
                }
                // A `toJSON` is called even when it is not enumerable.
                if name.atom == qjs::JS_ATOM_toJSON as qjs::JSAtom {
                    return Ok(Step::No);
                }
                if !name.is_enumerable {
                    continue;
                }
                let value = match self.own(v, name.atom)? {
                    Own::Absent => continue,
                    Own::Data(value) => value,
                    Own::Accessor => return Ok(Step::No),
                };
                let start = self.out.len();
                if !first {
                    self.out.push(b',');
                }
                let step = self.key(name.atom).and_then(|()| {
                    self.out.push(b':');
                    self.value(value)
                });
                qjs::JS_FreeValue(self.ctx, value);
                match step? {
                    Step::Wrote => first = false,
                    Step::Skipped => self.out.truncate(start),
                    Step::No => return Ok(Step::No),
                }
            }
            self.out.push(b'}');
            Ok(Step::Wrote)
        }
    }

    /// Whether `v`'s prototype chain (`v` not a proxy) holds neither a
    /// `toJSON` nor a proxy, which `JSON.stringify`'s lookup would reach.
    unsafe fn prototype_plain(&mut self, v: qjs::JSValue) -> Result<bool, ()> {
        unsafe {
            let proto = qjs::JS_GetPrototype(self.ctx, v);
            if qjs::JS_IsException(proto) {
                return Err(());
            }
            if !qjs::JS_IsObject(proto) {
                return Ok(true);
            }
            let at = qjs::JS_VALUE_GET_PTR(proto) as usize;
            if let Some(&(_, plain)) = self.protos.iter().find(|(seen, _)| *seen == at) {
                qjs::JS_FreeValue(self.ctx, proto);
                return Ok(plain);
            }
            let plain = self.chain_plain(proto);
            if let Ok(plain) = plain {
                self.protos.push((at, plain));
            }
            plain
        }
    }

    /// Takes `proto`.
    unsafe fn chain_plain(&mut self, proto: qjs::JSValue) -> Result<bool, ()> {
        unsafe {
            let mut current = proto;
            for _ in 0..MAX_DEPTH {
                if qjs::JS_IsProxy(current) {
                    break;
                }
                let own = self.own(current, qjs::JS_ATOM_toJSON as qjs::JSAtom);
                let next = match own {
                    Ok(Own::Absent) => qjs::JS_GetPrototype(self.ctx, current),
                    Ok(Own::Data(found)) => {
                        qjs::JS_FreeValue(self.ctx, found);
                        break;
                    }
                    Ok(Own::Accessor) => break,
                    Err(()) => qjs::JS_EXCEPTION,
                };
                qjs::JS_FreeValue(self.ctx, current);
                if qjs::JS_IsException(next) {
                    return Err(());
                }
                if !qjs::JS_IsObject(next) {
                    return Ok(true);
                }
                current = next;
            }
            qjs::JS_FreeValue(self.ctx, current);
            Ok(false)
        }
    }

    unsafe fn own(&mut self, v: qjs::JSValue, atom: qjs::JSAtom) -> Result<Own, ()> {
        unsafe {
            let mut desc = std::mem::MaybeUninit::<qjs::JSPropertyDescriptor>::uninit();
            match qjs::JS_GetOwnProperty(self.ctx, desc.as_mut_ptr(), v, atom) {
                found if found < 0 => Err(()),
                0 => Ok(Own::Absent),
                _ => {
                    // SAFETY: QuickJS filled it in, having found the property.
                    let desc = desc.assume_init();
                    qjs::JS_FreeValue(self.ctx, desc.getter);
                    qjs::JS_FreeValue(self.ctx, desc.setter);
                    if desc.flags & qjs::JS_PROP_GETSET as i32 != 0 {
                        qjs::JS_FreeValue(self.ctx, desc.value);
                        return Ok(Own::Accessor);
                    }
                    Ok(Own::Data(desc.value))
                }
            }
        }
    }

    unsafe fn key(&mut self, atom: qjs::JSAtom) -> Result<(), ()> {
        unsafe {
            let mut len: qjs::size_t = 0;
            let text = qjs::JS_AtomToCStringLen(self.ctx, &mut len, atom);
            if text.is_null() {
                return Err(());
            }
            quote(&mut self.out, std::slice::from_raw_parts(text.cast(), len as usize));
            qjs::JS_FreeCString(self.ctx, text);
            Ok(())
        }
    }

    /// Append the string `v` (borrowed), quoted or as it is.
    unsafe fn text_of(&mut self, v: qjs::JSValue, quoted: bool) -> Result<(), ()> {
        unsafe {
            if qjs::JS_IsException(v) {
                return Err(());
            }
            let mut len: usize = 0;
            let text = qjs::JS_ToCStringLen(self.ctx, &mut len, v);
            if text.is_null() {
                return Err(());
            }
            let bytes = std::slice::from_raw_parts(text.cast(), len);
            if quoted {
                quote(&mut self.out, bytes)
            } else {
                self.out.extend_from_slice(bytes)
            }
            qjs::JS_FreeCString(self.ctx, text);
            Ok(())
        }
    }
}

/// Append `text` (QuickJS's UTF-8, where a lone surrogate is the three bytes
/// of its code point) as a JSON string, escaped as `JSON.stringify` escapes:
/// `"` and `\`, the control characters (short forms where JSON has them),
/// lone surrogates as `\udxxx`.
fn quote(out: &mut Vec<u8>, text: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(text.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        let byte = text[i];
        let lone_surrogate = byte == 0xED && text.get(i + 1).is_some_and(|next| (0xA0..=0xBF).contains(next));
        if byte >= 0x20 && byte != b'"' && byte != b'\\' && !lone_surrogate {
            i += 1;
            continue;
        }
        out.extend_from_slice(&text[start..i]);
        let (unit, width) = if lone_surrogate {
            let unit = (u32::from(text[i] & 0x0F) << 12)
                | (u32::from(text[i + 1] & 0x3F) << 6)
                | u32::from(text.get(i + 2).copied().unwrap_or(0x80) & 0x3F);
            (unit, 3)
        } else {
            (u32::from(byte), 1)
        };
        match unit {
            0x22 => out.extend_from_slice(b"\\\""),
            0x5C => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0A => out.extend_from_slice(b"\\n"),
            0x0C => out.extend_from_slice(b"\\f"),
            0x0D => out.extend_from_slice(b"\\r"),
            _ => {
                out.extend_from_slice(b"\\u");
                out.extend((0..4).rev().map(|shift| HEX[(unit >> (shift * 4)) as usize & 0xF]));
            }
        }
        i = (i + width).min(text.len());
        start = i;
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests;
