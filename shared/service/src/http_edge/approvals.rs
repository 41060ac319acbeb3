//! The approval function's routes: the browser page (`/approvals/{id}`) that a
//! person opens from the link, and the JSON API (`/api/executions/{id}`) for
//! programmatic approvers, who authenticate as the owner.
//!
//! The page is reached with a single-use link token instead of a login, so it
//! answers "not found" for anything it cannot vouch for, and every response is
//! uncacheable, unframeable and runs no script.

use std::sync::Arc;

use bytes::Bytes;
use executor_core::{
    ApprovalAction, Channel, DecidedBy, Decider, Execution, ExecutionId, ExecutionState, Principal, Remember,
};
use executor_sandbox::Tools;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::application::executions::{ExecutionResult, Executions, ResumeError};
use crate::http_edge::approval_page::{self, PendingPage};
use crate::http_edge::responses::{api_json, page};
use crate::http_edge::results;

/// The double-submit cookie that the page's form must echo (CSRF).
const CSRF_COOKIE: &str = "executor_csrf";

pub(crate) struct ApprovalRoutes {
    executions: Arc<Executions>,
    tools: Arc<dyn Tools>,
}

impl ApprovalRoutes {
    pub fn new(executions: Arc<Executions>, tools: Arc<dyn Tools>) -> Self {
        Self { executions, tools }
    }

    /// `GET /approvals/{id}?token=...` shows the pending call; `POST` decides it.
    /// `secure` marks the CSRF cookie `Secure` (the page is served over HTTPS).
    pub async fn page(&self, request: &Request<Bytes>, secure: bool) -> Response<Bytes> {
        let Some(id) = path_id(request.uri().path(), "/approvals/") else { return not_found_page() };
        crate::http_edge::spans::record("executor.execution.id", id.as_str());
        match *request.method() {
            Method::GET => {
                let token = query_param(request.uri().query(), "token").unwrap_or_default();
                let csrf = cookie(request.headers(), CSRF_COOKIE).filter(|c| valid_csrf(c));
                let csrf = match csrf {
                    Some(csrf) => csrf,
                    None => match crate::application::random::csrf_token() {
                        Ok(csrf) => csrf,
                        Err(e) => return unavailable_page(&e.to_string()),
                    },
                };
                let mut response = self.show(&id, &token, &csrf).await;
                let attributes = if secure { "; Secure" } else { "" };
                let cookie = format!("{CSRF_COOKIE}={csrf}; Path=/approvals; HttpOnly; SameSite=Strict{attributes}");
                if let Ok(value) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().insert(header::SET_COOKIE, value);
                }
                response
            }
            Method::POST => {
                let form: Vec<(String, String)> = form_urlencoded::parse(request.body()).into_owned().collect();
                let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
                let cookie = cookie(request.headers(), CSRF_COOKIE);
                let csrf = field("csrf").filter(|c| valid_csrf(c));
                if csrf.is_none() || csrf != cookie.as_deref() {
                    return page(
                        StatusCode::FORBIDDEN,
                        approval_page::message(
                            "Please reload the approval link",
                            "This form could not be verified (it was sent from another page, or your browser blocks \
                             cookies). Nothing was decided. Open the approval link again and choose once more.",
                            None,
                        ),
                    );
                }
                let (action, remember) = match field("decision") {
                    Some("accept") => (ApprovalAction::Accept, Remember::Once),
                    Some("accept_always") => (ApprovalAction::Accept, Remember::Always),
                    Some("decline") => (ApprovalAction::Decline, Remember::Once),
                    _ => {
                        return page(
                            StatusCode::BAD_REQUEST,
                            approval_page::message(
                                "Choose Approve, Always allow or Decline",
                                "Nothing was decided.",
                                None,
                            ),
                        );
                    }
                };
                let token = field("token").unwrap_or_default();
                let csrf = csrf.unwrap_or_default();
                self.decide(&id, token, action, remember, csrf).await
            }
            _ => page(StatusCode::METHOD_NOT_ALLOWED, approval_page::message("Not allowed", "Use the link.", None)),
        }
    }

    async fn show(&self, id: &ExecutionId, token: &str, csrf: &str) -> Response<Bytes> {
        let execution = match self.executions.view_with_link(id, token).await {
            Ok(execution) => execution,
            Err(error) => return error_page(&error),
        };
        match execution.state() {
            ExecutionState::Paused { .. } => self.pending_page(&execution, token, csrf, None).await,
            ExecutionState::Expired => error_page(&ResumeError::Expired(id.clone())),
            // An open link only exists while its pause does; anything else was decided.
            _ => error_page(&ResumeError::AlreadySettled(id.clone())),
        }
    }

    async fn decide(
        &self,
        id: &ExecutionId,
        token: &str,
        action: ApprovalAction,
        remember: Remember,
        csrf: &str,
    ) -> Response<Bytes> {
        let result = match self.executions.decide_with_link(id, token, action, remember, self.tools.clone()).await {
            Ok(result) => result,
            Err(error) => return error_page(&error),
        };
        let declined = action != ApprovalAction::Accept;
        let (title, text, detail) = match &result {
            ExecutionResult::Paused { link: Some(next), .. } => {
                // The person is here: show the next approval straight away.
                let execution = match self.executions.view_with_link(id, next.as_str()).await {
                    Ok(execution) => execution,
                    Err(error) => return error_page(&error),
                };
                let lead = if declined {
                    "Declined. The code went on and now needs another approval."
                } else {
                    "Approved. The code went on and now needs another approval."
                };
                return self.pending_page(&execution, next.as_str(), csrf, Some(lead)).await;
            }
            ExecutionResult::Paused { link: None, .. } | ExecutionResult::Running { .. } => {
                ("Decided", "Your decision was applied; the agent will report what happens next.", None)
            }
            ExecutionResult::Completed { result, .. } if declined => {
                ("Declined", "The call was not made. The code handled that and finished.", Some(result))
            }
            ExecutionResult::Completed { result, .. } => {
                ("Approved", "The call was made and the code finished.", Some(result))
            }
            ExecutionResult::Failed { .. } if declined => {
                ("Declined", "The call was not made, and the code stopped there.", None)
            }
            ExecutionResult::Failed { error, .. } => {
                return page(
                    StatusCode::OK,
                    approval_page::message(
                        "Approved, but the code failed",
                        &format!("The code stopped with an error: {}", error.message),
                        None,
                    ),
                );
            }
        };
        page(StatusCode::OK, approval_page::message(title, text, detail))
    }

    async fn pending_page(
        &self,
        execution: &Execution,
        token: &str,
        csrf: &str,
        lead: Option<&str>,
    ) -> Response<Bytes> {
        let ExecutionState::Paused { deadline } = *execution.state() else { return not_found_page() };
        let pending = &execution.journal.pending;
        if let Some(source) = pending.first().and_then(|call| call.connect.as_deref()) {
            let html = approval_page::connect(&approval_page::ConnectPage {
                id: &execution.id,
                source,
                call: &pending[0],
                connect_url: &format!("{}{}?token={token}", crate::http_edge::connect::CONNECT_PREFIX, execution.id),
                deadline,
                now: self.executions.now(),
                token,
                csrf,
            });
            return page(StatusCode::OK, html);
        }
        let mut descriptions = Vec::with_capacity(pending.len());
        for call in pending {
            let described = self.tools.describe(json!({ "path": call.path })).await;
            descriptions.push(described.ok().and_then(|v| v.as_str().map(str::to_owned)));
        }
        let html = approval_page::pending(&PendingPage {
            id: &execution.id,
            code: &execution.code,
            pending,
            descriptions: &descriptions,
            deadline,
            now: self.executions.now(),
            token,
            csrf,
            lead,
            asked_by: &approval_page::who_asks(execution),
        });
        page(StatusCode::OK, html)
    }

    /// `GET /api/executions/{id}` and `POST /api/executions/{id}/resume` `{action}`.
    /// `scope` is the view of a key scoped to a toolkit: it reaches only that
    /// toolkit's executions.
    pub async fn api(
        &self,
        request: &Request<Bytes>,
        (owner, credential): (&Principal, &DecidedBy),
        scope: Option<Arc<dyn Tools>>,
        base_url: &str,
    ) -> Response<Bytes> {
        let tools = scope.unwrap_or_else(|| self.tools.clone());
        let rest = request.uri().path().strip_prefix("/api/executions/").unwrap_or_default();
        let (id, resume) = match rest.strip_suffix("/resume") {
            Some(id) => (id, true),
            None => (rest, false),
        };
        let Ok(id) = ExecutionId::parse(id) else {
            return api_json(
                StatusCode::NOT_FOUND,
                &json!({"error": {"code": "not_found", "message": "no such route"}}),
            );
        };
        crate::http_edge::spans::record("executor.execution.id", id.as_str());
        let result = match (request.method(), resume) {
            (&Method::GET, false) => self.executions.view_in(owner, &id, tools).await,
            (&Method::POST, true) => {
                let decision = serde_json::from_slice::<Value>(request.body())
                    .map_err(|e| format!("the body must be JSON like {{\"action\":\"accept\"}}: {e}"))
                    .and_then(|body| decision(&body));
                match decision {
                    Ok(decision) => {
                        let by = Decider { channel: Channel::OwnerApi, by: credential.clone() };
                        self.executions.decide_as_owner(owner, &id, decision, by, tools).await
                    }
                    Err(message) => {
                        let body =
                            json!({"status": "error", "error": {"code": "invalid_arguments", "message": message}});
                        return api_json(StatusCode::BAD_REQUEST, &body);
                    }
                }
            }
            _ => {
                let body = json!({"error": {"code": "method_not_allowed", "message": "GET /api/executions/{id} or POST /api/executions/{id}/resume"}});
                return api_json(StatusCode::METHOD_NOT_ALLOWED, &body);
            }
        };
        match result {
            Ok(result) => api_json(StatusCode::OK, &results::execution(&result, base_url).0),
            Err(error) => api_json(error_status(&error), &results::resume_error(&error)),
        }
    }
}

/// `{"action": "accept"|"decline"|"cancel", "remember"?: "once"|"always"}`;
/// only an accept can be remembered.
fn decision(body: &Value) -> Result<(ApprovalAction, Remember), String> {
    let action = body.get("action").and_then(Value::as_str);
    let action = ApprovalAction::parse(action.ok_or("`action` (accept, decline or cancel) is required")?)?;
    let remember = match body.get("remember") {
        None | Some(Value::Null) => Remember::Once,
        Some(Value::String(remember)) => Remember::parse(remember)?,
        Some(other) => return Err(format!("`remember` must be \"once\" or \"always\", not {other}")),
    };
    if remember == Remember::Always && action != ApprovalAction::Accept {
        return Err("only an accept can be remembered: send `remember: \"always\"` with `action: \"accept\"`".into());
    }
    Ok((action, remember))
}

fn error_status(error: &ResumeError) -> StatusCode {
    match error {
        ResumeError::NotFound(_) => StatusCode::NOT_FOUND,
        ResumeError::AlreadySettled(_) => StatusCode::CONFLICT,
        ResumeError::Expired(_) => StatusCode::GONE,
        ResumeError::Busy(_) | ResumeError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        ResumeError::Quota(_) => StatusCode::TOO_MANY_REQUESTS,
    }
}

fn error_page(error: &ResumeError) -> Response<Bytes> {
    let html = match error {
        ResumeError::NotFound(_) => return not_found_page(),
        ResumeError::AlreadySettled(_) => approval_page::message(
            "Already decided",
            "This approval was already answered. Its decision was applied once; nothing was run again.",
            None,
        ),
        ResumeError::Expired(_) => approval_page::message(
            "This approval expired",
            "Nobody decided in time, so the call was not made and the code stopped. Ask the agent to run it again.",
            None,
        ),
        ResumeError::Quota(exceeded) => approval_page::message("Over a quota", &exceeded.to_string(), None),
        ResumeError::Busy(_) => return unavailable_page(&error.to_string()),
        ResumeError::Store(e) => return unavailable_page(&e.to_string()),
    };
    page(error_status(error), html)
}

fn not_found_page() -> Response<Bytes> {
    page(
        StatusCode::NOT_FOUND,
        approval_page::message(
            "Approval not found",
            "This link is not valid: it may have been used already, replaced by a newer link, or copied incompletely.",
            None,
        ),
    )
}

fn unavailable_page(detail: &str) -> Response<Bytes> {
    // Said the same whether or not the decision was stored before storage
    // failed: the page cannot know, and the link tells the truth when reloaded.
    let text = format!(
        "The approval service could not reach its storage ({detail}), so it cannot confirm what happened. Reload \
         this page in a moment: it shows the call if it still waits for a decision, or says it was already decided."
    );
    page(StatusCode::SERVICE_UNAVAILABLE, approval_page::message("Try again shortly", &text, None))
}

pub(crate) fn path_id(path: &str, prefix: &str) -> Option<ExecutionId> {
    let id = path.strip_prefix(prefix)?.trim_end_matches('/');
    ExecutionId::parse(id).ok()
}

pub(crate) fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(name)?.strip_prefix('=').map(str::to_owned))
}

/// Our CSRF values are hex; anything else is not ours.
pub(crate) fn valid_csrf(value: &str) -> bool {
    value.len() == 32 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_and_query_parameters() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_static("a=1; executor_csrf=abc; executor_csrfx=no"));
        assert_eq!(cookie(&headers, "executor_csrf").as_deref(), Some("abc"));
        assert_eq!(cookie(&headers, "b"), None);
        let cases = [
            (Some("token=t1"), Some("t1")),
            (Some("x=1&token=a%2Bb"), Some("a+b")),
            (Some("tokenx=1"), None),
            (None, None),
        ];
        for (query, expected) in cases {
            assert_eq!(query_param(query, "token").as_deref(), expected, "{query:?}");
        }
    }

    #[test]
    fn routes_name_an_execution() {
        let cases = [
            ("/approvals/e1", Some("e1")),
            ("/approvals/e1/", Some("e1")),
            ("/approvals/", None),
            ("/approvals/a/b", None),
            ("/other/e1", None),
        ];
        for (path, expected) in cases {
            assert_eq!(path_id(path, "/approvals/").as_ref().map(ExecutionId::as_str), expected, "{path}");
        }
    }
}
