//! What `execute` and `resume` answer: the `structuredContent` shapes of
//! docs/mcp.md ("Tools"), and a text for clients that only read `content`.

use serde_json::{Value, json};

use executor_core::{ElicitationMode, ExecutionId};

use crate::application::executions::{ExecutionResult, ResumeError};
use crate::application::random::ApprovalToken;

/// The structured content and whether it is an error. `base_url` is where
/// browser approval links point (`<base_url>/approvals/<id>?token=...`).
pub(crate) fn execution(result: &ExecutionResult, base_url: &str) -> (Value, bool) {
    match result {
        ExecutionResult::Completed { result, logs, .. } => {
            (json!({ "status": "completed", "result": result, "logs": logs }), false)
        }
        ExecutionResult::Failed { error, logs, .. } => {
            let mut failure = json!({ "code": error.code, "message": error.message });
            if let Some(ms) = error.retry_after_ms {
                failure["retryAfterMs"] = ms.into();
            }
            (json!({ "status": "error", "error": failure, "logs": logs }), true)
        }
        ExecutionResult::Paused {
            execution_id,
            expires_at,
            link: Some(token),
            logs,
            mode: ElicitationMode::Browser,
            ..
        } => (
            json!({
                "status": "user_approval_required",
                "executionId": execution_id,
                "approvalUrl": token.approval_url(base_url, execution_id),
                "expiresAt": expires_at.to_rfc3339(),
                "logs": logs,
            }),
            false,
        ),
        // A call that waits for the owner to connect a source: the link starts that.
        ExecutionResult::Paused { execution_id, expires_at, pending, logs, link, mode }
            if pending[0].connect.is_some() =>
        {
            let first = &pending[0];
            let mut interaction = json!({ "kind": "connect", "message": first.message, "tool": first.path });
            if let Some(token) = link {
                interaction["connectUrl"] = connect_url(base_url, execution_id, token).into();
            }
            (
                json!({
                    "status": "waiting_for_interaction",
                    "executionId": execution_id,
                    "expiresAt": expires_at.to_rfc3339(),
                    "interaction": interaction,
                    "pauseId": first.step.to_string(),
                    "decidedBy": if *mode == ElicitationMode::Native { "client" } else { "model" },
                    "logs": logs,
                }),
                false,
            )
        }
        ExecutionResult::Paused { execution_id, expires_at, pending, logs, mode, .. } => {
            let first = &pending[0];
            let message = match pending.len() {
                1 => first.message.clone(),
                n => format!("{n} calls of one step need approval, and one decision covers them all:\n\n{}", {
                    let each: Vec<&str> = pending.iter().map(|call| call.message.as_str()).collect();
                    each.join("\n\n")
                }),
            };
            // Every call the decision covers, so nobody approves a call they were not shown;
            // `tool` and `args` stay the first's for older clients.
            let calls: Vec<Value> = pending
                .iter()
                .map(|call| json!({ "tool": call.path, "args": call.args, "message": call.message }))
                .collect();
            (
                json!({
                    "status": "waiting_for_interaction",
                    "executionId": execution_id,
                    "expiresAt": expires_at.to_rfc3339(),
                    "interaction": {
                        "kind": "approval",
                        "message": message,
                        "tool": first.path,
                        "args": first.args,
                        "calls": calls,
                    },
                    "pauseId": first.step.to_string(),
                    "decidedBy": if *mode == ElicitationMode::Native { "client" } else { "model" },
                    "logs": logs,
                }),
                false,
            )
        }
        ExecutionResult::Running { execution_id } => {
            (json!({ "status": "running", "executionId": execution_id, "pollAfterMs": POLL_AFTER_MS }), false)
        }
    }
}

/// When a `running` answer suggests calling `resume` again. It can be short:
/// `resume` itself waits up to the response budget for the outcome.
pub(crate) const POLL_AFTER_MS: u64 = 1000;

/// Where the owner starts connecting the source a paused call waits for.
pub(crate) fn connect_url(base_url: &str, id: &ExecutionId, token: &ApprovalToken) -> String {
    format!("{}/oauth/connect/{id}?token={}", base_url.trim_end_matches('/'), token.as_str())
}

pub(crate) fn resume_error(error: &ResumeError) -> Value {
    let mut failure = json!({ "code": error.code(), "message": error.to_string() });
    if let ResumeError::Quota(exceeded) = error
        && let Some(ms) = exceeded.retry_after_ms()
    {
        failure["retryAfterMs"] = ms.into();
    }
    json!({ "status": "error", "error": failure })
}

/// What an approval asks about: its tool, or every call one decision covers.
fn asked(interaction: &Value) -> String {
    let tool = interaction["tool"].as_str().unwrap_or("a tool");
    match interaction["calls"].as_array() {
        Some(calls) if calls.len() > 1 => {
            let tools: Vec<&str> = calls.iter().filter_map(|call| call["tool"].as_str()).collect();
            format!("one decision on {} calls ({}; each in interaction.calls)", calls.len(), tools.join(", "))
        }
        _ => tool.to_owned(),
    }
}

/// One line for the model to act on, then the JSON.
pub(crate) fn text(structured: &Value) -> String {
    let lead = match structured["status"].as_str() {
        Some("waiting_for_interaction") if structured["interaction"]["kind"] == "connect" => format!(
            "Paused: {} uses the user's own account, which they have not connected yet. Show the user this link \
             and ask them to connect there: {} (it expires {}). Once they have, the call runs by itself; then call \
             `resume` with executionId \"{}\", pauseId \"{}\" and action \"accept\" to get the outcome.",
            structured["interaction"]["tool"].as_str().unwrap_or("a tool"),
            structured["interaction"]["connectUrl"].as_str().unwrap_or("(call resume without an action for a link)"),
            structured["expiresAt"].as_str().unwrap_or("soon"),
            structured["executionId"].as_str().unwrap_or(""),
            structured["pauseId"].as_str().unwrap_or(""),
        ),
        Some("waiting_for_interaction") if structured["decidedBy"] == "client" => format!(
            "Paused: {} needs approval, and the user's MCP client asked them about it. Only their answer there \
             decides it (resume cannot). Call `resume` with executionId \"{}\" and no action to see where it stands; \
             it expires {}.",
            structured["interaction"]["tool"].as_str().unwrap_or("a tool"),
            structured["executionId"].as_str().unwrap_or(""),
            structured["expiresAt"].as_str().unwrap_or("soon"),
        ),
        Some("waiting_for_interaction") => format!(
            "Paused: {} needs approval. Ask the user, then call `resume` with executionId \"{}\", pauseId \"{}\" \
             and action \"accept\" or \"decline\" before {}.",
            asked(&structured["interaction"]),
            structured["executionId"].as_str().unwrap_or(""),
            structured["pauseId"].as_str().unwrap_or(""),
            structured["expiresAt"].as_str().unwrap_or("it expires"),
        ),
        Some("user_approval_required") => format!(
            "Approval needed. Show the user this link and ask them to approve or decline there: {} (it expires \
             {}). Then call `resume` with executionId \"{}\": it waits a while for their decision and returns the \
             outcome; if the link comes back again, the user has not decided yet: call `resume` again.",
            structured["approvalUrl"].as_str().unwrap_or(""),
            structured["expiresAt"].as_str().unwrap_or("soon"),
            structured["executionId"].as_str().unwrap_or(""),
        ),
        Some("running") => format!(
            "Still running: the code goes on without you. Call `resume` with executionId \"{}\" and no action to \
             wait for its outcome (call it again while it says running); pass action \"cancel\" only if the user \
             wants it stopped. Do not run the code again: that would repeat its calls.",
            structured["executionId"].as_str().unwrap_or(""),
        ),
        Some("completed") => "Completed.".to_owned(),
        _ => format!("Failed: {}", structured["error"]["message"].as_str().unwrap_or("unknown error")),
    };
    format!("{lead}\n{structured}")
}

#[cfg(test)]
mod tests {
    use executor_core::{ExecutionFailure, ExecutionId, PendingCall, Timestamp};

    use super::*;

    type Case = (ExecutionResult, Value, bool, &'static str);

    fn id() -> ExecutionId {
        ExecutionId::parse("e1").unwrap()
    }

    fn pending(n: u32) -> PendingCall {
        PendingCall::new(n, "gh.issues.create", json!({"title": "t"}), "Create an issue?")
    }

    /// Each result's structured content, whether it is an error, and how its text begins.
    fn check(cases: Vec<Case>) {
        for (result, expected, is_error, lead) in cases {
            let (structured, error) = execution(&result, "https://x.example/");
            assert_eq!(structured, expected);
            assert_eq!(error, is_error);
            assert!(text(&structured).starts_with(lead), "{}", text(&structured));
        }
    }

    #[test]
    fn settled_shapes() {
        let id = id();
        let mut cases: Vec<Case> = vec![
            (
                ExecutionResult::Completed { execution_id: id.clone(), result: json!(3), logs: vec!["x".into()] },
                json!({"status": "completed", "result": 3, "logs": ["x"]}),
                false,
                "Completed.",
            ),
            (
                ExecutionResult::Failed {
                    execution_id: id.clone(),
                    error: ExecutionFailure {
                        code: "syntax_error".into(),
                        message: "bad".into(),
                        retry_after_ms: None,
                    },
                    logs: vec![],
                },
                json!({"status": "error", "error": {"code": "syntax_error", "message": "bad"}, "logs": []}),
                true,
                "Failed: bad",
            ),
        ];
        cases.push((
            ExecutionResult::Running { execution_id: id.clone() },
            json!({"status": "running", "executionId": "e1", "pollAfterMs": 1000}),
            false,
            "Still running: the code goes on without you.",
        ));
        check(cases);
        let miss = resume_error(&ResumeError::Expired(id));
        assert_eq!(miss["error"]["code"], "execution_expired");
    }

    #[test]
    fn shapes_of_a_pause_the_model_or_the_client_decides() {
        let id = id();
        let cases: Vec<Case> = vec![
            (
                ExecutionResult::Paused {
                    execution_id: id.clone(),
                    expires_at: Timestamp::from_millis(0),
                    pending: vec![pending(2), PendingCall::new(3, "gh.issues.close", json!({"n": 7}), "Close #7?")],
                    logs: vec![],
                    link: None,
                    mode: ElicitationMode::Model,
                },
                json!({
                    "status": "waiting_for_interaction",
                    "executionId": "e1",
                    "expiresAt": "1970-01-01T00:00:00.000Z",
                    "interaction": {
                        "kind": "approval",
                        "message": "2 calls of one step need approval, and one decision covers them all:\n\nCreate an issue?\n\nClose #7?",
                        "tool": "gh.issues.create",
                        "args": {"title": "t"},
                        "calls": [
                            {"tool": "gh.issues.create", "args": {"title": "t"}, "message": "Create an issue?"},
                            {"tool": "gh.issues.close", "args": {"n": 7}, "message": "Close #7?"},
                        ],
                    },
                    "pauseId": "2",
                    "decidedBy": "model",
                    "logs": [],
                }),
                false,
                "Paused: one decision on 2 calls (gh.issues.create, gh.issues.close; each in interaction.calls) needs approval. Ask the user",
            ),
            (
                ExecutionResult::Paused {
                    execution_id: id.clone(),
                    expires_at: Timestamp::from_millis(0),
                    pending: vec![pending(2)],
                    logs: vec![],
                    link: None,
                    mode: ElicitationMode::Native,
                },
                json!({
                    "status": "waiting_for_interaction",
                    "executionId": "e1",
                    "expiresAt": "1970-01-01T00:00:00.000Z",
                    "interaction": {
                        "kind": "approval",
                        "message": "Create an issue?",
                        "tool": "gh.issues.create",
                        "args": {"title": "t"},
                        "calls": [{"tool": "gh.issues.create", "args": {"title": "t"}, "message": "Create an issue?"}],
                    },
                    "pauseId": "2",
                    "decidedBy": "client",
                    "logs": [],
                }),
                false,
                "Paused: gh.issues.create needs approval, and the user's MCP client asked them",
            ),
        ];
        check(cases);
    }

    #[test]
    fn shapes_of_a_pause_with_a_link() {
        let id = id();
        let mut cases: Vec<Case> = Vec::new();
        let token = ApprovalToken::generate().unwrap();
        cases.push((
            ExecutionResult::Paused {
                execution_id: id.clone(),
                expires_at: Timestamp::from_millis(0),
                pending: vec![pending(2)],
                logs: vec!["l".into()],
                link: Some(token.clone()),
                mode: ElicitationMode::Browser,
            },
            json!({
                "status": "user_approval_required",
                "executionId": "e1",
                "approvalUrl": format!("https://x.example/approvals/e1?token={}", token.as_str()),
                "expiresAt": "1970-01-01T00:00:00.000Z",
                "logs": ["l"],
            }),
            false,
            "Approval needed. Show the user this link",
        ));
        let connect = PendingCall::connect(4, "crm.contacts.list", json!({}), "Connect crm?", "crm");
        cases.push((
            ExecutionResult::Paused {
                execution_id: id.clone(),
                expires_at: Timestamp::from_millis(0),
                pending: vec![connect],
                logs: vec![],
                link: Some(token.clone()),
                mode: ElicitationMode::Model,
            },
            json!({
                "status": "waiting_for_interaction",
                "executionId": "e1",
                "expiresAt": "1970-01-01T00:00:00.000Z",
                "interaction": {
                    "kind": "connect",
                    "message": "Connect crm?",
                    "tool": "crm.contacts.list",
                    "connectUrl": format!("https://x.example/oauth/connect/e1?token={}", token.as_str()),
                },
                "pauseId": "4",
                "decidedBy": "model",
                "logs": [],
            }),
            false,
            "Paused: crm.contacts.list uses the user's own account",
        ));
        check(cases);
    }
}
