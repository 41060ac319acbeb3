//! Per-owner OAuth connections: a call to a source the owner has not
//! connected pauses with `interaction.kind: "connect"`; the connect link
//! starts the authorization code flow, and the callback stores the tokens and
//! continues the execution exactly as an approval would (one claim, so the
//! call is made at most once). The owner lists and removes connections with
//! `GET /api/connections` and `DELETE /api/connections/{source}`.
//!
//! A state dies with its pause. A pause has one state at a time (opening a
//! connect link again replaces it), and the callback redeems a code only
//! while the pause still waits for that connection through the link the state
//! began with: after the pause was decided, connected or expired, a state is
//! refused before its code is exchanged, so nothing is stored. While a
//! callback completes a state, no other state can begin for the pause.
//!
//! Which process runs the continuation: the callback, always, in every
//! elicitation mode (the person is at the page, and the tokens were just
//! stored). A model-mode `resume` with `pauseId` and `accept` afterwards
//! returns that outcome; one sent before the owner connected pauses again at
//! the same call.

use std::sync::Arc;

use bytes::Bytes;
use executor_core::{ApprovalAction, Execution, ExecutionId, ExecutionState, Principal};
use executor_sandbox::{Authorization, ConnectError, Connections, TakenAuthorization, Tools};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::application::executions::{ExecutionResult, Executions, ResumeError};
use crate::application::random::ApprovalToken;
use crate::http_edge::approval_page;
use crate::http_edge::responses::{api_json, page};

/// Where the authorization server sends the person back.
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";
pub(crate) const CONNECT_PREFIX: &str = "/oauth/connect/";

pub(crate) struct ConnectRoutes {
    connections: Arc<dyn Connections>,
    executions: Arc<Executions>,
    tools: Arc<dyn Tools>,
}

impl ConnectRoutes {
    pub fn new(connections: Arc<dyn Connections>, executions: Arc<Executions>, tools: Arc<dyn Tools>) -> Self {
        Self { connections, executions, tools }
    }

    /// `GET /oauth/connect/{executionId}?token=...`: the paused call's link
    /// starts the authorization (a fresh state, replacing the pause's earlier
    /// one) and sends the person to the authorization server.
    pub async fn connect(&self, request: &Request<Bytes>, base_url: &str) -> Response<Bytes> {
        let id = request.uri().path().strip_prefix(CONNECT_PREFIX).map(|id| id.trim_end_matches('/'));
        let Some(Ok(id)) = id.map(ExecutionId::parse) else { return not_found() };
        crate::http_edge::spans::record("executor.execution.id", id.as_str());
        if request.method() != Method::GET {
            return page(StatusCode::METHOD_NOT_ALLOWED, approval_page::message("Not allowed", "Use the link.", None));
        }
        let token = query_param(request, "token").unwrap_or_default();
        let execution = match self.executions.view_with_link(&id, &token).await {
            Ok(execution) => execution,
            Err(error) => return resume_error_page(&error),
        };
        let (ExecutionState::Paused { .. }, Some(call)) = (execution.state(), execution.journal.pending.first()) else {
            return resume_error_page(&ResumeError::AlreadySettled(id));
        };
        let Some(source) = &call.connect else { return not_found() };
        let authorization = Authorization {
            owner: execution.owner.clone(),
            source: source.clone(),
            execution_id: id,
            step: call.step,
            link: ApprovalToken::hash_of(&token),
        };
        match self.connections.begin(&authorization, &redirect_uri(base_url)).await {
            Ok(url) => redirect(&url),
            Err(error) => connect_error_page(&error),
        }
    }

    /// `GET /oauth/callback?code=...&state=...`: take the state, store the
    /// owner's tokens if its pause still waits for them, and continue the
    /// execution; then forget the state.
    pub async fn callback(&self, request: &Request<Bytes>, base_url: &str) -> Response<Bytes> {
        if let Some(error) = query_param(request, "error") {
            let text = format!(
                "The authorization server answered \"{error}\" instead of connecting (you may have declined). \
                 Nothing was stored and the call was not made; open the connect link again to retry."
            );
            return page(StatusCode::BAD_REQUEST, approval_page::message("Not connected", &text, None));
        }
        let (Some(state), Some(code)) = (query_param(request, "state"), query_param(request, "code")) else {
            let text = "This address is where the authorization server sends you back, with `code` and `state`.";
            return page(StatusCode::BAD_REQUEST, approval_page::message("Nothing to connect", text, None));
        };
        let taken = match self.connections.take(&state).await {
            Ok(taken) => taken,
            Err(error) => return connect_error_page(&error),
        };
        crate::http_edge::spans::record("executor.execution.id", taken.authorization.execution_id.as_str());
        let response = self.complete(&taken, &code, base_url).await;
        self.connections.release(&taken).await;
        response
    }

    /// The callback with its state taken: the pause is checked before the
    /// code is redeemed, so a state of a pause that no longer waits stores nothing.
    async fn complete(&self, taken: &TakenAuthorization, code: &str, base_url: &str) -> Response<Bytes> {
        let authorization = &taken.authorization;
        let (id, link) = (&authorization.execution_id, &authorization.link);
        let waiting = match self.executions.view_with_link_hash(id, link).await {
            Ok(execution) => waits_for(&execution, authorization),
            Err(error) => Err(error),
        };
        if let Err(error) = waiting {
            tracing::warn!(
                executor.execution.id = id.as_str(),
                source = authorization.source,
                "an OAuth callback for a pause that no longer waits was refused; nothing was stored"
            );
            return no_longer_waiting_page(&error);
        }
        if let Err(error) = self.connections.finish(taken, code, &redirect_uri(base_url)).await {
            return connect_error_page(&error);
        }
        let result = self.executions.decide_with_link_hash(id, link, ApprovalAction::Accept, self.tools.clone()).await;
        outcome_page(&authorization.source, result, base_url)
    }

    /// `GET /api/connections` and `DELETE /api/connections/{source}`, as the authenticated `owner`.
    pub async fn api(&self, request: &Request<Bytes>, owner: &Principal) -> Response<Bytes> {
        let path = request.uri().path().trim_end_matches('/');
        match (request.method(), path.strip_prefix("/api/connections")) {
            (&Method::GET, Some("")) => match self.connections.connected(owner).await {
                Ok(connections) => {
                    let listed: Vec<Value> = connections
                        .iter()
                        .map(|c| {
                            json!({
                                "source": c.source,
                                "connectedAt": c.connected_at.to_rfc3339(),
                                "scopes": c.scopes,
                                "expiresAt": c.expires_at.map(|at| at.to_rfc3339()),
                            })
                        })
                        .collect();
                    api_json(StatusCode::OK, &json!({ "connections": listed }))
                }
                Err(error) => api_error(StatusCode::SERVICE_UNAVAILABLE, "store_error", &error),
            },
            (&Method::DELETE, Some(rest)) if rest.starts_with('/') => {
                match self.connections.disconnect(owner, &rest[1..]).await {
                    Ok(()) => {
                        let mut response = Response::new(Bytes::new());
                        *response.status_mut() = StatusCode::NO_CONTENT;
                        response
                    }
                    Err(error @ ConnectError::NotConnected(_)) => {
                        api_error(StatusCode::NOT_FOUND, "connection_not_found", &error)
                    }
                    Err(error) => api_error(StatusCode::SERVICE_UNAVAILABLE, "store_error", &error),
                }
            }
            _ => {
                let message = "GET /api/connections or DELETE /api/connections/{source}";
                api_json(
                    StatusCode::METHOD_NOT_ALLOWED,
                    &json!({"error": {"code": "method_not_allowed", "message": message}}),
                )
            }
        }
    }
}

fn redirect_uri(base_url: &str) -> String {
    format!("{}{CALLBACK_PATH}", base_url.trim_end_matches('/'))
}

fn query_param(request: &Request<Bytes>, name: &str) -> Option<String> {
    let query = request.uri().query()?;
    form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

fn api_error(status: StatusCode, code: &str, error: &ConnectError) -> Response<Bytes> {
    api_json(status, &json!({"error": {"code": code, "message": error.to_string()}}))
}

fn redirect(url: &str) -> Response<Bytes> {
    let mut response = page(StatusCode::SEE_OTHER, approval_page::message("Connecting", "Redirecting…", None));
    match HeaderValue::from_str(url) {
        Ok(location) => {
            response.headers_mut().insert(header::LOCATION, location);
            response
        }
        Err(_) => {
            let text = "The source's authorization_url does not make a valid address; check the sources file.";
            page(StatusCode::INTERNAL_SERVER_ERROR, approval_page::message("Cannot connect", text, None))
        }
    }
}

fn not_found() -> Response<Bytes> {
    let text = "This connect link is not valid: it may belong to a call that was already decided, or be incomplete.";
    page(StatusCode::NOT_FOUND, approval_page::message("Link not found", text, None))
}

fn resume_error_page(error: &ResumeError) -> Response<Bytes> {
    match error {
        ResumeError::NotFound(_) => not_found(),
        ResumeError::AlreadySettled(_) => page(
            StatusCode::CONFLICT,
            approval_page::message(
                "Already continued",
                "This call was already decided or continued; nothing runs again. The agent has its outcome.",
                None,
            ),
        ),
        ResumeError::Expired(_) => page(
            StatusCode::GONE,
            approval_page::message(
                "This request expired",
                "Nobody connected in time, so the call was not made. Ask the agent to run it again.",
                None,
            ),
        ),
        other => {
            page(StatusCode::SERVICE_UNAVAILABLE, approval_page::message("Try again shortly", &other.to_string(), None))
        }
    }
}

/// Whether `execution` still waits for the connection `authorization` was
/// begun for: paused at that call, of that source.
fn waits_for(execution: &Execution, authorization: &Authorization) -> Result<(), ResumeError> {
    let call = execution.journal.pending.first();
    let at_the_call = call.is_some_and(|call| {
        call.step == authorization.step && call.connect.as_deref() == Some(authorization.source.as_str())
    });
    match execution.state() {
        ExecutionState::Paused { .. } if at_the_call => Ok(()),
        ExecutionState::Expired => Err(ResumeError::Expired(execution.id.clone())),
        _ => Err(ResumeError::AlreadySettled(execution.id.clone())),
    }
}

/// A callback whose pause no longer waits for it: refused, nothing stored.
fn no_longer_waiting_page(error: &ResumeError) -> Response<Bytes> {
    let (status, why) = match error {
        ResumeError::AlreadySettled(_) => (
            StatusCode::CONFLICT,
            "The call this authorization was for was already decided or connected, so the authorization no longer \
             counts",
        ),
        ResumeError::Expired(_) => {
            (StatusCode::GONE, "The call this authorization was for expired before the authorization came back")
        }
        ResumeError::NotFound(_) => (
            StatusCode::NOT_FOUND,
            "The call this authorization was for no longer waits for it (it was decided, or its link was replaced)",
        ),
        other => return resume_error_page(other),
    };
    let text = format!(
        "{why}: nothing was stored, and your account was not connected. If the call still needs a connection, ask \
         the agent to run the code again."
    );
    page(status, approval_page::message("Not connected", &text, None))
}

fn connect_error_page(error: &ConnectError) -> Response<Bytes> {
    let status = match error {
        ConnectError::StateNotFound | ConnectError::UnknownSource(_) | ConnectError::NotConnected(_) => {
            StatusCode::BAD_REQUEST
        }
        ConnectError::Completing => StatusCode::CONFLICT,
        ConnectError::Refused(_) => StatusCode::BAD_GATEWAY,
        ConnectError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    page(status, approval_page::message("Not connected", &error.to_string(), None))
}

/// What the person sees after connecting: the continuation's outcome.
fn outcome_page(source: &str, result: Result<ExecutionResult, ResumeError>, base_url: &str) -> Response<Bytes> {
    let connected = format!("Connected to {source}.");
    let (title, text, detail) = match &result {
        Ok(ExecutionResult::Completed { result, .. }) => {
            (connected, "The call was made and the code finished.".to_owned(), Some(result))
        }
        Ok(ExecutionResult::Failed { error, .. }) => {
            (connected, format!("The call ran, but the code stopped with an error: {}", error.message), None)
        }
        Ok(ExecutionResult::Paused { execution_id, link: Some(next), .. }) => {
            // The person is here: the next decision is theirs to make too.
            let url = format!("{}/approvals/{execution_id}?token={}", base_url.trim_end_matches('/'), next.as_str());
            return redirect(&url);
        }
        Ok(ExecutionResult::Paused { .. } | ExecutionResult::Running { .. }) => {
            (connected, "The code went on; the agent will report what happens next.".to_owned(), None)
        }
        Err(ResumeError::AlreadySettled(_)) => (
            connected,
            "The call had already been continued (nothing runs twice); the agent has its outcome.".to_owned(),
            None,
        ),
        Err(error) => {
            let text = format!("Your account is connected, but the code could not continue: {error}");
            return page(StatusCode::OK, approval_page::message(&connected, &text, None));
        }
    };
    page(StatusCode::OK, approval_page::message(&title, &text, detail))
}
