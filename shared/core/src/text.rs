//! Text shown to people (approval pages, approval messages, the audit
//! trail): bounded in size, with fields named like secrets redacted.

use serde_json::Value;

/// What a redacted secret reads as.
pub const REDACTED: &str = "[redacted]";

/// Argument names whose values are secrets whatever they hold, compared
/// without case, `-` or `_`.
const SECRET_NAMES: [&str; 10] = [
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "credential",
    "privatekey",
    "cookie",
    "clientsecret",
];

/// `args` with the value of every field named like a secret (at any depth) redacted.
pub fn redact_secret_fields(args: &Value) -> Value {
    match args {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(name, value)| {
                    let value =
                        if is_secret_name(name) { Value::String(REDACTED.into()) } else { redact_secret_fields(value) };
                    (name.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact_secret_fields).collect()),
        other => other.clone(),
    }
}

fn is_secret_name(name: &str) -> bool {
    let plain: String = name.chars().filter(|c| *c != '-' && *c != '_').flat_map(char::to_lowercase).collect();
    SECRET_NAMES.iter().any(|secret| plain.contains(secret))
}

/// At most `limit` bytes, cut at a character boundary, saying how much is left out.
pub fn cut_text(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} more bytes not shown)", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::{cut_text, is_secret_name};

    #[test]
    fn cuts_at_a_character_boundary_and_says_how_much() {
        let cases = [
            ("short", 10, "short"),
            ("exactly", 7, "exactly"),
            ("abcdef", 3, "abc\n… (3 more bytes not shown)"),
            // "é" is two bytes: a cut inside it moves back before it.
            ("aéb", 2, "a\n… (3 more bytes not shown)"),
        ];
        for (text, limit, expected) in cases {
            assert_eq!(cut_text(text, limit), expected, "{text:?} at {limit}");
        }
    }

    #[test]
    fn secret_names_are_matched_loosely_and_only_them() {
        let cases = [
            ("password", true),
            ("api_key", true),
            ("API-KEY", true),
            ("access_token", true),
            ("client_secret", true),
            ("Authorization", true),
            ("name", false),
            ("title", false),
            ("key", false),
            ("body", false),
        ];
        for (name, secret) in cases {
            assert_eq!(is_secret_name(name), secret, "{name}");
        }
    }
}
