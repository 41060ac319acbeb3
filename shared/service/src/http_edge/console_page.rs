//! The console's pages: what waits for the signed-in owner, what ran, the
//! grants and connections they can take back, and the sign-in pages. The
//! same maud templates, stylesheet and strict CSP as the approval pages
//! (`approval_page`): every value from outside is HTML-escaped with its
//! invisible characters shown, nothing runs, and every form carries the
//! session's CSRF token.

use executor_core::{Execution, ExecutionId, ExecutionRecord, ExecutionState, Grant, HistoryEntry, Timestamp};
use executor_sandbox::ConnectionInfo;
use maud::{Markup, PreEscaped, html};

use crate::http_edge::approval_page::{Visible, code_lines, document, pretty, shown, time_left, who_asks};

/// What the console's front page shows.
pub(crate) struct Dashboard<'a> {
    /// Who is signed in, as the page names them.
    pub subject: &'a str,
    pub csrf: &'a str,
    pub notice: Option<Notice>,
    /// The owner's paused executions, each with what it waits for.
    pub pending: &'a [Execution],
    pub recent: &'a [ExecutionRecord],
    pub grants: &'a [Grant],
    /// `None`: no source connects per owner.
    pub connections: Option<&'a [ConnectionInfo]>,
    pub now: Timestamp,
}

/// What the front page says after a form was sent (a fixed text per code,
/// so nothing from the query string is shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    Approved,
    AlwaysAllowed,
    Declined,
    AlreadyDecided,
    Expired,
    Revoked,
    Disconnected,
    SignedIn,
}

impl Notice {
    pub fn code(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::AlwaysAllowed => "always",
            Self::Declined => "declined",
            Self::AlreadyDecided => "already",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
            Self::Disconnected => "disconnected",
            Self::SignedIn => "signed-in",
        }
    }

    pub fn parse(code: &str) -> Option<Self> {
        [
            Self::Approved,
            Self::AlwaysAllowed,
            Self::Declined,
            Self::AlreadyDecided,
            Self::Expired,
            Self::Revoked,
            Self::Disconnected,
            Self::SignedIn,
        ]
        .into_iter()
        .find(|notice| notice.code() == code)
    }

    fn text(self) -> &'static str {
        match self {
            Self::Approved => "Approved. The call was made; the agent sees what happened.",
            Self::AlwaysAllowed => {
                "Approved, and later calls of the same tool run without asking until the grant expires or you revoke it."
            }
            Self::Declined => "Declined. The call was not made.",
            Self::AlreadyDecided => "That approval was already decided; nothing was run again.",
            Self::Expired => "That approval expired before it was decided; the call was not made.",
            Self::Revoked => "Revoked. The next call of that tool asks for approval again.",
            Self::Disconnected => "Disconnected. The next call that needs that account asks you to connect again.",
            Self::SignedIn => "Signed in.",
        }
    }
}

pub(crate) fn dashboard(page: &Dashboard<'_>) -> String {
    let body = html! {
        (signed_in_bar(page.subject, page.csrf))
        h1 { "Console" }
        @if let Some(notice) = page.notice { p.panel { (notice.text()) } }
        h2 { "Waiting for you (" (page.pending.len()) ")" }
        @if page.pending.is_empty() { p.muted { "Nothing waits for a decision." } }
        @for execution in page.pending { (pending_execution(execution, page.csrf, page.now, true)) }
        (grants(page.grants, page.csrf))
        @if let Some(connections) = page.connections { (connections_table(connections, page.csrf)) }
        (recent(page.recent, page.now))
    };
    document("Console", body)
}

/// One execution: what it waits for (with the decision form), its history
/// and its code.
pub(crate) struct ExecutionPage<'a> {
    pub subject: &'a str,
    pub csrf: &'a str,
    pub record: &'a ExecutionRecord,
    pub entries: &'a [HistoryEntry],
    /// The execution itself while it is stored (it is paused, or kept for its outcome).
    pub execution: Option<&'a Execution>,
    pub now: Timestamp,
}

pub(crate) fn execution(page: &ExecutionPage<'_>) -> String {
    let record = page.record;
    let paused = page.execution.filter(|e| matches!(e.state(), ExecutionState::Paused { .. }));
    let body = html! {
        (signed_in_bar(page.subject, page.csrf))
        p { a href="/console" { "← Console" } }
        h1 { "Execution " code { (Visible(record.id.as_str())) } }
        p { "Status: " b { (record.status_at(page.now).as_str()) } " · started " (Visible(&record.created_at.to_rfc3339())) }
        @if let Some(execution) = paused { (pending_execution(execution, page.csrf, page.now, false)) }
        section {
            h2 { "History" }
            table {
                tr { th { "When" } th { "What" } }
                @for entry in page.entries {
                    @let json = entry.to_json();
                    tr {
                        td { (Visible(&entry.at.to_rfc3339())) }
                        td { b { (Visible(json["type"].as_str().unwrap_or_default())) } pre { (Visible(&shown(&pretty(&details(json))))) } }
                    }
                }
            }
        }
        @if let Some(execution) = page.execution {
            @let paths: Vec<&str> = execution.journal.pending.iter().map(|call| call.path.as_str()).collect();
            details.panel { summary { "The code" } pre { (code_lines(&execution.code, &paths)) } }
        }
    };
    document("Execution", body)
}

/// An entry's fields other than its time and type.
fn details(mut json: serde_json::Value) -> serde_json::Value {
    if let Some(object) = json.as_object_mut() {
        object.remove("at");
        object.remove("type");
    }
    json
}

/// The sign-in page: a console link, or the issuer when OIDC is configured.
pub(crate) fn sign_in(issuer: Option<&str>, problem: Option<&str>) -> String {
    let body = html! {
        h1 { "Sign in to the console" }
        @if let Some(problem) = problem { p.panel { (Visible(problem)) } }
        @if let Some(issuer) = issuer {
            div.actions { a.button.approve href="/console/oidc/start" { "Sign in with " (Visible(issuer)) } }
        }
        p {
            "Or ask for a one-time sign-in link on the server: "
            code { "executor console link --owner NAME" }
            " (valid 10 minutes, used once)."
        }
    };
    document("Sign in", body)
}

/// The page a console link opens: one button, so a link preview that
/// fetches it signs nobody in.
pub(crate) fn confirm_link(token: &str, csrf: &str) -> String {
    let body = html! {
        h1 { "Sign in to the console" }
        p { "This one-time link signs you in to see and decide what your agents ask for." }
        form method="post" action="/console/signin" {
            input type="hidden" name="token" value=(Visible(token));
            input type="hidden" name="csrf" value=(Visible(csrf));
            div.actions { button.approve { "Sign in" } }
        }
    };
    document("Sign in", body)
}

/// After the issuer sent the person back: the cookie is set, and this page
/// (our own origin) moves on, so the `SameSite=Strict` cookie goes with it.
pub(crate) fn signed_in(subject: &str) -> String {
    let body = html! {
        (PreEscaped("<meta http-equiv=\"refresh\" content=\"0;url=/console?notice=signed-in\">"))
        h1 { "Signed in" }
        p { "Signed in as " b { (Visible(subject)) } "." }
        div.actions { a.button.approve href="/console?notice=signed-in" { "Open the console" } }
    };
    document("Signed in", body)
}

/// A page that only says something, with the way back.
pub(crate) fn message(title: &str, text: &str) -> String {
    let body = html! {
        h1 { (Visible(title)) }
        p { (Visible(text)) }
        p { a href="/console" { "Back to the console" } }
    };
    document(title, body)
}

fn signed_in_bar(subject: &str, csrf: &str) -> Markup {
    html! {
        div.bar {
            span.muted { "Signed in as " b { (Visible(subject)) } }
            form.inline method="post" action="/console/logout" {
                input type="hidden" name="csrf" value=(Visible(csrf));
                button.small.neutral { "Sign out" }
            }
        }
    }
}

fn pending_execution(execution: &Execution, csrf: &str, now: Timestamp, linked: bool) -> Markup {
    let ExecutionState::Paused { deadline } = *execution.state() else { return html! {} };
    let action = execution_path(&execution.id);
    let mut tools: Vec<String> = execution.journal.pending.iter().map(|call| format!("tools.{}", call.path)).collect();
    tools.sort();
    tools.dedup();
    let waits_for_connect = execution.journal.pending.iter().any(|call| call.connect.is_some());
    html! {
        section {
            @for call in &execution.journal.pending {
                h3 { code { "tools." (Visible(&call.path)) } }
                pre { (Visible(&shown(&call.message))) }
            }
            p.muted {
                "Asked by " b { (Visible(&who_asks(execution))) } " · time left: " (time_left(now, deadline))
                @if linked { " · " a href=(Visible(&action)) { "code and history" } }
            }
            form method="post" action=(Visible(&action)) {
                input type="hidden" name="csrf" value=(Visible(csrf));
                div.actions {
                    @if !waits_for_connect {
                        button.approve name="decision" value="accept" { "Approve" }
                        button.always name="decision" value="accept_always" { "Always allow " (Visible(&tools.join(", "))) }
                    }
                    button.decline name="decision" value="decline" { "Decline" }
                }
            }
        }
    }
}

fn grants(grants: &[Grant], csrf: &str) -> Markup {
    html! {
        section {
            h2 { "Always allowed" }
            @if grants.is_empty() { p.muted { "No grants: every call that needs approval asks." } }
            @else {
                table {
                    tr { th { "Tool" } th { "Until" } th {} }
                    @for grant in grants {
                        tr {
                            td {
                                code { "tools." (Visible(&grant.tool)) }
                                @if let Some(toolkit) = &grant.toolkit { br; span.muted { "toolkit " (Visible(toolkit.as_str())) } }
                            }
                            td { (short_time(grant.expires_at)) }
                            td {
                                form.inline method="post" action=(Visible(&format!("/console/grants/{}/revoke", grant.id))) {
                                    input type="hidden" name="csrf" value=(Visible(csrf));
                                    button.small.decline { "Revoke" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn connections_table(connections: &[ConnectionInfo], csrf: &str) -> Markup {
    html! {
        section {
            h2 { "Connections" }
            @if connections.is_empty() { p.muted { "No accounts connected." } }
            @else {
                table {
                    tr { th { "Source" } th { "Connected" } th {} }
                    @for connection in connections {
                        tr {
                            td { b { (Visible(&connection.source)) } }
                            td { (short_time(connection.connected_at)) }
                            td {
                                form.inline method="post" action=(Visible(&format!("/console/connections/{}/disconnect", connection.source))) {
                                    input type="hidden" name="csrf" value=(Visible(csrf));
                                    button.small.decline { "Disconnect" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn recent(records: &[ExecutionRecord], now: Timestamp) -> Markup {
    html! {
        section {
            h2 { "Recent executions" }
            @if records.is_empty() { p.muted { "None yet." } }
            @else {
                table {
                    tr { th { "Started" } th { "Status" } th { "Waits for" } }
                    @for record in records {
                        tr {
                            td { a href=(Visible(&execution_path(&record.id))) { (short_time(record.created_at)) } }
                            td { (record.status_at(now).as_str()) }
                            td { @if let Some(pending) = &record.pending { code { "tools." (Visible(&pending.tool)) } } }
                        }
                    }
                }
            }
        }
    }
}

/// A time as the tables show it: to the minute, UTC (`2026-12-02 10:27 UTC`).
fn short_time(at: Timestamp) -> String {
    let full = at.to_rfc3339();
    match (full.get(..10), full.get(11..16)) {
        (Some(day), Some(minute)) => format!("{day} {minute} UTC"),
        _ => full,
    }
}

/// The console's path of execution `id`.
fn execution_path(id: &ExecutionId) -> String {
    format!("/console/executions/{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_show_to_the_minute() {
        assert_eq!(short_time(Timestamp::from_millis(1_795_895_181_000)), "2026-11-28 19:46 UTC");
    }

    #[test]
    fn notices_round_trip_and_unknown_codes_show_nothing() {
        for notice in [Notice::Approved, Notice::AlwaysAllowed, Notice::Declined, Notice::Revoked, Notice::SignedIn] {
            assert_eq!(Notice::parse(notice.code()), Some(notice));
        }
        assert_eq!(Notice::parse("<script>"), None);
        assert_eq!(Notice::parse(""), None);
    }

    #[test]
    fn every_form_of_the_front_page_carries_the_csrf_token() {
        let grant = Grant::new(
            executor_core::GrantId::parse("g1").unwrap(),
            executor_core::Principal::parse("alice").unwrap(),
            "gh.issues.create",
            executor_core::GrantedBy::Console,
            Timestamp::from_millis(0),
            std::time::Duration::from_secs(60),
        );
        let html = dashboard(&Dashboard {
            subject: "alice",
            csrf: "c0ffee",
            notice: Some(Notice::Revoked),
            pending: &[],
            recent: &[],
            grants: &[grant],
            connections: Some(&[]),
            now: Timestamp::from_millis(0),
        });
        let forms = html.matches("<form").count();
        assert_eq!(forms, 2, "{html}");
        assert_eq!(html.matches("name=\"csrf\" value=\"c0ffee\"").count(), forms, "{html}");
        assert!(html.contains("action=\"/console/grants/g1/revoke\""), "{html}");
        assert!(html.contains(Notice::Revoked.text()), "{html}");
    }
}
