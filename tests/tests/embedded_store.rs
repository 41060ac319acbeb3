//! What only the embedded store has: a file that outlives the process.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use executor_core::{
    ClientInfo, ElicitationMode, ExecutionId, ExecutionRecord, ExecutionStatus, Happened, HistoryAppend, HistoryEntry,
    ManualClock, Principal, Session, SessionId, Timestamp,
};
use executor_store::{Access, EmbeddedStore, HistoryStore, SessionStore, StoreError};

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

/// Histories queued to be written after their answer are in the file once
/// the store is closed, however many were waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_histories_are_written_before_the_store_closes() {
    let dir = tempfile::tempdir().unwrap();
    let owner = Principal::parse("alice").unwrap();
    let appends: Vec<HistoryAppend> = (0..300).map(|i| unstored(&format!("h{i}"), &owner)).collect();
    {
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let queued: Vec<_> = appends
            .iter()
            .map(|append| {
                let (store, append) = (store.clone(), append.clone());
                tokio::spawn(async move { store.queue_history(append).await })
            })
            .collect();
        for queued in queued {
            queued.await.unwrap().unwrap();
        }
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    for append in &appends {
        let (record, entries) = store.execution_history(Access::Internal, &append.record.id).await.unwrap();
        assert_eq!((record, entries), (append.record.clone(), append.entries.clone()));
    }
}

fn unstored(id: &str, owner: &Principal) -> HistoryAppend {
    let at = now();
    let record = ExecutionRecord {
        id: ExecutionId::parse(id).unwrap(),
        owner: owner.clone(),
        toolkit: None,
        status: ExecutionStatus::Completed,
        created_at: at,
        updated_at: at,
        pending: None,
    };
    let settled = Happened::Settled { status: ExecutionStatus::Completed, error_code: None };
    let entries = vec![HistoryEntry { at, what: settled }];
    HistoryAppend { record, part: 0, entries, keep_until: at.plus(Duration::from_secs(3600)) }
}
