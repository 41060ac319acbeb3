//! `JSON.parse` of a string, read here and built over QuickJS's C API.
//!
//! QuickJS's tokenizer was a fifth of W3's time (docs/benchmarks.md). This
//! reader takes strict JSON (RFC 8259) in one pass over the text's bytes and
//! builds the values as QuickJS's own does: objects with `Object.prototype`,
//! each member defined (so a `__proto__` key is an own property and a repeated
//! key keeps its first place and its last value), numbers correctly rounded.
//! It gives up, answering `None`, on anything it would have to decide like
//! QuickJS: an error (QuickJS's own then reads the text and throws its
//! `SyntaxError`), a lone surrogate in the text or in an escape, nesting over
//! 64 levels. The caller (prelude.js) then uses QuickJS's own, as it does for
//! a reviver or a value that is not a string. The generated tests
//! (`json_parse/tests.rs`) hold the two to the same values.

use rquickjs::{Ctx, Function, Value, qjs};

/// Deeper text is left to QuickJS's own, which checks the stack as it goes.
const MAX_DEPTH: usize = 64;

/// The host function prelude.js calls: the value of `text`, or `undefined`
/// when QuickJS's own must read it (JSON has no `undefined`).
pub(crate) fn host_parse<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
    Function::new(ctx.clone(), |ctx: Ctx<'js>, text: rquickjs::String<'js>| -> rquickjs::Result<Value<'js>> {
        // SAFETY: `text` is a live string of `ctx`; the reader frees all it makes but what it returns.
        match unsafe { parse(ctx.as_raw().as_ptr(), text.as_raw()) } {
            Ok(value) => Ok(unsafe { Value::from_raw(ctx, value) }),
            Err(Stop::Declined) => Ok(Value::new_undefined(ctx)),
            Err(Stop::Exception) => Err(rquickjs::Error::Exception),
        }
    })
}

enum Stop {
    /// QuickJS's own decides this text.
    Declined,
    /// QuickJS raised an exception (out of memory), pending in the context.
    Exception,
}

/// A value the reader made, freed unless it is handed on.
struct Made {
    ctx: *mut qjs::JSContext,
    value: qjs::JSValue,
}

impl Made {
    fn new(ctx: *mut qjs::JSContext, value: qjs::JSValue) -> Result<Self, Stop> {
        // SAFETY: reading a value's tag.
        if unsafe { qjs::JS_IsException(value) } { Err(Stop::Exception) } else { Ok(Self { ctx, value }) }
    }

    fn take(self) -> qjs::JSValue {
        let value = self.value;
        std::mem::forget(self);
        value
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        // SAFETY: the reader owns this value.
        unsafe { qjs::JS_FreeValue(self.ctx, self.value) }
    }
}

unsafe fn parse(ctx: *mut qjs::JSContext, text: qjs::JSValue) -> Result<qjs::JSValue, Stop> {
    unsafe {
        let mut len: usize = 0;
        let bytes = qjs::JS_ToCStringLen(ctx, &mut len, text);
        if bytes.is_null() {
            return Err(Stop::Exception);
        }
        let source = std::slice::from_raw_parts(bytes.cast::<u8>(), len);
        let read = if has_lone_surrogate(source) {
            Err(Stop::Declined)
        } else {
            let mut reader = Reader { ctx, text: source, at: 0, depth: 0, scratch: Vec::new() };
            reader.value().and_then(|value| {
                reader.skip_space();
                if reader.at == source.len() { Ok(value.take()) } else { Err(Stop::Declined) }
            })
        };
        qjs::JS_FreeCString(ctx, bytes);
        read
    }
}

/// QuickJS's UTF-8 of a string holds a lone surrogate as the three bytes of
/// its code point (0xED, then 0xA0 to 0xBF); a JS string made from UTF-8
/// could not hold it.
fn has_lone_surrogate(text: &[u8]) -> bool {
    text.windows(2).any(|pair| pair[0] == 0xED && (0xA0..=0xBF).contains(&pair[1]))
}

/// A string's text: a range of the source, or (with escapes) decoded in `scratch`.
enum Str {
    Raw(std::ops::Range<usize>),
    Decoded,
}

struct Reader<'t> {
    ctx: *mut qjs::JSContext,
    text: &'t [u8],
    at: usize,
    depth: usize,
    /// A string with escapes, decoded.
    scratch: Vec<u8>,
}

impl Reader<'_> {
    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        self.skip_space();
        let found = self.text.get(self.at) == Some(&byte);
        self.at += usize::from(found);
        found
    }

    fn value(&mut self) -> Result<Made, Stop> {
        self.skip_space();
        let ctx = self.ctx;
        match self.text.get(self.at) {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => {
                let string = self.string()?;
                let text = self.bytes(&string);
                // SAFETY: `text` is UTF-8 without lone surrogates.
                Made::new(ctx, unsafe { qjs::JS_NewStringLen(ctx, text.as_ptr().cast(), text.len() as _) })
            }
            Some(b'-' | b'0'..=b'9') => {
                let number = self.number()?;
                Made::new(ctx, qjs::JS_NewFloat64(number))
            }
            Some(_) => {
                for (word, value) in [(&b"true"[..], qjs::JS_TRUE), (b"false", qjs::JS_FALSE), (b"null", qjs::JS_NULL)]
                {
                    if self.text[self.at..].starts_with(word) {
                        self.at += word.len();
                        return Made::new(ctx, value);
                    }
                }
                Err(Stop::Declined)
            }
            None => Err(Stop::Declined),
        }
    }

    fn nested(&mut self, read: fn(&mut Self) -> Result<Made, Stop>) -> Result<Made, Stop> {
        if self.depth >= MAX_DEPTH {
            return Err(Stop::Declined);
        }
        self.depth += 1;
        self.at += 1;
        let made = read(self);
        self.depth -= 1;
        made
    }

    fn array(&mut self) -> Result<Made, Stop> {
        // SAFETY: a new array of this context.
        let array = Made::new(self.ctx, unsafe { qjs::JS_NewArray(self.ctx) })?;
        if self.eat(b']') {
            return Ok(array);
        }
        for index in 0u32.. {
            let element = self.value()?;
            // SAFETY: the array is ours; the call takes the element.
            if unsafe {
                qjs::JS_DefinePropertyValueUint32(
                    self.ctx,
                    array.value,
                    index,
                    element.take(),
                    qjs::JS_PROP_C_W_E as i32,
                )
            } < 0
            {
                return Err(Stop::Exception);
            }
            if self.eat(b']') {
                break;
            }
            if !self.eat(b',') {
                return Err(Stop::Declined);
            }
        }
        Ok(array)
    }

    fn object(&mut self) -> Result<Made, Stop> {
        // SAFETY: a new object of this context, with `Object.prototype`.
        let object = Made::new(self.ctx, unsafe { qjs::JS_NewObject(self.ctx) })?;
        if self.eat(b'}') {
            return Ok(object);
        }
        loop {
            self.skip_space();
            if self.text.get(self.at) != Some(&b'"') {
                return Err(Stop::Declined);
            }
            let string = self.string()?;
            let key = self.bytes(&string);
            // SAFETY: `key` is UTF-8 without lone surrogates.
            let atom = unsafe { qjs::JS_NewAtomLen(self.ctx, key.as_ptr().cast(), key.len() as _) };
            if atom == qjs::JS_ATOM_NULL as qjs::JSAtom {
                return Err(Stop::Exception);
            }
            let member = if self.eat(b':') { self.value() } else { Err(Stop::Declined) };
            let defined = member.and_then(|member| {
                // SAFETY: the object and the atom are ours; the call takes the member.
                let defined = unsafe {
                    qjs::JS_DefinePropertyValue(self.ctx, object.value, atom, member.take(), qjs::JS_PROP_C_W_E as i32)
                };
                if defined < 0 { Err(Stop::Exception) } else { Ok(()) }
            });
            // SAFETY: the atom is ours.
            unsafe { qjs::JS_FreeAtom(self.ctx, atom) };
            defined?;
            if self.eat(b'}') {
                return Ok(object);
            }
            if !self.eat(b',') {
                return Err(Stop::Declined);
            }
        }
    }

    fn bytes(&self, string: &Str) -> &[u8] {
        match string {
            Str::Raw(range) => &self.text[range.clone()],
            Str::Decoded => &self.scratch,
        }
    }

    /// Read the string at `self.at` (its opening quote).
    fn string(&mut self) -> Result<Str, Stop> {
        self.scratch.clear();
        let start = self.at + 1;
        let mut at = start;
        loop {
            match self.text.get(at) {
                Some(b'"') => {
                    self.at = at + 1;
                    return Ok(Str::Raw(start..at));
                }
                Some(b'\\') => break,
                Some(0..0x20) | None => return Err(Stop::Declined),
                Some(_) => at += 1,
            }
        }
        self.scratch.extend_from_slice(&self.text[start..at]);
        loop {
            match self.text.get(at) {
                Some(b'"') => {
                    self.at = at + 1;
                    return Ok(Str::Decoded);
                }
                Some(b'\\') => {
                    let escaped = match self.text.get(at + 1) {
                        Some(b'"') => b'"',
                        Some(b'\\') => b'\\',
                        Some(b'/') => b'/',
                        Some(b'b') => 0x08,
                        Some(b'f') => 0x0C,
                        Some(b'n') => b'\n',
                        Some(b'r') => b'\r',
                        Some(b't') => b'\t',
                        Some(b'u') => {
                            at = self.unicode_escape(at)?;
                            continue;
                        }
                        _ => return Err(Stop::Declined),
                    };
                    self.scratch.push(escaped);
                    at += 2;
                }
                Some(0..0x20) | None => return Err(Stop::Declined),
                Some(&byte) => {
                    self.scratch.push(byte);
                    at += 1;
                }
            }
        }
    }

    /// Decode the `\uXXXX` at `at` (a surrogate pair as one), into `scratch`;
    /// the position after it.
    fn unicode_escape(&mut self, at: usize) -> Result<usize, Stop> {
        let unit = |from: usize| -> Option<u32> {
            let digits = self.text.get(from..from + 6)?;
            if &digits[..2] != b"\\u" {
                return None;
            }
            let digits = std::str::from_utf8(&digits[2..]).ok()?;
            if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(digits, 16).ok()
        };
        let first = unit(at).ok_or(Stop::Declined)?;
        let (code, next) = match first {
            0xD800..=0xDBFF => match unit(at + 6) {
                Some(second @ 0xDC00..=0xDFFF) => (0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00), at + 12),
                // A lone surrogate: QuickJS's own makes that string.
                _ => return Err(Stop::Declined),
            },
            0xDC00..=0xDFFF => return Err(Stop::Declined),
            _ => (first, at + 6),
        };
        let decoded = char::from_u32(code).ok_or(Stop::Declined)?;
        self.scratch.extend_from_slice(decoded.encode_utf8(&mut [0; 4]).as_bytes());
        Ok(next)
    }

    /// Read a number as JSON writes them, correctly rounded.
    fn number(&mut self) -> Result<f64, Stop> {
        let start = self.at;
        let digits = |text: &[u8], mut at: usize| {
            let from = at;
            while text.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            (at, at - from)
        };
        let mut at = start + usize::from(self.text[start] == b'-');
        // No leading zero but a lone one.
        let (after, count) = digits(self.text, at);
        if count == 0 || (count > 1 && self.text[at] == b'0') {
            return Err(Stop::Declined);
        }
        at = after;
        if self.text.get(at) == Some(&b'.') {
            let (after, count) = digits(self.text, at + 1);
            if count == 0 {
                return Err(Stop::Declined);
            }
            at = after;
        }
        if let Some(b'e' | b'E') = self.text.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = self.text.get(at) {
                at += 1;
            }
            let (after, count) = digits(self.text, at);
            if count == 0 {
                return Err(Stop::Declined);
            }
            at = after;
        }
        self.at = at;
        // ASCII digits, signs, a point and an exponent: a valid `f64` literal too.
        let literal = std::str::from_utf8(&self.text[start..at]).map_err(|_| Stop::Declined)?;
        literal.parse().map_err(|_| Stop::Declined)
    }
}

#[cfg(test)]
mod tests;
