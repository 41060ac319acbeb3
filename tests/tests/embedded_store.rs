//! What only the embedded store has: a file that outlives the process.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use executor_core::{ClientInfo, ElicitationMode, ManualClock, Principal, Session, SessionId, Timestamp};
use executor_store::{Access, EmbeddedStore, SessionStore, StoreError};

fn now() -> Timestamp {
    SystemTime::now().into()
}

fn session(id: &str, expires_in: Duration) -> Session {
    Session::new(
        SessionId::parse(id).unwrap(),
        Principal::parse("alice").unwrap(),
        now(),
        "2025-06-18",
        ClientInfo::default(),
        ElicitationMode::Model,
        Timestamp::from_millis(now().as_millis() + expires_in.as_millis() as u64),
    )
}

#[tokio::test]
async fn records_survive_reopening_and_one_process_holds_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(now()));
    let kept = session("kept", Duration::from_secs(86_400));
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        store.create_session(&kept).await.unwrap();
        store.create_session(&session("short", Duration::from_millis(300))).await.unwrap();

        let second = EmbeddedStore::open(dir.path());
        let message = second.err().expect("a second open of the same data dir is refused").to_string();
        assert!(message.contains("in use by another executor process"), "{message}");
    }
    clock.advance(Duration::from_secs(3600));

    let store = EmbeddedStore::open(dir.path()).unwrap().with_clock(clock);
    assert_eq!(store.get_session(Access::Internal, &kept.id).await.unwrap(), kept);
    let gone = store.get_session(Access::Internal, &SessionId::parse("short").unwrap()).await;
    assert!(matches!(gone, Err(StoreError::NotFound { .. })), "{gone:?}");
}

#[tokio::test]
async fn expired_items_are_purged_like_dynamodb_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(now()));
    let store = EmbeddedStore::open(dir.path()).unwrap().with_clock(clock.clone());
    store.create_session(&session("kept", Duration::from_secs(86_400))).await.unwrap();
    store.create_session(&session("short", Duration::from_millis(200))).await.unwrap();
    assert_eq!(store.purge_expired().unwrap(), 0, "nothing has expired yet");
    clock.advance(Duration::from_secs(3600));
    assert_eq!(store.purge_expired().unwrap(), 1);
    assert_eq!(store.purge_expired().unwrap(), 0);
    assert!(store.get_session(Access::Internal, &SessionId::parse("kept").unwrap()).await.is_ok());
}
