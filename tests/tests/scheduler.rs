//! The EventBridge Scheduler adapter against moto's Scheduler API.

use executor_core::{SessionId, Timestamp};
use executor_store::{AlarmPayload, AlarmScheduler, EventBridgeScheduler, SchedulerTarget};

const TARGET: &str = "arn:aws:lambda:us-east-1:123456789012:function:executor-alarm";
const ROLE: &str = "arn:aws:iam::123456789012:role/executor-scheduler";

#[tokio::test]
async fn one_schedule_per_session_created_updated_and_deleted() {
    let client = executor_tests::scheduler_client();
    let group = format!("executor-test-{}", std::process::id());
    client.create_schedule_group().name(&group).send().await.unwrap();
    let target = SchedulerTarget { group: group.clone(), target_arn: TARGET.into(), role_arn: ROLE.into() };
    let scheduler = EventBridgeScheduler::new(client.clone(), target);
    let session = SessionId::parse("abc123").unwrap();
    let name = "executor-session-abc123";

    let first = Timestamp::from_millis(1_795_900_000_500);
    scheduler.schedule(&session, first).await.unwrap();
    let stored = client.get_schedule().name(name).group_name(&group).send().await.unwrap();
    assert_eq!(stored.schedule_expression(), Some("at(2026-11-28T21:06:41)"), "rounded up to the second");
    assert_eq!(stored.schedule_expression_timezone(), Some("UTC"));
    assert_eq!(stored.action_after_completion().map(|a| a.as_str()), Some("DELETE"));
    assert_eq!(stored.flexible_time_window().map(|w| w.mode().as_str()), Some("OFF"));
    let target = stored.target().unwrap();
    assert_eq!((target.arn(), target.role_arn()), (TARGET, ROLE));
    let payload: AlarmPayload = serde_json::from_str(target.input().unwrap()).unwrap();
    assert_eq!(payload, AlarmPayload { session_id: "abc123".into(), scheduled_for: first.to_rfc3339() });

    // Arming again moves the one schedule instead of failing.
    let later = Timestamp::from_millis(1_795_900_600_000);
    scheduler.schedule(&session, later).await.unwrap();
    let stored = client.get_schedule().name(name).group_name(&group).send().await.unwrap();
    assert_eq!(stored.schedule_expression(), Some("at(2026-11-28T21:16:40)"));
    let listed = client.list_schedules().group_name(&group).send().await.unwrap();
    assert_eq!(listed.schedules().len(), 1);

    scheduler.cancel(&session).await.unwrap();
    assert!(client.get_schedule().name(name).group_name(&group).send().await.is_err());
    scheduler.cancel(&session).await.expect("cancelling a missing schedule is not an error");
}
