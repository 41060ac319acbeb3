//! The approval pages: server-rendered HTML that works without JavaScript and
//! reads on a phone. The code and arguments come from whoever drove the
//! agent, so the pages are maud templates, which HTML-escape every value they
//! are given; and every text from outside goes in as [`Visible`], which also
//! shows invisible and reordering characters as escapes (`crate::http_edge::visible`).
//! Only our own constants (the doctype, the stylesheet) go in unescaped.

use std::sync::LazyLock;

use base64::Engine;
use executor_core::{DecidedBy, Execution, ExecutionId, PendingCall, Timestamp};
use maud::{Markup, PreEscaped, Render, html};
use serde_json::Value;
use sha2::{Digest, Sha256};

const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1b1d21;--bg:#f6f7f9;--card:#fff;--line:#d9dce1;--ok:#1a7f37;--no:#b42318;--hl:#fff3bf}\
@media (prefers-color-scheme:dark){:root{--fg:#e6e8eb;--bg:#14161a;--card:#1d2026;--line:#343944;--hl:#4a3f10}}\
*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,sans-serif;color:var(--fg);background:var(--bg)}\
main{max-width:46rem;margin:0 auto;padding:1.25rem}h1{font-size:1.45rem;margin:.2rem 0 1rem}\
h2{font-size:1.1rem;margin:0 0 .4rem}h3{font-size:.95rem;margin:1rem 0 .3rem}\
section,.panel{background:var(--card);border:1px solid var(--line);border-radius:.6rem;padding:1rem;margin:0 0 1rem}\
pre{white-space:pre-wrap;overflow-wrap:anywhere;overflow-x:auto;background:var(--bg);border:1px solid var(--line);border-radius:.4rem;padding:.6rem;margin:0;font-size:.85rem}\
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}.line{display:block;white-space:pre}\
.line.hl{background:var(--hl)}.ln{display:inline-block;width:2.5em;opacity:.55;user-select:none}\
.time{font-weight:600}.actions{display:flex;gap:.75rem;flex-wrap:wrap;margin:1rem 0}\
button,a.button{flex:1 1 10rem;font:inherit;font-weight:600;padding:.8rem 1rem;border-radius:.5rem;border:0;color:#fff;cursor:pointer;text-align:center;text-decoration:none}\
.approve{background:var(--ok)}.always{background:#0b5cad}.decline{background:var(--no)}summary{cursor:pointer;font-weight:600}\
.muted{opacity:.75;font-size:.9rem}\
.bar{display:flex;justify-content:space-between;align-items:center;gap:.75rem;flex-wrap:wrap;margin:0 0 .5rem}\
table{width:100%;border-collapse:collapse}th,td{text-align:left;padding:.4rem .3rem;border-bottom:1px solid var(--line);vertical-align:top}\
td code{overflow-wrap:anywhere}button.small,a.small{flex:0 0 auto;padding:.45rem .8rem;font-size:.9rem;white-space:nowrap}.neutral{background:#57606a}form.inline{margin:0}";

/// `Content-Security-Policy` for every page: nothing loads, nothing runs, only
/// this stylesheet applies and forms post back to us.
pub(crate) static CONTENT_SECURITY_POLICY: LazyLock<String> = LazyLock::new(|| {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
});

/// Shown at most this much of a result, of arguments, of a tool description.
const MAX_SHOWN_BYTES: usize = 16 * 1024;

/// What the pending page needs besides the execution.
pub(crate) struct PendingPage<'a> {
    pub id: &'a ExecutionId,
    pub code: &'a str,
    pub pending: &'a [PendingCall],
    /// The TypeScript declaration of each pending tool, when the catalog has it.
    pub descriptions: &'a [Option<String>],
    pub deadline: Timestamp,
    pub now: Timestamp,
    pub token: &'a str,
    pub csrf: &'a str,
    /// Above the call: e.g. "Approved. The code now needs another approval."
    pub lead: Option<&'a str>,
    /// Whose agent asks ([`who_asks`]).
    pub asked_by: &'a str,
}

/// Whose agent asks, as the pages say it: the owner, the key (by its id) or
/// OIDC identity the code was sent with, and the toolkit it came through.
pub(crate) fn who_asks(execution: &Execution) -> String {
    let owner = execution.owner.as_str();
    let credential = execution.asked_by.as_ref().map(DecidedBy::as_str);
    let mut text = match credential.and_then(|c| c.strip_prefix("key:")) {
        Some(key) => format!("{owner}, with key {}", key.rsplit('/').next().unwrap_or(key)),
        None if credential.is_some_and(|c| c.starts_with("oidc:")) => format!("{owner}, signed in with OIDC"),
        None => owner.to_owned(),
    };
    if let Some(toolkit) = &execution.toolkit {
        text.push_str(&format!(", through toolkit {toolkit}"));
    }
    text
}

/// Text from outside as the page shows it: invisible characters as escapes,
/// then HTML-escaped by maud.
pub(crate) struct Visible<'a>(pub &'a str);

impl Render for Visible<'_> {
    fn render_to(&self, buffer: &mut String) {
        crate::http_edge::visible::escape_invisible(self.0).render_to(buffer);
    }
}

pub(crate) fn pending(page: &PendingPage<'_>) -> String {
    let calls = page.pending.len();
    let paths: Vec<&str> = page.pending.iter().map(|call| call.path.as_str()).collect();
    let mut granted: Vec<String> = paths.iter().map(|path| format!("tools.{path}")).collect();
    granted.sort();
    granted.dedup();
    let always = format!("Always allow {}", granted.join(", "));
    let body = html! {
        @if let Some(lead) = page.lead {
            p.panel { (Visible(lead)) }
        }
        h1 { (if calls == 1 { "Approve this tool call?" } else { "Approve these tool calls?" }) }
        p {
            "Code run by an AI agent wants to make "
            @if calls == 1 { "this call" } @else { "these " (calls) " calls together" }
            ". Nothing happens until you decide."
        }
        p.muted { "Asked by " b { (Visible(page.asked_by)) } ". " a href="/console" { "Open the console" } " to see everything that waits for you." }
        @for (i, call) in page.pending.iter().enumerate() {
            @let (namespace, tool) = call.path.split_once('.').unwrap_or(("", &call.path));
            section {
                h2 { code { "tools." (Visible(&call.path)) } }
                p.muted { "Namespace " b { (Visible(namespace)) } ", tool " b { (Visible(tool)) } }
                // What it does, its effect and the arguments (secrets redacted), as the catalog wrote them.
                pre { (Visible(&shown(&call.message))) }
                @if let Some(Some(description)) = page.descriptions.get(i) {
                    details { summary { "What this tool does" } pre { (Visible(&shown(description))) } }
                }
            }
        }
        p.time { "Time left: " (time_left(page.now, page.deadline)) " (until " (Visible(&page.deadline.to_rfc3339())) ")." }
        form method="post" action=(Visible(page.id.as_str())) {
            input type="hidden" name="token" value=(Visible(page.token));
            input type="hidden" name="csrf" value=(Visible(page.csrf));
            div.actions {
                button.approve name="decision" value="accept" { "Approve" }
                button.always name="decision" value="accept_always" { (Visible(&always)) }
                button.decline name="decision" value="decline" { "Decline" }
            }
            p.muted {
                "\"Always allow\" approves this call and lets later calls of the same tool by the same user run \
                 without asking, until the grant expires or is revoked (GET /api/grants, DELETE /api/grants/{id})."
            }
        }
        details.panel open { summary { "The code" } pre { (code_lines(page.code, &paths)) } }
    };
    document("Approval needed", body)
}

/// What the page of a call that waits for a connection needs.
pub(crate) struct ConnectPage<'a> {
    pub id: &'a ExecutionId,
    pub source: &'a str,
    pub call: &'a PendingCall,
    /// Starts the authorization (the connect link of this pause).
    pub connect_url: &'a str,
    pub deadline: Timestamp,
    pub now: Timestamp,
    pub token: &'a str,
    pub csrf: &'a str,
}

/// The approval link of a call that waits for the owner to connect a source:
/// a link that connects (then the call runs), or Decline.
pub(crate) fn connect(page: &ConnectPage<'_>) -> String {
    let label = format!("Connect {}", page.source);
    let body = html! {
        h1 { (Visible(&label)) }
        p {
            "Code run by an AI agent wants to call " code { "tools." (Visible(&page.call.path)) }
            " with your own " b { (Visible(page.source)) } " account, which is not connected yet. Connect it, and \
             the call runs once you come back."
        }
        section { pre { (Visible(&shown(&page.call.message))) } }
        p.time { "Time left: " (time_left(page.now, page.deadline)) " (until " (Visible(&page.deadline.to_rfc3339())) ")." }
        div.actions { a.button.approve href=(Visible(page.connect_url)) { (Visible(&label)) } }
        form method="post" action=(Visible(page.id.as_str())) {
            input type="hidden" name="token" value=(Visible(page.token));
            input type="hidden" name="csrf" value=(Visible(page.csrf));
            div.actions { button.decline name="decision" value="decline" { "Decline" } }
        }
    };
    document(&label, body)
}

/// A page that only says something: an outcome, "expired", "not found".
pub(crate) fn message(title: &str, text: &str, detail: Option<&Value>) -> String {
    let body = html! {
        h1 { (Visible(title)) }
        p { (Visible(text)) }
        @if let Some(detail) = detail {
            details.panel { summary { "Result" } pre { (Visible(&shown(&pretty(detail)))) } }
        }
        p.muted { "You can close this page." }
    };
    document(title, body)
}

pub(crate) fn document(title: &str, body: Markup) -> String {
    html! {
        (PreEscaped("<!doctype html>"))
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width,initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (Visible(title)) " · Executor" }
                style { (PreEscaped(STYLE)) }
            }
            body { main { (body) } }
        }
    }
    .into_string()
}

/// The code, numbered, with the lines that name a pending tool highlighted.
pub(crate) fn code_lines(code: &str, paths: &[&str]) -> Markup {
    let code = shown(code);
    html! {
        @for (n, line) in code.lines().enumerate() {
            span class=(if paths.iter().any(|path| line.contains(path)) { "line hl" } else { "line" }) {
                span.ln { (n + 1) } (Visible(line))
            }
        }
    }
}

pub(crate) fn time_left(now: Timestamp, deadline: Timestamp) -> String {
    let minutes = deadline.since(now).as_secs() / 60;
    match minutes {
        0 => "less than a minute".to_owned(),
        1 => "about 1 minute".to_owned(),
        n => format!("about {n} minutes"),
    }
}

pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// At most [`MAX_SHOWN_BYTES`], cut at a character boundary.
pub(crate) fn shown(text: &str) -> String {
    executor_core::cut_text(text, MAX_SHOWN_BYTES)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn escaping() {
        // Single quotes need no escape: every attribute value is double-quoted.
        let cases = [
            ("plain", "plain"),
            ("</script><img src=x onerror=alert(1)>", "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"),
            ("\"quoted\" & 'single'", "&quot;quoted&quot; &amp; 'single'"),
            ("{\"to\": \"evil\u{202E}gpj.exe\"}", "{&quot;to&quot;: &quot;evil\\u{202E}gpj.exe&quot;}"),
        ];
        for (input, expected) in cases {
            assert_eq!(Visible(input).render().into_string(), expected);
        }
    }

    #[test]
    fn time_left_reads_naturally() {
        let cases = [
            (0, "less than a minute"),
            (59_999, "less than a minute"),
            (60_000, "about 1 minute"),
            (600_000, "about 10 minutes"),
        ];
        for (left, expected) in cases {
            assert_eq!(time_left(Timestamp::from_millis(1_000), Timestamp::from_millis(1_000 + left)), expected);
        }
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        let text = "é".repeat(MAX_SHOWN_BYTES);
        let cut = shown(&text);
        assert!(cut.ends_with(&format!("({} more bytes not shown)", MAX_SHOWN_BYTES)), "{}", &cut[cut.len() - 40..]);
    }

    #[test]
    fn the_pending_page_shows_the_call_and_highlights_it_in_the_code() {
        let id = ExecutionId::parse("e1").unwrap();
        let message = "tools.gh.issues.create needs approval\nEffect: POST https://gh/issues\nArguments:\n{\n  \"title\": \"Hi\"\n}";
        let pending = [PendingCall::new(0, "gh.issues.create", json!({"title": "Hi"}), message)];
        let html = super::pending(&PendingPage {
            id: &id,
            code: "const a = 1;\nawait tools.gh.issues.create({ title: 'Hi' });",
            pending: &pending,
            descriptions: &[Some("/** Create an issue */".into())],
            deadline: Timestamp::from_millis(600_000),
            now: Timestamp::from_millis(0),
            token: "tok",
            csrf: "c5",
            lead: None,
            asked_by: "alice, with key 3f2a9c1b",
        });
        for expected in [
            "<code>tools.gh.issues.create</code>",
            "Namespace <b>gh</b>, tool <b>issues.create</b>",
            "Effect: POST https://gh/issues\nArguments:\n{\n  &quot;title&quot;: &quot;Hi&quot;\n}",
            "/** Create an issue */",
            "Time left: about 10 minutes",
            "<form method=\"post\" action=\"e1\">",
            "Asked by <b>alice, with key 3f2a9c1b</b>. <a href=\"/console\">Open the console</a>",
            "name=\"token\" value=\"tok\"",
            "name=\"csrf\" value=\"c5\"",
            "name=\"decision\" value=\"accept_always\">Always allow tools.gh.issues.create</button>",
            "<span class=\"line hl\"><span class=\"ln\">2</span>await tools.gh.issues.create",
            "<span class=\"line\"><span class=\"ln\">1</span>const a = 1;</span>",
        ] {
            assert!(html.contains(expected), "missing {expected:?} in {html}");
        }
    }

    #[test]
    fn every_text_from_outside_shows_its_invisible_characters() {
        let odd = |what: &str| format!("<{what}>\u{202E}\u{200B}");
        let (path, args, message, description) = (odd("gh.x"), odd("args"), odd("message"), odd("description"));
        let (code, token, csrf, lead) = (odd("gh.x code"), odd("token"), odd("csrf"), odd("lead"));
        let id = ExecutionId::parse("e1").unwrap();
        let pending = [PendingCall::new(0, path.as_str(), json!(args), message.as_str())];
        let pages = [
            super::pending(&PendingPage {
                id: &id,
                code: &code,
                pending: &pending,
                descriptions: &[Some(description)],
                deadline: Timestamp::from_millis(600_000),
                now: Timestamp::from_millis(0),
                token: &token,
                csrf: &csrf,
                lead: Some(&lead),
                asked_by: &odd("asker"),
            }),
            super::message(&odd("title"), &odd("text"), Some(&json!(odd("detail")))),
        ];
        for html in pages {
            assert!(!html.chars().any(crate::http_edge::visible::is_invisible), "{html}");
            assert!(!html.contains("<gh.x") && !html.contains("<token>") && !html.contains("<title>\\"), "{html}");
            assert!(html.matches("\\u{202E}\\u{200B}").count() >= 3, "{html}");
        }
    }

    #[test]
    fn the_pages_say_whose_agent_asks() {
        let alice = executor_core::Principal::parse("alice").unwrap();
        let key = DecidedBy::key(&alice, &executor_core::TokenHash::of_token("tok"));
        let oidc = executor_core::Principal::oidc("https://idp", "u1").unwrap();
        let triage = executor_core::ToolkitName::parse("triage").unwrap();
        let key_id = executor_core::key_id(&executor_core::TokenHash::of_token("tok")).to_owned();
        let cases = [
            (alice.clone(), None, None, "alice".to_owned()),
            (alice.clone(), Some(key.clone()), None, format!("alice, with key {key_id}")),
            (
                alice.clone(),
                Some(key),
                Some(triage.clone()),
                format!("alice, with key {key_id}, through toolkit triage"),
            ),
            (oidc.clone(), Some(DecidedBy::principal(&oidc)), None, format!("{oidc}, signed in with OIDC")),
            (alice, None, Some(triage), "alice, through toolkit triage".to_owned()),
        ];
        for (owner, asked_by, toolkit, expected) in cases {
            let journal = executor_core::Journal::new(Timestamp::from_millis(0), 1);
            let id = ExecutionId::parse("e1").unwrap();
            let mut execution =
                Execution::start(id, owner, None, Default::default(), "", journal, Timestamp::from_millis(1));
            execution.asked_by = asked_by;
            execution.toolkit = toolkit;
            assert_eq!(who_asks(&execution), expected);
        }
    }

    #[test]
    fn the_policy_allows_exactly_the_inline_stylesheet() {
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
        assert!(CONTENT_SECURITY_POLICY.contains(&format!("style-src 'sha256-{hash}'")));
        assert!(CONTENT_SECURITY_POLICY.starts_with("default-src 'none'"));
        assert!(CONTENT_SECURITY_POLICY.contains("frame-ancestors 'none'"));
    }
}
