//! `/console`: the approver's console (docs/console.md). A person signs in
//! once, with a one-time link from `executor console link` or with the OIDC
//! issuer, and gets an `HttpOnly`, `SameSite=Strict` session cookie; then
//! sees what waits for them, decides it, and takes back grants and
//! connections. Every form carries the session's CSRF token; every read is
//! the signed-in owner's own (`Access::Owner` underneath), so another
//! owner's executions, grants and connections do not exist here.

use std::sync::Arc;

use bytes::Bytes;
use executor_core::{ApprovalAction, Channel, DecidedBy, Decider, Execution, ExecutionId, ExecutionStatus, Remember};
use executor_sandbox::{ConnectError, Connections, Tools};
use executor_store::StoreError;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};

use crate::application::console::{ConsoleError, ConsoleSignIn, SignedIn};
use crate::application::executions::{Executions, ResumeError};
use crate::application::grants::Grants;
use crate::application::history::{History, Listing};
use crate::http_edge::approvals::{cookie, path_id, query_param, valid_csrf};
use crate::http_edge::console_page::{self, Dashboard, ExecutionPage, Notice};
use crate::http_edge::oidc::Oidc;
use crate::http_edge::responses::page;

/// The session cookie: the console session's token.
pub(crate) const SESSION_COOKIE: &str = "executor_console";
/// The double-submit CSRF cookie of the sign-in form, before any session exists.
const FORM_COOKIE: &str = "executor_console_csrf";
/// The OIDC `state` of this browser's sign-in under way: the callback must
/// bring back the one this browser started (no sign-in forced on someone else).
pub(crate) const LOGIN_COOKIE: &str = "executor_console_login";
/// The most executions the front page lists in each part.
const LISTED: usize = 20;

pub(crate) struct ConsoleRoutes {
    pub sign_in: Arc<ConsoleSignIn>,
    pub executions: Arc<Executions>,
    pub history: Arc<History>,
    pub grants: Arc<Grants>,
    pub connections: Option<Arc<dyn Connections>>,
    pub tools: Arc<dyn Tools>,
    /// The issuer, when the console signs in with it (`EXECUTOR_CONSOLE_CLIENT_ID`).
    pub oidc: Option<Arc<Oidc>>,
}

/// A request as the console reads it.
pub(crate) struct Visit<'a> {
    pub request: &'a Request<Bytes>,
    pub base_url: &'a str,
    /// Cookies get `Secure` when the console is served over HTTPS.
    pub secure: bool,
}

impl Visit<'_> {
    fn form(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(self.request.body()).into_owned().collect()
    }

    pub fn cookie(&self, name: &str) -> Option<String> {
        cookie(self.request.headers(), name)
    }

    /// A `Set-Cookie` value for `/console` (or `path`), `max_age` seconds.
    pub fn set_cookie(&self, name: &str, value: &str, path: &str, max_age: u64, same_site: &str) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        format!("{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite={same_site}{secure}")
    }
}

impl ConsoleRoutes {
    pub async fn handle(&self, request: &Request<Bytes>, base_url: &str) -> Response<Bytes> {
        let visit = Visit { request, base_url, secure: base_url.starts_with("https://") };
        let path = request.uri().path().trim_end_matches('/');
        match (request.method(), path) {
            (&Method::GET, "/console") => self.front(&visit).await,
            (&Method::GET, "/console/signin") => confirm_link(&visit),
            (&Method::POST, "/console/signin") => self.link_sign_in(&visit).await,
            (&Method::GET, "/console/oidc/start") => self.oidc_start(&visit).await,
            (&Method::GET, "/console/oidc/callback") => self.oidc_callback(&visit).await,
            (&Method::POST, "/console/logout") => self.logout(&visit).await,
            (method, path) => self.signed_in_route(&visit, method, path).await,
        }
    }

    /// The routes of one execution, grant or connection.
    async fn signed_in_route(&self, visit: &Visit<'_>, method: &Method, path: &str) -> Response<Bytes> {
        let signed_in = match self.signed_in(visit).await {
            Ok(signed_in) => signed_in,
            Err(response) => return response,
        };
        if let Some(id) = path_id(path, "/console/executions/") {
            return match *method {
                Method::GET => self.execution(&signed_in, &id).await,
                Method::POST => self.with_csrf(visit, &signed_in, self.decide(visit, &signed_in, &id)).await,
                _ => not_found(),
            };
        }
        let rest = (method == Method::POST).then_some(path).and_then(|p| p.strip_prefix("/console/"));
        match rest.and_then(|rest| rest.split_once('/')) {
            Some(("grants", tail)) if tail.ends_with("/revoke") => {
                let id = tail.trim_end_matches("/revoke");
                self.with_csrf(visit, &signed_in, self.revoke(&signed_in, id)).await
            }
            Some(("connections", tail)) if tail.ends_with("/disconnect") => {
                let source = tail.trim_end_matches("/disconnect");
                self.with_csrf(visit, &signed_in, self.disconnect(&signed_in, source)).await
            }
            _ => not_found(),
        }
    }

    /// Who the session cookie signs in; else the answer for someone who is not signed in.
    async fn signed_in(&self, visit: &Visit<'_>) -> Result<SignedIn, Response<Bytes>> {
        let token = visit.cookie(SESSION_COOKIE).unwrap_or_default();
        match self.sign_in.session(&token).await {
            Ok(signed_in) => Ok(signed_in),
            Err(ConsoleError::SignedOut) if visit.request.method() == Method::GET => Err(see_other("/console", &[])),
            Err(error) => Err(console_error(&error)),
        }
    }

    /// Run `then` only when the form carries the session's CSRF token.
    async fn with_csrf(
        &self,
        visit: &Visit<'_>,
        signed_in: &SignedIn,
        then: impl Future<Output = Response<Bytes>>,
    ) -> Response<Bytes> {
        let form = visit.form();
        let sent = form.iter().find(|(k, _)| k == "csrf").map(|(_, v)| v.as_str()).unwrap_or_default();
        match same_secret(sent, &signed_in.csrf) {
            true => then.await,
            false => forged(),
        }
    }

    async fn front(&self, visit: &Visit<'_>) -> Response<Bytes> {
        let token = visit.cookie(SESSION_COOKIE).unwrap_or_default();
        let signed_in = match self.sign_in.session(&token).await {
            Ok(signed_in) => signed_in,
            Err(ConsoleError::SignedOut) => {
                return page(StatusCode::OK, console_page::sign_in(self.issuer(), None));
            }
            Err(error) => return console_error(&error),
        };
        let notice = query_param(visit.request.uri().query(), "notice").and_then(|code| Notice::parse(&code));
        match self.dashboard(&signed_in, notice).await {
            Ok(html) => page(StatusCode::OK, html),
            Err(error) => unavailable(&error.to_string()),
        }
    }

    async fn dashboard(&self, signed_in: &SignedIn, notice: Option<Notice>) -> Result<String, StoreError> {
        let owner = &signed_in.principal;
        let paused = Listing { status: Some(ExecutionStatus::Paused), limit: LISTED, ..Listing::default() };
        let mut pending = Vec::new();
        for record in self.history.list(owner, None, &paused).await?.items {
            match self.executions.task(owner, &record.id, self.tools.clone()).await {
                Ok(execution) => pending.push(execution),
                // Decided or expired since it was listed.
                Err(ResumeError::NotFound(_) | ResumeError::Expired(_) | ResumeError::AlreadySettled(_)) => {}
                Err(ResumeError::Store(error)) => return Err(error),
                Err(_) => {}
            }
        }
        let recent = self.history.list(owner, None, &Listing { limit: LISTED, ..Listing::default() }).await?.items;
        let grants = self.grants.list(owner).await?;
        let connections = match &self.connections {
            Some(connections) => Some(
                connections
                    .connected(owner)
                    .await
                    .map_err(|e| StoreError::Backend { operation: "list the connections", detail: e.to_string() })?,
            ),
            None => None,
        };
        Ok(console_page::dashboard(&Dashboard {
            subject: &signed_in.subject,
            csrf: &signed_in.csrf,
            notice,
            pending: &pending,
            recent: &recent,
            grants: &grants,
            connections: connections.as_deref(),
            now: self.history.now(),
        }))
    }

    async fn execution(&self, signed_in: &SignedIn, id: &ExecutionId) -> Response<Bytes> {
        let owner = &signed_in.principal;
        let (record, entries) = match self.history.show(owner, None, id).await {
            Ok(found) => found,
            Err(StoreError::NotFound { .. }) => return not_found(),
            Err(error) => return unavailable(&error.to_string()),
        };
        let execution: Option<Execution> = self.executions.task(owner, id, self.tools.clone()).await.ok();
        let html = console_page::execution(&ExecutionPage {
            subject: &signed_in.subject,
            csrf: &signed_in.csrf,
            record: &record,
            entries: &entries,
            execution: execution.as_ref(),
            now: self.history.now(),
        });
        page(StatusCode::OK, html)
    }

    /// Approve, always allow or decline: the owner's decision, through the
    /// console (`channel: browser`, decided by the signed-in principal).
    async fn decide(&self, visit: &Visit<'_>, signed_in: &SignedIn, id: &ExecutionId) -> Response<Bytes> {
        let form = visit.form();
        let (decision, notice) = match form.iter().find(|(k, _)| k == "decision").map(|(_, v)| v.as_str()) {
            Some("accept") => ((ApprovalAction::Accept, Remember::Once), Notice::Approved),
            Some("accept_always") => ((ApprovalAction::Accept, Remember::Always), Notice::AlwaysAllowed),
            Some("decline") => ((ApprovalAction::Decline, Remember::Once), Notice::Declined),
            _ => {
                return message(
                    StatusCode::BAD_REQUEST,
                    "Choose Approve, Always allow or Decline",
                    "Nothing was decided.",
                );
            }
        };
        let by = Decider { channel: Channel::Console, by: DecidedBy::principal(&signed_in.principal) };
        let owner = &signed_in.principal;
        match self.executions.decide_as_owner(owner, id, decision, by, self.tools.clone()).await {
            Ok(_) => noticed(notice),
            Err(ResumeError::AlreadySettled(_)) => noticed(Notice::AlreadyDecided),
            Err(ResumeError::Expired(_)) => noticed(Notice::Expired),
            Err(ResumeError::NotFound(_)) => not_found(),
            Err(ResumeError::Quota(exceeded)) => {
                message(StatusCode::TOO_MANY_REQUESTS, "Over a quota", &exceeded.to_string())
            }
            Err(error @ (ResumeError::Busy(_) | ResumeError::Store(_))) => unavailable(&error.to_string()),
        }
    }

    async fn revoke(&self, signed_in: &SignedIn, id: &str) -> Response<Bytes> {
        match self.grants.revoke(&signed_in.principal, id).await {
            Ok(_) => noticed(Notice::Revoked),
            Err(StoreError::NotFound { .. }) => not_found(),
            Err(error) => unavailable(&error.to_string()),
        }
    }

    async fn disconnect(&self, signed_in: &SignedIn, source: &str) -> Response<Bytes> {
        let Some(connections) = &self.connections else { return not_found() };
        let source = form_urlencoded::parse(source.as_bytes()).next().map(|(k, _)| k.into_owned()).unwrap_or_default();
        match connections.disconnect(&signed_in.principal, &source).await {
            Ok(()) => noticed(Notice::Disconnected),
            Err(ConnectError::NotConnected(_) | ConnectError::UnknownSource(_)) => not_found(),
            Err(error) => unavailable(&error.to_string()),
        }
    }

    async fn link_sign_in(&self, visit: &Visit<'_>) -> Response<Bytes> {
        let form = visit.form();
        let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let expected = visit.cookie(FORM_COOKIE).filter(|c| valid_csrf(c));
        if !expected.as_deref().is_some_and(|expected| same_secret(field("csrf").unwrap_or_default(), expected)) {
            return forged();
        }
        match self.sign_in.sign_in_with_link(field("token").unwrap_or_default()).await {
            Ok((token, _)) => {
                let cookie = self.session_cookie(visit, token.as_str());
                see_other(&format!("/console?notice={}", Notice::SignedIn.code()), &[cookie])
            }
            Err(error) => console_error(&error),
        }
    }

    async fn logout(&self, visit: &Visit<'_>) -> Response<Bytes> {
        let signed_in = match self.signed_in(visit).await {
            Ok(signed_in) => signed_in,
            Err(_) => return see_other("/console", &[visit.set_cookie(SESSION_COOKIE, "", "/console", 0, "Strict")]),
        };
        let sign_out = async {
            match self.sign_in.sign_out(&signed_in).await {
                Ok(()) => see_other("/console", &[visit.set_cookie(SESSION_COOKIE, "", "/console", 0, "Strict")]),
                Err(error) => console_error(&error),
            }
        };
        self.with_csrf(visit, &signed_in, sign_out).await
    }

    pub(crate) fn session_cookie(&self, visit: &Visit<'_>, token: &str) -> String {
        visit.set_cookie(SESSION_COOKIE, token, "/console", self.sign_in.session_ttl().as_secs(), "Strict")
    }

    pub(crate) fn issuer(&self) -> Option<&str> {
        self.oidc.as_deref().map(Oidc::issuer)
    }
}

/// `GET /console/signin?token=...`: the page with the one button that uses
/// the link; it sets the sign-in form's CSRF cookie.
fn confirm_link(visit: &Visit<'_>) -> Response<Bytes> {
    let token = query_param(visit.request.uri().query(), "token").unwrap_or_default();
    let csrf = match crate::application::random::csrf_token() {
        Ok(csrf) => csrf,
        Err(e) => return unavailable(&e.to_string()),
    };
    let mut response = page(StatusCode::OK, console_page::confirm_link(&token, &csrf));
    add_cookies(&mut response, &[visit.set_cookie(FORM_COOKIE, &csrf, "/console", 600, "Strict")]);
    response
}

/// Equal secrets, compared in time that does not depend on where they differ.
fn same_secret(sent: &str, expected: &str) -> bool {
    sent.len() == expected.len() && sent.bytes().zip(expected.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

pub(crate) fn see_other(location: &str, cookies: &[String]) -> Response<Bytes> {
    let mut response = page(StatusCode::SEE_OTHER, String::new());
    if let Ok(location) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    add_cookies(&mut response, cookies);
    response
}

pub(crate) fn add_cookies(response: &mut Response<Bytes>, cookies: &[String]) {
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
}

fn noticed(notice: Notice) -> Response<Bytes> {
    see_other(&format!("/console?notice={}", notice.code()), &[])
}

pub(crate) fn message(status: StatusCode, title: &str, text: &str) -> Response<Bytes> {
    page(status, console_page::message(title, text))
}

fn forged() -> Response<Bytes> {
    message(
        StatusCode::FORBIDDEN,
        "Please reload the console",
        "This form could not be verified (it was sent from another page, or your browser blocks cookies). Nothing \
         was changed.",
    )
}

fn not_found() -> Response<Bytes> {
    message(
        StatusCode::NOT_FOUND,
        "Not found",
        "There is nothing here for you: it may have been decided, revoked or never existed.",
    )
}

pub(crate) fn unavailable(detail: &str) -> Response<Bytes> {
    let text = format!("The console could not reach its storage ({detail}). Reload this page in a moment.");
    message(StatusCode::SERVICE_UNAVAILABLE, "Try again shortly", &text)
}

pub(crate) fn console_error(error: &ConsoleError) -> Response<Bytes> {
    match error {
        ConsoleError::LinkNotValid => message(StatusCode::FORBIDDEN, "This link signs nobody in", &error.to_string()),
        ConsoleError::LoginNotValid => message(StatusCode::FORBIDDEN, "Sign-in not finished", &error.to_string()),
        ConsoleError::SignedOut => message(StatusCode::FORBIDDEN, "Signed out", &error.to_string()),
        ConsoleError::Randomness(_) | ConsoleError::Store(_) => unavailable(&error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_http_only_strict_and_secure_on_https() {
        let request = Request::new(Bytes::new());
        let cases = [
            (false, "executor_console=t; Path=/console; Max-Age=60; HttpOnly; SameSite=Strict"),
            (true, "executor_console=t; Path=/console; Max-Age=60; HttpOnly; SameSite=Strict; Secure"),
        ];
        for (secure, expected) in cases {
            let visit = Visit { request: &request, base_url: "https://x", secure };
            assert_eq!(visit.set_cookie(SESSION_COOKIE, "t", "/console", 60, "Strict"), expected);
        }
    }

    #[test]
    fn secrets_compare_whole() {
        let cases = [("abcd", "abcd", true), ("abcd", "abce", false), ("abc", "abcd", false), ("", "", true)];
        for (sent, expected, same) in cases {
            assert_eq!(same_secret(sent, expected), same, "{sent:?} {expected:?}");
        }
    }
}
