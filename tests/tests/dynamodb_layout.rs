//! What the DynamoDB adapter writes matches docs/storage.md, item by item.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use aws_sdk_dynamodb::types::{AttributeValue, TimeToLiveStatus};
use executor_core::{
    ApiKey, ArgsHash, ClientInfo, ElicitationMode, Execution, ExecutionEvent, ExecutionId, ExecutionRecord,
    ExecutionStatus, Grant, GrantId, GrantedBy, Happened, HistoryAppend, HistoryEntry, Journal, JournalStep,
    OAuthClient, OAuthState, PendingCall, Principal, Session, SessionId, SourceConnection, StepOutcome, Timestamp,
    TokenHash, execution_events,
};
use executor_store::{
    ConnectionStore, ConsoleStore, Emitted, ExecutionStore, GrantStore, HourlyTake, KeyStore, MAX_ITEM_BODY_BYTES,
    OAuthClientStore, QuotaOutcome, QuotaStore, QuotaTake, SessionStore, SlotTake,
};
use serde_json::json;

type Item = std::collections::HashMap<String, AttributeValue>;

struct DocumentedItem {
    name: String,
    pk_prefix: String,
    sk_prefix: String,
    attributes: BTreeSet<String>,
}

/// Rows of the "## Items" table in docs/storage.md.
fn documented_items() -> Vec<DocumentedItem> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/storage.md")).unwrap();
    let section = doc.split("## Items").nth(1).expect("docs/storage.md has an Items section");
    let ticked = |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
    let prefix = |pattern: &str| pattern.split('<').next().unwrap().to_owned();
    section
        .lines()
        .take_while(|l| !l.starts_with("##"))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Item"))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            DocumentedItem {
                name: cells[1].to_owned(),
                pk_prefix: prefix(&ticked(cells[2])[0]),
                sk_prefix: prefix(&ticked(cells[3])[0]),
                attributes: ticked(cells[4]).into_iter().collect(),
            }
        })
        .collect()
}

fn now() -> Timestamp {
    SystemTime::now().into()
}

fn n(item: &Item, name: &str) -> u64 {
    item[name].as_n().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_match_docs_storage_md() {
    let (store, client) = executor_tests::dynamo_store().await;
    let alice = Principal::parse("alice").unwrap();
    let session = Session::new(
        SessionId::parse("s1").unwrap(),
        alice.clone(),
        now(),
        "2025-11-25",
        ClientInfo::default(),
        ElicitationMode::Model,
        now().plus(Duration::from_secs(86_400)),
    );
    store.create_session(&session).await.unwrap();

    let mut journal = Journal::new(now(), 1);
    for step in 0..80 {
        journal.record(JournalStep {
            step,
            path: "files.read".into(),
            args_hash: ArgsHash::of(&json!(step)),
            outcome: StepOutcome::Ok { data: json!("x".repeat(10_000)) },
            completed_at: now(),
        });
    }
    journal.add_pending(PendingCall::new(80, "files.write", json!({"path": "/a"}), "Write /a?"));
    let deadline = now().plus(Duration::from_secs(600));
    let mut execution = Execution::start(
        ExecutionId::parse("e1").unwrap(),
        alice.clone(),
        Some(session.id.clone()),
        ElicitationMode::Model,
        "return 1",
        Journal::new(now(), 1),
        now().plus(Duration::from_secs(86_400)),
    );
    execution.apply(ExecutionEvent::Pause { journal, deadline }, now()).unwrap();
    // The pause, its event and its history, in one transaction (the event
    // stays until delivered, the history until its own expiry).
    let events = execution_events(None, &execution, 0, None, None, now());
    let entry =
        HistoryEntry { at: now(), what: Happened::Settled { status: ExecutionStatus::Paused, error_code: None } };
    let keep_until = now().plus(Duration::from_secs(30 * 86_400));
    let history = HistoryAppend { record: ExecutionRecord::of(&execution), part: 0, entries: vec![entry], keep_until };
    // It took an idempotency key (`execute` with `idempotencyKey`): its receipt, in the same write.
    let key = executor_core::IdempotencyKey::parse("retry-1").unwrap();
    let receipt = executor_core::Receipt::new(&alice, &key, &execution.id, &execution.code, now());
    let emitted = Emitted { events: &events, history: Some(&history), receipt: Some(&receipt), ungranted: None };
    store.create_execution_emitting(&execution, emitted).await.unwrap();
    store
        .create_key(&ApiKey { hash: TokenHash::of_token("t"), owner: alice.clone(), created_at: now(), toolkit: None })
        .await
        .unwrap();
    // Its use, as authenticating a request records it.
    store.record_key_use(&TokenHash::of_token("t"), now()).await.unwrap();
    let grant_id = GrantId::parse("g1").unwrap();
    let grant =
        Grant::new(grant_id, alice.clone(), "files.write", GrantedBy::ApprovalPage, now(), Duration::from_secs(60));
    store.create_grant(&grant).await.unwrap();
    let hour = Timestamp::from_millis(now().as_millis() / 3_600_000 * 3_600_000);
    let take = QuotaTake {
        owner: alice.clone(),
        now: now(),
        hourly: Some(HourlyTake { window: hour, limit: 10 }),
        slot: Some(SlotTake {
            execution: execution.id.clone(),
            limit: 2,
            lease_until: now().plus(Duration::from_secs(60)),
        }),
    };
    assert_eq!(store.take_quota(&take).await.unwrap(), QuotaOutcome::Taken);
    let mut client_registration = OAuthClient {
        source: "docs".into(),
        issuer: "https://as.example".into(),
        client_id: "c1".into(),
        client_secret: None,
        scopes: vec!["read".into()],
        registered_at: now(),
        expires_at: now().plus(Duration::from_secs(86_400)),
        version: 0,
    };
    store.put_oauth_client(&mut client_registration).await.unwrap();
    let mut connection = SourceConnection {
        owner: alice.clone(),
        source: "crm".into(),
        connected_at: now(),
        scopes: vec!["read".into()],
        access_expires_at: Some(now().plus(Duration::from_secs(3_600))),
        refreshing_until: None,
        sealed: "sealed tokens".into(),
        expires_at: now().plus(Duration::from_secs(86_400)),
        version: 0,
    };
    store.save_connection(&mut connection, None).await.unwrap();
    let state = OAuthState {
        hash: TokenHash::of_token("state"),
        owner: alice.clone(),
        source: "crm".into(),
        execution_id: execution.id.clone(),
        step: 80,
        link: TokenHash::of_token("link"),
        sealed_verifier: "sealed verifier".into(),
        expires_at: now().plus(Duration::from_secs(600)),
    };
    store.put_oauth_state(&state).await.unwrap();
    let session_grant = executor_core::ConsoleGrant::Session { principal: alice.clone(), subject: "alice".into() };
    let console = executor_core::ConsoleSecret::new("cookie", session_grant, now(), Duration::from_secs(3_600));
    store.put_console_secret(&console).await.unwrap();

    let items = client.scan().table_name(store.table()).send().await.unwrap().items.unwrap();
    let documented = documented_items();
    assert_eq!(documented.len(), 16, "docs/storage.md lists sixteen item types");

    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for item in &items {
        let (pk, sk) = (item["pk"].as_s().unwrap(), item["sk"].as_s().unwrap());
        let doc = documented
            .iter()
            .find(|d| pk.starts_with(&d.pk_prefix) && sk.starts_with(&d.sk_prefix))
            .unwrap_or_else(|| panic!("item {pk} / {sk} is not documented in docs/storage.md"));
        let attributes: BTreeSet<String> = item.keys().filter(|k| *k != "pk" && *k != "sk").cloned().collect();
        let undocumented: Vec<_> = attributes.difference(&doc.attributes).collect();
        assert!(undocumented.is_empty(), "{}: attributes {undocumented:?} are not in docs/storage.md", doc.name);
        seen.entry(doc.name.clone()).or_default().extend(attributes);

        if let Some(body) = item.get("body") {
            assert!(body.as_b().unwrap().as_ref().len() <= MAX_ITEM_BODY_BYTES, "{pk} / {sk} body fits one item");
        }
    }
    for doc in &documented {
        assert_eq!(seen.get(&doc.name), Some(&doc.attributes), "{}: documented attributes are all written", doc.name);
    }

    // TTL is on, in epoch seconds.
    let ttl = client.describe_time_to_live().table_name(store.table()).send().await.unwrap();
    let ttl = ttl.time_to_live_description().unwrap();
    assert_eq!(ttl.attribute_name(), Some("expires_at"));
    assert_eq!(ttl.time_to_live_status(), Some(&TimeToLiveStatus::Enabled));
    let find =
        |pk: &str, sk: &str| items.iter().find(|i| i["pk"].as_s().unwrap() == pk && i["sk"].as_s().unwrap() == sk);
    assert_eq!(n(find("SESSION#s1", "SESSION").unwrap(), "expires_at"), session.expires_at.as_secs_ceil());
    assert_eq!(n(find("EXEC#e1", "EXEC").unwrap(), "expires_at"), execution.expires_at().as_secs_ceil());
    assert_eq!(n(find("SESSION#s1", "PAUSED#e1").unwrap(), "expires_at"), deadline.as_secs_ceil());
    let event_sk = format!("EVENT#{:013}#{}", events[0].time.as_millis(), events[0].id);
    assert_eq!(
        n(find("OUTBOX", &event_sk).unwrap(), "expires_at"),
        deadline.as_secs_ceil(),
        "a pause's event lasts its window"
    );
    assert_eq!(
        n(find("SOURCE#docs", "OAUTHCLIENT").unwrap(), "expires_at"),
        client_registration.expires_at.as_secs_ceil()
    );
    assert_eq!(n(find("CONNS#alice", "CONN#crm").unwrap(), "expires_at"), connection.expires_at.as_secs_ceil());
    assert_history_items(&items, &history);

    let chunks = n(find("EXEC#e1", "EXEC").unwrap(), "chunks");
    assert!(chunks >= 3, "an 800 KB snapshot is split, got {chunks} chunk(s)");
    for i in 1..chunks {
        assert!(find("EXEC#e1", &format!("CHUNK#{i:04}")).is_some(), "chunk {i} written");
    }
}

/// The history written with the execution: its listing item and the write's
/// part, each with the history's own TTL (not the execution's).
fn assert_history_items(items: &[Item], history: &HistoryAppend) {
    let find =
        |pk: &str, sk: &str| items.iter().find(|i| i["pk"].as_s().unwrap() == pk && i["sk"].as_s().unwrap() == sk);
    let s = |item: &Item, name: &str| item[name].as_s().unwrap().clone();
    let body =
        |item: &Item| serde_json::from_slice::<serde_json::Value>(item["body"].as_b().unwrap().as_ref()).unwrap();
    let keep_until = history.keep_until.as_secs_ceil();
    let listing_sk = format!("EXEC#{:013}#e1", history.record.created_at.as_millis());
    let listing = find("AUDITS#alice", &listing_sk).expect("the listing item, under the owner, by creation time");
    assert_eq!(
        (s(listing, "kind"), s(listing, "owner"), s(listing, "status")),
        ("audit_execution".into(), "alice".into(), "paused".into())
    );
    assert_eq!(n(listing, "expires_at"), keep_until);
    assert_eq!(body(listing), serde_json::to_value(&history.record).unwrap());
    let part = find("AUDIT#e1", "PART#0000000000.000").expect("the history part of version 0, item 0");
    assert_eq!((s(part, "kind"), s(part, "owner")), ("history".into(), "alice".into()));
    assert_eq!(n(part, "expires_at"), keep_until);
    assert_eq!(body(part), json!({"record": history.record, "entries": history.entries}));
    let history_items = items.iter().filter(|i| i["pk"].as_s().unwrap().starts_with("AUDIT")).count();
    assert_eq!(history_items, 2, "one listing item and one part");
}
