//! What a person reads to decide a call that needs approval, without reading
//! the code: the tool and what it does, its effect (for OpenAPI the method and
//! the URL that would be called, path filled in; for MCP the tool's
//! annotations), and the arguments pretty-printed with secrets redacted. It
//! is the pending call's `message`: the paused result, the approval page and
//! the native elicitation all show it.

use serde_json::Value;

use executor_core::redact_secret_fields;

use crate::redact::Redactor;

/// At most this much of a tool's description is shown.
const MAX_DESCRIPTION_CHARS: usize = 300;
/// At most this much of the pretty-printed arguments is shown.
const MAX_ARGUMENTS_BYTES: usize = 8 * 1024;

/// The text for a call of `tools.<path>`: `headline` (what needs approval
/// and why), then what the tool does, its effect and the arguments. Every
/// secret of the source (`redactor`) is redacted from all of it.
pub(crate) fn approval_message(
    headline: &str,
    description: &str,
    effect: &str,
    args: &Value,
    redactor: &Redactor,
) -> String {
    let mut text = headline.to_owned();
    // Each text is redacted whole before it is cut: a secret the cut splits would be matched by neither half.
    let description = first_paragraph(&redactor.redact(description));
    if !description.is_empty() {
        text.push_str("\nWhat it does: ");
        text.push_str(&description);
    }
    text.push_str("\nEffect: ");
    text.push_str(effect);
    text.push_str("\nArguments:\n");
    let shown = serde_json::to_string_pretty(&redact_secret_fields(args)).unwrap_or_else(|_| args.to_string());
    text.push_str(&executor_core::cut_text(&redactor.redact(&shown), MAX_ARGUMENTS_BYTES));
    redactor.redact(&text)
}

/// The description's first paragraph, on one line, at most [`MAX_DESCRIPTION_CHARS`].
fn first_paragraph(description: &str) -> String {
    let paragraph = description.trim().split("\n\n").next().unwrap_or_default();
    let line = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    }
}

/// MCP annotations as a person reads them, e.g. `destructiveHint: true, openWorldHint: false`.
pub(crate) fn mcp_effect(name: &str, hints: &[(&'static str, bool)]) -> String {
    let hints: Vec<String> = hints.iter().map(|(hint, value)| format!("{hint}: {value}")).collect();
    if hints.is_empty() {
        format!("calls the MCP tool `{name}` (no annotations: it may change things)")
    } else {
        format!("calls the MCP tool `{name}` ({})", hints.join(", "))
    }
}

/// `args` with the value of every field named like a secret replaced, at any depth.
#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_message_says_what_where_and_with_what() {
        let mut redactor = Redactor::default();
        redactor.add("s3cr3t-value");
        let args = json!({
            "id": 42,
            "body": {"name": "chair", "apiKey": "k-1", "nested": [{"Password": "p"}], "note": "uses s3cr3t-value"},
            "X-Auth-Token": "t",
        });
        let text = approval_message(
            "tools.shop.items.updateItem (PUT /items/{id}) needs approval: it may change data",
            "Update an item.\n\nLong details that are not shown.",
            "PUT http://127.0.0.1:9/items/42",
            &args,
            &redactor,
        );
        let expected = "tools.shop.items.updateItem (PUT /items/{id}) needs approval: it may change data\n\
             What it does: Update an item.\n\
             Effect: PUT http://127.0.0.1:9/items/42\n\
             Arguments:\n";
        assert!(text.starts_with(expected), "{text}");
        for shown in [
            "\"id\": 42",
            "\"name\": \"chair\"",
            "\"apiKey\": \"[redacted]\"",
            "\"Password\": \"[redacted]\"",
            "\"X-Auth-Token\": \"[redacted]\"",
            "\"note\": \"uses [redacted]\"",
        ] {
            assert!(text.contains(shown), "missing {shown}: {text}");
        }
        for secret in ["k-1", "\"p\"", "\"t\"", "s3cr3t"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    #[test]
    fn long_texts_are_cut() {
        let long = "word ".repeat(200);
        assert_eq!(first_paragraph(&long).chars().count(), MAX_DESCRIPTION_CHARS + 1);
        assert_eq!(first_paragraph("  One\n line.\n\nTwo."), "One line.");
        let args = json!({"body": "é".repeat(MAX_ARGUMENTS_BYTES)});
        let text = approval_message("h", "", "GET x", &args, &Redactor::default());
        assert!(text.ends_with("more bytes not shown)"), "{}", &text[text.len() - 50..]);
    }

    #[test]
    fn a_secret_a_cut_would_split_is_redacted_whole() {
        let secret = "sk-live-0123456789abcdefghij";
        let mut redactor = Redactor::default();
        redactor.add(secret);
        // `{\n  "body": "` comes first: the cut falls ten bytes into the secret.
        let args = json!({"body": format!("{}{secret} and more", "a".repeat(MAX_ARGUMENTS_BYTES - 10 - 13))});
        let description = format!("{}{secret} and more", "d".repeat(MAX_DESCRIPTION_CHARS - 10));
        let text = approval_message("h", &description, "POST x", &args, &redactor);
        assert!(text.ends_with("more bytes not shown)"), "the arguments are cut");
        assert!(!text.contains(&secret[..8]), "a part of the secret is shown: {}", &text[text.len() - 80..]);
        assert!(text.contains("[redac"), "the cut passes through the marker instead");
    }

    #[test]
    fn mcp_annotations_are_named() {
        assert_eq!(
            mcp_effect("delete_doc", &[("destructiveHint", true), ("openWorldHint", false)]),
            "calls the MCP tool `delete_doc` (destructiveHint: true, openWorldHint: false)"
        );
        assert_eq!(mcp_effect("x", &[]), "calls the MCP tool `x` (no annotations: it may change things)");
    }
}
