//! Quotas end to end, counted in the deployment's store (the embedded store
//! locally, DynamoDB behind the Lambda functions).

use executor_core::QuotaLimits;
use executor_service::HostConfig;
use rmcp::model::ProtocolVersion;
use serde_json::json;

use super::{Deployment, Place, Running, call};

fn limited(limits: QuotaLimits) -> HostConfig {
    let mut config = HostConfig::default();
    config.quotas.defaults = limits;
    config
}

/// 10 racing `execute`s against 5 an hour: exactly 5 run, 5 are refused with
/// `quota_exceeded` and when to retry; another owner is not affected.
pub(super) async fn ten_racing_executes_against_five_an_hour(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let config = limited(QuotaLimits { executions_per_hour: Some(5), ..QuotaLimits::defaults() });
    let host = Running::start_with(&place, None, config).await;
    // Ten clients, so the calls truly race (stateless: no sessions to set up).
    let mut clients = Vec::new();
    for _ in 0..10 {
        clients.push(host.client(ProtocolVersion::V_2026_07_28).await);
    }
    let racing = clients.iter().enumerate().map(|(i, c)| call(c, "execute", json!({"code": format!("return {i}")})));
    let outcomes = futures_util::future::join_all(racing).await;
    let completed = outcomes.iter().filter(|(v, _)| v["status"] == "completed").count();
    let refused: Vec<_> = outcomes.iter().filter(|(v, _)| v["error"]["code"] == "quota_exceeded").collect();
    assert_eq!((completed, refused.len()), (5, 5), "{outcomes:?}");
    for (refusal, is_error) in refused {
        assert!(is_error);
        let message = refusal["error"]["message"].as_str().unwrap();
        assert!(message.contains("5 execution(s) per hour") && message.contains("resets at"), "{message}");
        let retry = refusal["error"]["retryAfterMs"].as_u64().unwrap();
        assert!(retry > 0 && retry <= 3_600_000, "{refusal}");
    }

    let bob = host.client_at(&host.url, &host.bob, ProtocolVersion::V_2025_06_18).await;
    let (theirs, _) = call(&bob, "execute", json!({"code": "return 'bob'"})).await;
    assert_eq!(theirs["result"], "bob", "another owner has a count of their own");
    for client in clients {
        client.cancel().await.unwrap();
    }
    bob.cancel().await.unwrap();
    host.stop().await;
}

/// Code that pauses on every pass of a loop stops at the resume cap; code
/// that makes more tool calls than allowed stops before the one too many.
pub(super) async fn a_pause_resume_loop_stops_at_the_resume_cap(deployment: Deployment) {
    let place = Place::new(deployment).await;
    let limits =
        QuotaLimits { resumes_per_execution: Some(3), tool_calls_per_execution: Some(5), ..QuotaLimits::default() };
    let host = Running::start_with(&place, None, limited(limits)).await;
    let client = host.client(ProtocolVersion::V_2025_06_18).await;
    let looping = "for (let i = 0; i < 100; i++) { await tools.w.step({i}) } return 'done'";
    let (mut paused, _) = call(&client, "execute", json!({"code": looping})).await;
    let id = paused["executionId"].clone();
    for resumed in 1..=3 {
        assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
        (paused, _) = call(&client, "resume", json!({"executionId": id, "action": "accept"})).await;
        assert_eq!(host.tools.calls().len(), resumed, "one call per accepted resume");
    }
    assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
    let (refused, is_error) = call(&client, "resume", json!({"executionId": id, "action": "accept"})).await;
    assert!(is_error);
    assert_eq!(refused["error"]["code"], "quota_exceeded", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("resumed 3 time(s)"), "{refused}");
    assert!(refused["error"].get("retryAfterMs").is_none(), "waiting does not help: {refused}");
    assert_eq!(host.tools.calls().len(), 3, "the refused resume ran nothing");

    let calls = "for (let i = 0; i < 10; i++) { await tools.r.get({i}) } return 'all'";
    let (stopped, is_error) = call(&client, "execute", json!({"code": calls})).await;
    assert!(is_error);
    assert_eq!(stopped["error"]["code"], "quota_exceeded", "{stopped}");
    assert!(stopped["error"]["message"].as_str().unwrap().contains("5 tool call(s)"), "{stopped}");
    assert_eq!(host.tools.calls().len(), 3 + 5, "stopped before the sixth call");
    client.cancel().await.unwrap();
    host.stop().await;
}
