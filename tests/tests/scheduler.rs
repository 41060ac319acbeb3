//! The EventBridge Scheduler adapter against moto's Scheduler API.

use executor_core::{SessionId, Timestamp};
use executor_scheduler::{AlarmPayload, AlarmScheduler, EventBridgeScheduler, SchedulerTarget};

const TARGET: &str = "arn:aws:lambda:us-east-1:123456789012:function:executor-alarm";
const ROLE: &str = "arn:aws:iam::123456789012:role/executor-scheduler";

#[tokio::test]
async fn one_schedule_per_alarm_generation_created_and_deleted_never_updated() {
    let client = executor_tests::scheduler_client();
    let group = format!("executor-test-{}", std::process::id());
    client.create_schedule_group().name(&group).send().await.unwrap();
    let target = SchedulerTarget { group: group.clone(), target_arn: TARGET.into(), role_arn: ROLE.into() };
    let scheduler = EventBridgeScheduler::new(client.clone(), target);
    let session = SessionId::parse("abc123").unwrap();

    let first = Timestamp::from_millis(1_795_900_000_500);
    let first_name = EventBridgeScheduler::name(&session, first);
    assert_eq!(first_name, "executor-session-abc123-1795900000500");
    scheduler.schedule(&session, first).await.unwrap();
    let stored = client.get_schedule().name(&first_name).group_name(&group).send().await.unwrap();
    assert_eq!(stored.schedule_expression(), Some("at(2026-11-28T21:06:41)"), "rounded up to the second");
    assert_eq!(stored.schedule_expression_timezone(), Some("UTC"));
    assert_eq!(stored.action_after_completion().map(|a| a.as_str()), Some("DELETE"));
    assert_eq!(stored.flexible_time_window().map(|w| w.mode().as_str()), Some("OFF"));
    let target = stored.target().unwrap();
    assert_eq!((target.arn(), target.role_arn()), (TARGET, ROLE));
    let payload: AlarmPayload = serde_json::from_str(target.input().unwrap()).unwrap();
    let expected = AlarmPayload {
        session_id: "abc123".into(),
        scheduled_for: first.to_rfc3339(),
        generation: Some(first.as_millis()),
    };
    assert_eq!(payload, expected);

    // Arming the same generation again (a retried alarm) arms nothing more.
    scheduler.schedule(&session, first).await.unwrap();
    let listed = client.list_schedules().group_name(&group).send().await.unwrap();
    assert_eq!(listed.schedules().len(), 1);

    // The next generation is a schedule of its own: the firing one is left alone
    // (Scheduler deletes it after it fires), never updated to the next time.
    let later = Timestamp::from_millis(1_795_900_600_000);
    scheduler.schedule(&session, later).await.unwrap();
    let stored = client.get_schedule().name(&first_name).group_name(&group).send().await.unwrap();
    assert_eq!(stored.schedule_expression(), Some("at(2026-11-28T21:06:41)"), "the firing alarm is unchanged");
    let later_name = EventBridgeScheduler::name(&session, later);
    let stored = client.get_schedule().name(&later_name).group_name(&group).send().await.unwrap();
    assert_eq!(stored.schedule_expression(), Some("at(2026-11-28T21:16:40)"));

    scheduler.cancel(&session, later).await.unwrap();
    assert!(client.get_schedule().name(&later_name).group_name(&group).send().await.is_err());
    assert!(client.get_schedule().name(&first_name).group_name(&group).send().await.is_ok(), "only that generation");
    scheduler.cancel(&session, later).await.expect("cancelling a missing schedule is not an error");
}
