//! Redaction: no secret value leaves the catalog in any text (tool results,
//! error messages, logs), whatever encoding it travelled or came back in.
//!
//! [`Redactor`] matches each secret character by character, taking each
//! character in any of the forms an upstream, a URL or a serialiser may have
//! put it in: raw; percent-encoded (either hex case, also twice, `+` for a
//! space); JSON, JavaScript and Rust escapes (`\u00fc`, surrogate pairs,
//! `\u{fc}`, `\xfc`, `\/`, `\"`, any number of backslashes); HTML character
//! references (`&amp;`, `&#47;`, `&#x2F;`); UTF-8 read as Latin-1. Forms
//! may mix within one secret. The base64 forms of each secret (standard and
//! URL-safe alphabets, with and without padding) are secrets too, as is the
//! base64 of basic auth's `user:password`.
//!
//! [`display_url`] is how a URL is written into any text: without userinfo,
//! query or fragment, where credentials travel.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use serde_json::Value;
use url::Url;

pub use executor_core::REDACTED;

/// A URL as it may appear in messages and logs: scheme, host, port and path.
pub fn display_url(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    // Both fail only for URLs that cannot have userinfo, which then have none.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

/// Replaces known secret values, in every encoding they may take, with [`REDACTED`].
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<Secret>,
    /// The bytes any match can start with, so most of a text is skipped at a glance.
    starts: ByteSet,
}

#[derive(Debug, Clone)]
struct Secret {
    value: Arc<str>,
    /// The bytes a form of it can start with.
    starts: ByteSet,
}

/// A set of bytes.
#[derive(Debug, Clone, Copy, Default)]
struct ByteSet([u64; 4]);

impl ByteSet {
    fn insert(&mut self, byte: u8) {
        self.0[usize::from(byte / 64)] |= 1 << (byte % 64);
    }

    fn contains(&self, byte: u8) -> bool {
        self.0[usize::from(byte / 64)] & (1 << (byte % 64)) != 0
    }
}

impl Redactor {
    /// Very short values would redact ordinary text and are unlikely to be real secrets.
    const MIN_LEN: usize = 4;

    /// A secret value, and its base64 forms.
    pub fn add(&mut self, value: &str) {
        if value.len() < Self::MIN_LEN {
            return;
        }
        self.insert(value);
        self.add_base64(value.as_bytes());
    }

    /// Basic auth's password, and the base64 of `user:password` that the header carries.
    pub fn add_basic(&mut self, username: &str, password: &str) {
        self.add(password);
        self.add_base64(format!("{username}:{password}").as_bytes());
    }

    /// What a configured URL carries: its password (and the basic auth made
    /// of its userinfo) and every query value, any of which may be a key.
    pub fn add_url_credentials(&mut self, url: &Url) {
        let decode = |text: &str| percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned();
        if let Some(password) = url.password() {
            self.add_basic(&decode(url.username()), &decode(password));
        }
        for (_, value) in url.query_pairs() {
            self.add(&value);
        }
    }

    fn add_base64(&mut self, bytes: &[u8]) {
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            self.insert(&engine.encode(bytes));
        }
    }

    fn insert(&mut self, value: &str) {
        if self.secrets.iter().any(|s| &*s.value == value) {
            return;
        }
        let Some(first) = value.chars().next() else { return };
        let mut starts = ByteSet::default();
        let mut buffer = [0; 4];
        // Raw, percent, escapes and character references, `+` for a space, UTF-8 read as Latin-1.
        for byte in [first.encode_utf8(&mut buffer).as_bytes()[0], b'%', b'\\', b'&'] {
            starts.insert(byte);
        }
        if first == ' ' {
            starts.insert(b'+');
        }
        if !first.is_ascii() {
            starts.insert(0xc2);
            starts.insert(0xc3);
        }
        for (all, these) in self.starts.0.iter_mut().zip(starts.0) {
            *all |= these;
        }
        self.secrets.push(Secret { value: value.into(), starts });
    }

    pub fn redact(&self, text: &str) -> String {
        if self.secrets.is_empty() {
            return text.to_owned();
        }
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut scratch = Scratch::default();
        let (mut copied, mut at) = (0, 0);
        while at < bytes.len() {
            if self.starts.contains(bytes[at]) && text.is_char_boundary(at) {
                // The longest match wins, so a secret containing another goes whole.
                let end = self
                    .secrets
                    .iter()
                    .filter(|s| s.starts.contains(bytes[at]))
                    .filter_map(|s| scratch.matched(bytes, at, &s.value))
                    .max();
                if let Some(end) = end.filter(|end| text.is_char_boundary(*end)) {
                    out.push_str(&text[copied..at]);
                    out.push_str(REDACTED);
                    (copied, at) = (end, end);
                    continue;
                }
            }
            at += 1;
        }
        out.push_str(&text[copied..]);
        out
    }

    /// The first `chars` characters of a body, redacted before it is cut (a
    /// secret cut in half would no longer be recognised).
    pub fn excerpt(&self, body: &[u8], chars: usize) -> String {
        let text = self.redact(&String::from_utf8_lossy(body));
        text.chars().take(chars).collect::<String>().trim().to_owned()
    }

    /// Data echoed back with a secret in it must not reach the code or the journal.
    pub fn redact_json(&self, data: Value) -> Value {
        if self.secrets.is_empty() {
            return data;
        }
        let text = data.to_string();
        let redacted = self.redact(&text);
        if redacted == text {
            return data;
        }
        // Should a replacement break the JSON text, the text itself is the result.
        serde_json::from_str(&redacted).unwrap_or(Value::String(redacted))
    }
}

/// Where matches may have got to: every way of reading the text so far.
/// Kept between attempts, so matching allocates nothing once warm.
#[derive(Default)]
struct Scratch {
    ends: Vec<usize>,
    next: Vec<usize>,
    bytes: [Vec<usize>; 2],
}

impl Scratch {
    /// The end of `secret` in `text` starting at `start`, if it is there in any form.
    fn matched(&mut self, text: &[u8], start: usize, secret: &str) -> Option<usize> {
        self.ends.clear();
        self.ends.push(start);
        for c in secret.chars() {
            self.next.clear();
            for &at in &self.ends {
                char_forms(text, at, c, &mut self.next, &mut self.bytes);
            }
            if self.next.is_empty() {
                return None;
            }
            self.next.sort_unstable();
            self.next.dedup();
            std::mem::swap(&mut self.ends, &mut self.next);
        }
        self.ends.last().copied()
    }
}

/// Every end of a form of `c` starting at `at`.
fn char_forms(text: &[u8], at: usize, c: char, out: &mut Vec<usize>, scratch: &mut [Vec<usize>; 2]) {
    // Byte by byte: each byte of the UTF-8 form in any byte form.
    let [ends, next] = scratch;
    ends.clear();
    ends.push(at);
    let mut utf8 = [0; 4];
    for &byte in c.encode_utf8(&mut utf8).as_bytes() {
        next.clear();
        for &end in ends.iter() {
            byte_forms(text, end, byte, next);
        }
        std::mem::swap(ends, next);
    }
    out.extend(ends.iter().copied());
    escape_forms(text, at, c, out);
    reference_forms(text, at, c, out);
}

fn byte_forms(text: &[u8], at: usize, byte: u8, out: &mut Vec<usize>) {
    let rest = &text[at.min(text.len())..];
    if rest.first() == Some(&byte) || (byte == b' ' && rest.first() == Some(&b'+')) {
        out.push(at + 1);
    }
    if rest.first() == Some(&b'%') {
        if hex(rest, 1, 2) == Some(u32::from(byte)) {
            out.push(at + 3);
        }
        // Encoded twice: `%` itself as `%25`.
        if rest.get(1..3) == Some(b"25") && hex(rest, 3, 2) == Some(u32::from(byte)) {
            out.push(at + 5);
        }
    }
    let backslashes = rest.iter().take_while(|b| **b == b'\\').count();
    if backslashes > 0 && rest.get(backslashes) == Some(&b'x') && hex(rest, backslashes + 1, 2) == Some(u32::from(byte))
    {
        out.push(at + backslashes + 3);
    }
    if byte >= 0x80 {
        let mut latin1 = [0; 2];
        if rest.starts_with(char::from(byte).encode_utf8(&mut latin1).as_bytes()) {
            out.push(at + 2);
        }
    }
}

/// `\u00fc`, `\ud83d\ude00`, `\u{fc}`, `\xfc`, `\n`, `\/`, ..., after one or more backslashes.
fn escape_forms(text: &[u8], at: usize, c: char, out: &mut Vec<usize>) {
    let rest = &text[at.min(text.len())..];
    let run = rest.iter().take_while(|b| **b == b'\\').count();
    if run == 0 {
        return;
    }
    if c == '\\' {
        // One backslash, escaped once or more (and, below, as `\x5c`, `\u005c`, `\u{5c}`).
        out.extend((2..=run).map(|n| at + n));
    }
    let body = &rest[run..];
    let end = at + run;
    let simple = match c {
        '\n' => Some(b'n'),
        '\r' => Some(b'r'),
        '\t' => Some(b't'),
        '\u{8}' => Some(b'b'),
        '\u{c}' => Some(b'f'),
        '\0' => Some(b'0'),
        '"' | '\'' | '/' => u8::try_from(c).ok(),
        _ => None,
    };
    if simple.is_some() && body.first().copied() == simple {
        out.push(end + 1);
    }
    if body.first() == Some(&b'x') && hex(body, 1, 2) == Some(u32::from(c)) {
        out.push(end + 3);
    }
    if body.first() != Some(&b'u') {
        return;
    }
    if body.get(1) == Some(&b'{') {
        let digits = body[2..].iter().take_while(|b| b.is_ascii_hexdigit()).count();
        if (1..=6).contains(&digits)
            && body.get(2 + digits) == Some(&b'}')
            && hex(body, 2, digits) == Some(u32::from(c))
        {
            out.push(end + digits + 3);
        }
        return;
    }
    let Some(unit) = hex(body, 1, 4) else { return };
    if unit == u32::from(c) {
        out.push(end + 5);
    }
    // A surrogate pair: the low half follows with its own backslashes.
    let mut pair = [0; 2];
    if let [high, low] = c.encode_utf16(&mut pair) {
        let second = &body[5..];
        let run2 = second.iter().take_while(|b| **b == b'\\').count();
        if unit == u32::from(*high)
            && run2 > 0
            && second.get(run2) == Some(&b'u')
            && hex(second, run2 + 1, 4) == Some(u32::from(*low))
        {
            out.push(end + 5 + run2 + 5);
        }
    }
}

/// `&amp;`, `&quot;`, `&#47;`, `&#x2F;` and the like.
fn reference_forms(text: &[u8], at: usize, c: char, out: &mut Vec<usize>) {
    let rest = &text[at.min(text.len())..];
    if rest.first() != Some(&b'&') {
        return;
    }
    let named: &[u8] = match c {
        '&' => b"&amp;",
        '<' => b"&lt;",
        '>' => b"&gt;",
        '"' => b"&quot;",
        '\'' => b"&apos;",
        _ => b"",
    };
    if !named.is_empty() && rest.len() >= named.len() && rest[..named.len()].eq_ignore_ascii_case(named) {
        out.push(at + named.len());
    }
    if rest.get(1) != Some(&b'#') {
        return;
    }
    let hexadecimal = matches!(rest.get(2), Some(b'x' | b'X'));
    let from = if hexadecimal { 3 } else { 2 };
    let digits = rest[from..]
        .iter()
        .take_while(|b| if hexadecimal { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
        .count();
    if !(1..=8).contains(&digits) || rest.get(from + digits) != Some(&b';') {
        return;
    }
    let text = std::str::from_utf8(&rest[from..from + digits]).ok();
    let value = text.and_then(|t| u32::from_str_radix(t, if hexadecimal { 16 } else { 10 }).ok());
    if value == Some(u32::from(c)) {
        out.push(at + from + digits + 1);
    }
}

/// The number written in `len` hex digits at `text[from..]`, either case.
fn hex(text: &[u8], from: usize, len: usize) -> Option<u32> {
    let digits = text.get(from..from + len)?;
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "k/+= &%ü\"\\9x";

    fn redactor() -> Redactor {
        let mut redactor = Redactor::default();
        redactor.add(SECRET);
        redactor
    }

    #[test]
    fn every_form_of_a_secret_is_redacted() {
        let forms = [
            SECRET.to_owned(),
            // Form encoding (`+` for space), both hex cases, and the URL crate's own.
            "k%2F%2B%3D+%26%25%C3%BC%22%5C9x".into(),
            "k%2f%2b%3d%20%26%25%c3%bc%22%5c9x".into(),
            url::form_urlencoded::byte_serialize(SECRET.as_bytes()).collect(),
            // encodeURIComponent leaves more alone; part encoded, part not.
            "k%2F%2B%3D%20%26%25%C3%BC%22%5C9x".into(),
            "k/+=%20&%25ü\"%5C9x".into(),
            // Encoded twice.
            "k%252F%252B%253D%2520%2526%2525%25C3%25BC%2522%255C9x".into(),
            // JSON, as serialised and as escaped by careful serialisers, and JSON in JSON.
            serde_json::to_string(SECRET).unwrap().trim_matches('"').to_owned(),
            "k\\/+\\u003d \\u0026%\\u00FC\\\"\\\\9x".into(),
            "k\\\\/+= &%\\\\u00fc\\\\\\\"\\\\\\\\9x".into(),
            // Rust's Debug, JavaScript's \x.
            format!("{SECRET:?}").trim_matches('"').to_owned(),
            "k/+= &%\\u{fc}\"\\\\9x".into(),
            "k/+= &%\\xfc\"\\\\9x".into(),
            "k/+= &%\\xc3\\xbc\"\\\\9x".into(),
            // The backslash as an escape of its own.
            "k/+= &%ü\"\\u005c9x".into(),
            "k/+= &%ü\"\\x5C9x".into(),
            "k/+= &%ü\"\\u{5c}9x".into(),
            // HTML.
            "k&#x2F;+=&#32;&amp;%&#252;&quot;\\9x".into(),
            // UTF-8 read as Latin-1.
            "k/+= &%Ã¼\"\\9x".into(),
            // base64 in both alphabets, with and without padding, and percent-encoded.
            STANDARD.encode(SECRET),
            URL_SAFE_NO_PAD.encode(SECRET),
            url::form_urlencoded::byte_serialize(STANDARD.encode(SECRET).as_bytes()).collect(),
        ];
        let redactor = redactor();
        for form in forms {
            let text = format!("before {form} after");
            assert_eq!(redactor.redact(&text), format!("before {REDACTED} after"), "{form}");
        }
    }

    #[test]
    fn astral_characters_match_as_surrogate_pairs() {
        let mut redactor = Redactor::default();
        redactor.add("key😀key");
        assert_eq!(redactor.redact(r#""key\ud83d\ude00key""#), format!("\"{REDACTED}\""));
        assert_eq!(redactor.redact(r#"key\uD83D\uDE00ke"#), r#"key\uD83D\uDE00ke"#, "a prefix is not the secret");
    }

    #[test]
    fn basic_auth_and_url_credentials() {
        let mut redactor = Redactor::default();
        redactor.add_basic("alice", "pa ss/wörd");
        let header = format!("Basic {}", STANDARD.encode("alice:pa ss/wörd"));
        assert_eq!(redactor.redact(&header), format!("Basic {REDACTED}"));

        let mut redactor = Redactor::default();
        let url = Url::parse("https://bob:s%2Fcr%C3%A9t@h.test/spec?key=a%2Bb+c&v=1").unwrap();
        redactor.add_url_credentials(&url);
        assert_eq!(redactor.redact("got s/crét and a+b c, v=1"), format!("got {REDACTED} and {REDACTED}, v=1"));
        assert_eq!(display_url(&url), "https://h.test/spec");
    }

    #[test]
    fn longest_match_wins_and_short_values_are_ignored() {
        let mut redactor = Redactor::default();
        redactor.add("abc");
        redactor.add("s3cret");
        redactor.add("s3cret-and-more");
        let text = "Authorization: Bearer s3cret-and-more; again s3cret; abc stays";
        assert_eq!(redactor.redact(text), format!("Authorization: Bearer {REDACTED}; again {REDACTED}; abc stays"));
    }

    #[test]
    fn excerpts_are_redacted_before_they_are_cut() {
        let redactor = redactor();
        let body = format!("{}{SECRET}", "x".repeat(8));
        assert_eq!(redactor.excerpt(body.as_bytes(), 12), "xxxxxxxx[red");
    }

    #[test]
    fn json_stays_json() {
        let redactor = redactor();
        let data = serde_json::json!({"echo": SECRET, "n": 1});
        assert_eq!(redactor.redact_json(data), serde_json::json!({"echo": REDACTED, "n": 1}));
    }

    /// Secrets written character by character in forms chosen at random, the
    /// way an attacker (or an upstream that echoes) may mix them.
    mod generated {
        use proptest::prelude::*;

        use super::*;

        /// Characters of every kind a form treats apart: plain, reserved in
        /// URLs, escaped in JSON and HTML, backslash, Latin-1, multi-byte, astral.
        fn character() -> impl Strategy<Value = char> {
            prop::sample::select(vec![
                'a', 'Z', '7', '-', '_', '.', '/', '+', '=', ' ', '&', '%', '"', '\'', '<', '>', '\\', '\n', '\t', 'ü',
                'é', 'ß', '中', '😀',
            ])
        }

        /// Hex digits in either case.
        fn hex(value: u32, width: usize, upper: bool) -> String {
            match upper {
                true => format!("{value:0width$X}"),
                false => format!("{value:0width$x}"),
            }
        }

        /// `c` in the form numbered `form` (modulo the forms `c` has), hex in
        /// upper case or not, escapes after `slashes` backslashes.
        fn written(c: char, form: usize, upper: bool, slashes: usize) -> String {
            let mut utf8 = [0; 4];
            let bytes = c.encode_utf8(&mut utf8).as_bytes().to_vec();
            let slash = "\\".repeat(slashes);
            let code = u32::from(c);
            let mut forms = vec![
                c.to_string(),
                bytes.iter().map(|b| format!("%{}", hex(u32::from(*b), 2, upper))).collect(),
                bytes.iter().map(|b| format!("%25{}", hex(u32::from(*b), 2, upper))).collect(),
                format!("{slash}u{{{}}}", hex(code, 1, upper)),
                format!("&#{code};"),
                format!("&#x{};", hex(code, 1, upper)),
                bytes.iter().map(|b| format!("{slash}x{}", hex(u32::from(*b), 2, upper))).collect(),
            ];
            let mut pair = [0; 2];
            match c.encode_utf16(&mut pair) {
                [unit] => forms.push(format!("{slash}u{}", hex(u32::from(*unit), 4, upper))),
                [high, low] => forms.push(format!(
                    "{slash}u{}{slash}u{}",
                    hex(u32::from(*high), 4, upper),
                    hex(u32::from(*low), 4, upper)
                )),
                _ => {}
            }
            if (0x80..0x100).contains(&code) {
                forms.push(format!("{slash}x{}", hex(code, 2, upper)));
            }
            if !c.is_ascii() {
                forms.push(bytes.iter().map(|b| char::from(*b)).collect());
            }
            match c {
                ' ' => forms.push("+".into()),
                '\n' => forms.push(format!("{slash}n")),
                '\t' => forms.push(format!("{slash}t")),
                '/' | '"' | '\'' => forms.push(format!("{slash}{c}")),
                '\\' => forms.push(format!("{slash}\\")),
                _ => {}
            }
            let named = match c {
                '&' => "&amp;",
                '<' => "&lt;",
                '>' => "&gt;",
                '"' => "&quot;",
                '\'' => "&apos;",
                _ => "",
            };
            if !named.is_empty() {
                forms.push(named.into());
            }
            forms.swap_remove(form % forms.len())
        }

        proptest! {
            #[test]
            fn a_secret_in_mixed_forms_is_redacted(
                secret in prop::collection::vec(character(), 4..16),
                choices in prop::collection::vec((0usize..16, any::<bool>(), 1usize..4), 16),
            ) {
                let secret: String = secret.into_iter().collect();
                let mut redactor = Redactor::default();
                redactor.add(&secret);
                let form: String = secret
                    .chars()
                    .zip(&choices)
                    .map(|(c, (form, upper, slashes))| written(c, *form, *upper, *slashes))
                    .collect();
                // `|` is in no form of any character above: nothing outside the form can match.
                let text = format!("before| {form} |after");
                prop_assert_eq!(redactor.redact(&text), format!("before| {REDACTED} |after"), "{:?} as {:?}", secret, form);
                for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
                    let text = format!("| {} |", engine.encode(&secret));
                    prop_assert_eq!(redactor.redact(&text), format!("| {REDACTED} |"), "{:?} in base64", secret);
                }
            }

            #[test]
            fn text_without_the_secret_is_left_alone(
                secret in "[a-z]{2,6}Q[a-z]{1,6}",
                text in "[a-z ,.:|]{0,80}",
            ) {
                let mut redactor = Redactor::default();
                redactor.add(&secret);
                prop_assert_eq!(redactor.redact(&text), text);
            }
        }
    }
}
