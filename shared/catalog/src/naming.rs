//! Tool paths: `<namespace>.<group>.<name>`, each segment a JavaScript
//! identifier so `tools.github.issues.create(...)` is plain property access.

use std::collections::HashMap;

/// Letters, digits, `_` and `$`, not starting with a digit.
pub fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Turns free text (`issues/create`, `GET /users/{id}`) into an identifier:
/// runs of other characters become one `_`, edges are trimmed, a leading
/// digit gets a `_` in front, nothing at all becomes `_`.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out.trim_matches('_');
    match trimmed.chars().next() {
        None => "_".into(),
        Some(c) if c.is_ascii_digit() => format!("_{trimmed}"),
        Some(_) => trimmed.into(),
    }
}

/// Names the sandbox's `tools` object answers itself on every node:
/// `then` (so that awaiting a node is not awaiting a call) and the
/// `toString` and `toJSON` that print the hint on how to find tools.
const ANSWERED_BY_TOOLS: [&str; 3] = ["then", "toString", "toJSON"];

/// One segment of a tool's path (`tools.<namespace>.<segment>...`) from
/// free text: [`sanitize`]d, and with a `_` after a name the `tools` object
/// answers itself, which no call could reach (`then` becomes `then_`).
pub fn path_segment(text: &str) -> String {
    let segment = sanitize(text);
    if ANSWERED_BY_TOOLS.contains(&segment.as_str()) { format!("{segment}_") } else { segment }
}

/// Gives each wanted path a unique one, in input order: the first keeps it,
/// later ones get `_2`, `_3`, ... Callers sort their input first, so the
/// result does not depend on the order a spec happens to be read in.
pub fn deduplicate(wanted: impl IntoIterator<Item = String>) -> Vec<String> {
    let wanted: Vec<String> = wanted.into_iter().collect();
    let mut taken: HashMap<String, u32> = HashMap::with_capacity(wanted.len());
    let mut out = Vec::with_capacity(wanted.len());
    for path in wanted {
        let mut candidate = path.clone();
        let mut n = 1;
        while taken.contains_key(&candidate) {
            n += 1;
            candidate = format!("{path}_{n}");
        }
        taken.insert(candidate.clone(), n);
        out.push(candidate);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_sanitising() {
        let cases = [
            ("issues/create", "issues_create"),
            ("get /users/{id}", "get_users_id"),
            ("list-all  the things", "list_all_the_things"),
            ("2fa", "_2fa"),
            ("{}", "_"),
            ("café", "caf"),
            ("ok_name$", "ok_name$"),
        ];
        for (text, expected) in cases {
            let got = sanitize(text);
            assert_eq!(got, expected, "{text}");
            assert!(is_identifier(&got), "{got}");
        }
        for (text, expected) in
            [("then", "then_"), ("toString", "toString_"), ("to-JSON", "to_JSON"), ("toJSON", "toJSON_")]
        {
            assert_eq!(path_segment(text), expected, "{text}");
        }
        assert_eq!(path_segment("issues/create"), "issues_create");
        assert!(!is_identifier(""));
        assert!(!is_identifier("1a"));
        assert!(!is_identifier("a.b"));
    }

    #[test]
    fn collisions_get_numbered_in_order() {
        let got = deduplicate(["a.b".to_string(), "a.c".into(), "a.b".into(), "a.b_2".into(), "a.b".into()]);
        assert_eq!(got, ["a.b", "a.c", "a.b_2", "a.b_2_2", "a.b_3"]);
    }
}
