//! The alarm function's handler fed the payload EventBridge Scheduler delivers,
//! over DynamoDB (moto_server).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use executor_core::{
    AlarmDecision, ClientInfo, ElicitationMode, Principal, Session, SessionId, SessionStatus, Timeouts, Timestamp,
};
use executor_scheduler::InProcessScheduler;
use executor_service::Alarms;
use executor_store::{Access, SessionStore};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_payloads_destroy_idle_sessions_and_refuse_garbage() {
    let (store, _client) = executor_tests::dynamo_store().await;
    let store = Arc::new(store);
    let timeouts = Timeouts::default();
    let alarms = Alarms::new(store.clone(), store.clone(), Arc::new(InProcessScheduler::new()), timeouts);

    let now: Timestamp = SystemTime::now().into();
    let mut session = Session::new(
        SessionId::parse("idle").unwrap(),
        Principal::parse("alice").unwrap(),
        Timestamp::from_millis(now.as_millis() - 3 * 3_600_000),
        "2025-06-18",
        ClientInfo::default(),
        ElicitationMode::Model,
        now.plus(Duration::from_secs(3600)),
    );
    session.last_activity_at = session.created_at;
    store.create_session(&session).await.unwrap();

    let payload = json!({"sessionId": "idle", "scheduledFor": now.to_rfc3339()});
    let decision = executor_alarm_function::handle(&alarms, payload.clone(), now).await.unwrap();
    assert_eq!(decision, AlarmDecision::Destroy);
    assert_eq!(store.get_session(Access::Internal, &session.id).await.unwrap().status, SessionStatus::Destroyed);
    // The same payload again (Scheduler delivers at least once): nothing to do.
    assert_eq!(executor_alarm_function::handle(&alarms, payload, now).await.unwrap(), AlarmDecision::Ignore);

    for garbage in [json!({}), json!({"sessionId": "a#b", "scheduledFor": "x"}), json!("idle")] {
        let error = executor_alarm_function::handle(&alarms, garbage.clone(), now).await.unwrap_err();
        assert!(error.to_string().contains("alarm payload"), "{garbage}: {error}");
    }
}
