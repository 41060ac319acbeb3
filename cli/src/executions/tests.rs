use std::sync::Mutex;

use executor_core::{
    ApprovalAction, CallOutcome, Called, DecidedBy, Happened, HistoryAppend, HistoryEntry, PendingSummary, TokenHash,
    ToolkitName, Via,
};
use executor_store::{AuditLine, Page};

use super::*;

fn at(text: &str) -> Timestamp {
    Timestamp::parse_rfc3339(text).unwrap()
}

fn record(id: &str, owner: &str, status: ExecutionStatus, created: &str) -> ExecutionRecord {
    ExecutionRecord {
        id: ExecutionId::parse(id).unwrap(),
        owner: Principal::parse(owner).unwrap(),
        status,
        created_at: at(created),
        updated_at: at(created),
        toolkit: None,
        pending: None,
    }
}

fn paused(id: &str, owner: &str, created: &str, until: &str) -> ExecutionRecord {
    let pending = PendingSummary { tool: "gh.issues.create".into(), message: "Create?".into(), expires_at: at(until) };
    ExecutionRecord { pending: Some(pending), ..record(id, owner, ExecutionStatus::Paused, created) }
}

/// A store that gives at most two records a page, whatever the limit, so
/// that a listing must follow its cursor; it counts the pages read.
#[derive(Default)]
struct TwoAPage {
    /// Newest first, as a store lists them.
    records: Vec<ExecutionRecord>,
    history: Vec<HistoryEntry>,
    pages: Mutex<usize>,
}

#[async_trait::async_trait]
impl HistoryStore for TwoAPage {
    async fn append_history(&self, _: &HistoryAppend) -> Result<(), StoreError> {
        unimplemented!("not read here")
    }

    async fn list_executions(
        &self,
        access: Access<'_>,
        since: Option<Timestamp>,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page<ExecutionRecord>, StoreError> {
        *self.pages.lock().unwrap() += 1;
        let start = match cursor {
            None => 0,
            Some(text) => text.parse::<usize>().map_err(|_| StoreError::NotFound { what: "cursor" })?,
        };
        let visible: Vec<&ExecutionRecord> = self
            .records
            .iter()
            .filter(|r| access.permits(&r.owner) && since.is_none_or(|s| r.created_at >= s))
            .collect();
        let end = (start + limit.min(2)).min(visible.len());
        let items = visible[start..end].iter().map(|r| (*r).clone()).collect();
        Ok(Page { items, next: (end < visible.len()).then(|| end.to_string()) })
    }

    async fn execution_history(
        &self,
        _: Access<'_>,
        id: &ExecutionId,
    ) -> Result<(ExecutionRecord, Vec<HistoryEntry>), StoreError> {
        let record = self.records.iter().find(|r| &r.id == id).ok_or(StoreError::NotFound { what: "execution" })?;
        Ok((record.clone(), self.history.clone()))
    }

    async fn export_history(
        &self,
        _: Option<Timestamp>,
        _: usize,
        _: Option<&str>,
    ) -> Result<Page<AuditLine>, StoreError> {
        unimplemented!("not read here")
    }
}

fn store() -> TwoAPage {
    TwoAPage {
        records: vec![
            paused("e5", "bob", "2026-12-01T10:05:00Z", "2026-12-01T10:15:00Z"),
            record("e4", "ana", ExecutionStatus::Completed, "2026-12-01T10:04:00Z"),
            paused("e3", "ana", "2026-12-01T10:03:00Z", "2026-12-01T10:05:00Z"),
            record("e2", "bob", ExecutionStatus::Failed, "2026-12-01T10:02:00Z"),
            record("e1", "ana", ExecutionStatus::Completed, "2026-12-01T10:01:00Z"),
        ],
        ..TwoAPage::default()
    }
}

fn list(owner: Option<&str>, status: Option<&str>, since: Option<&str>, limit: usize) -> Command {
    Command::ExecutionsList {
        owner: owner.map(Into::into),
        status: status.map(Into::into),
        since: since.map(at),
        limit,
    }
}

/// The ids a listing shows.
async fn ids(store: &TwoAPage, command: Command, now: Timestamp) -> Vec<String> {
    match run(store, command, now).await.unwrap() {
        Reply::ExecutionsListed { executions } => executions.into_iter().map(|r| r.id).collect(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_listing_follows_the_pages_until_its_limit_is_filled() {
    let now = at("2026-12-01T10:10:00Z");
    let store = store();
    // (owner, status, since, limit, ids, pages read)
    let cases = [
        (None, None, None, 50, vec!["e5", "e4", "e3", "e2", "e1"], 3),
        (None, None, None, 3, vec!["e5", "e4", "e3"], 2),
        (None, None, None, 2, vec!["e5", "e4"], 1),
        (Some("ana"), None, None, 50, vec!["e4", "e3", "e1"], 2),
        (None, Some("completed"), None, 2, vec!["e4", "e1"], 3),
        (None, Some("failed"), None, 50, vec!["e2"], 3),
        (None, None, Some("2026-12-01T10:03:00Z"), 50, vec!["e5", "e4", "e3"], 2),
        (Some("carol"), None, None, 50, vec![], 1),
    ];
    for (owner, status, since, limit, expected, pages) in cases {
        *store.pages.lock().unwrap() = 0;
        let listed = ids(&store, list(owner, status, since, limit), now).await;
        assert_eq!(listed, expected, "{owner:?} {status:?} {since:?} {limit}");
        assert_eq!(*store.pages.lock().unwrap(), pages, "{owner:?} {status:?} {since:?} {limit}: pages read");
    }
}

#[tokio::test]
async fn a_pause_past_its_window_is_listed_and_filtered_as_expired() {
    let store = store();
    let before = at("2026-12-01T10:04:00Z");
    let after = at("2026-12-01T10:20:00Z");
    assert_eq!(ids(&store, list(None, Some("paused"), None, 50), before).await, ["e5", "e3"]);
    assert_eq!(ids(&store, list(None, Some("expired"), None, 50), before).await, Vec::<String>::new());
    assert_eq!(ids(&store, list(None, Some("EXPIRED"), None, 50), after).await, ["e5", "e3"]);
    let Reply::ExecutionsListed { executions } = run(&store, list(None, None, None, 1), before).await.unwrap() else {
        panic!()
    };
    let waiting = ("tools.gh.issues.create".to_owned(), "2026-12-01T10:15:00.000Z".to_owned());
    assert_eq!((executions[0].status.as_str(), executions[0].waiting_on.clone()), ("paused", Some(waiting)));
    let Reply::ExecutionsListed { executions } = run(&store, list(None, None, None, 1), after).await.unwrap() else {
        panic!()
    };
    assert_eq!((executions[0].status.as_str(), executions[0].waiting_on.clone()), ("expired", None));
}

#[tokio::test]
async fn bad_flags_say_what_is_accepted() {
    let store = store();
    let now = at("2026-12-01T10:10:00Z");
    let error = |command| async { run(&store, command, now).await.unwrap_err().to_string() };
    assert_eq!(
        error(list(None, Some("done"), None, 50)).await,
        "invalid --status \"done\": give one of running, paused, resuming, completed, failed, declined, expired"
    );
    assert_eq!(error(list(None, None, None, 0)).await, "invalid --limit 0: give a number from 1 to 1000");
    assert_eq!(error(list(None, None, None, 1001)).await, "invalid --limit 1001: give a number from 1 to 1000");
    assert!(error(list(Some(" "), None, None, 50)).await.starts_with("invalid --owner: "));
    let unknown = error(Command::ExecutionsShow { id: "nope".into() }).await;
    assert!(unknown.starts_with("no execution has the id \"nope\" in the history"), "{unknown}");
    let invalid = error(Command::ExecutionsShow { id: "a/b".into() }).await;
    assert!(invalid.starts_with("invalid execution id: ") && invalid.contains("executions list"), "{invalid}");
    for status in ExecutionStatus::ALL {
        assert_eq!(parse_status(status.as_str()).unwrap(), status);
    }
}

#[test]
fn listings_have_a_header_and_aligned_columns() {
    let now = at("2026-12-01T10:10:00Z");
    let rows = [
        paused("e5", "bob@example.com", "2026-12-01T10:05:00Z", "2026-12-01T10:15:00Z"),
        record("exec-long-id", "ana", ExecutionStatus::Completed, "2026-12-01T10:04:00Z"),
    ];
    let listed = Reply::ExecutionsListed { executions: rows.iter().map(|r| row(r, now)).collect() };
    assert_eq!(
        listed.to_string(),
        "ID            OWNER            STATUS     CREATED                   UPDATED                   WAITING ON\n\
         e5            bob@example.com  paused     2026-12-01T10:05:00.000Z  2026-12-01T10:05:00.000Z  tools.gh.issues.create\n\
         exec-long-id  ana              completed  2026-12-01T10:04:00.000Z  2026-12-01T10:04:00.000Z  -"
    );
    let empty = Reply::ExecutionsListed { executions: vec![] }.to_string();
    assert!(empty.starts_with("No executions recorded match."), "{empty}");
}

fn history() -> Vec<HistoryEntry> {
    let ana = Principal::parse("ana").unwrap();
    let entry = |time: &str, what| HistoryEntry { at: at(time), what };
    vec![
        entry(
            "2026-12-01T10:05:00Z",
            Happened::Created {
                code_sha256: "ab12".into(),
                code_bytes: 42,
                toolkit: Some(ToolkitName::parse("support").unwrap()),
                via: Via::Mcp,
            },
        ),
        entry(
            "2026-12-01T10:05:00.250Z",
            Happened::Called(Called {
                step: 0,
                tool: "gh.issues.list".into(),
                kind: None,
                outcome: CallOutcome::Ok,
                http_status: Some(200),
                error_code: None,
                duration_ms: 12,
                allowed_by: None,
                policy_id: None,
                grant_id: None,
            }),
        ),
        entry(
            "2026-12-01T10:05:01Z",
            Happened::Paused {
                step: 1,
                tool: "gh.issues.create".into(),
                reason: "default".into(),
                args: r#"{"title":"a bug","token":"[redacted]"}"#.into(),
            },
        ),
        entry(
            "2026-12-01T10:06:00Z",
            Happened::Decided {
                decision: ApprovalAction::Accept,
                channel: "browser".into(),
                decided_by: DecidedBy::key(&ana, &TokenHash::of_token("t")),
            },
        ),
    ]
}

#[tokio::test]
async fn an_execution_is_shown_with_one_line_per_entry() {
    let mut record = paused("e5", "ana", "2026-12-01T10:05:00Z", "2026-12-01T10:15:00Z");
    record.toolkit = Some(ToolkitName::parse("support").unwrap());
    let store = TwoAPage { records: vec![record], history: history(), ..TwoAPage::default() };
    let shown = run(&store, Command::ExecutionsShow { id: "e5".into() }, at("2026-12-01T10:10:00Z")).await.unwrap();
    let key = DecidedBy::key(&Principal::parse("ana").unwrap(), &TokenHash::of_token("t"));
    assert_eq!(
        shown.to_string(),
        format!(
            "id          e5\n\
             owner       ana\n\
             status      paused\n\
             created     2026-12-01T10:05:00.000Z\n\
             updated     2026-12-01T10:05:00.000Z\n\
             toolkit     support\n\
             waiting on  tools.gh.issues.create, for a decision until 2026-12-01T10:15:00.000Z\n\
             \n\
             2026-12-01T10:05:00.000Z  created  codeSha256=ab12 codeBytes=42 toolkit=support via=mcp\n\
             2026-12-01T10:05:00.250Z  called  step=0 tool=gh.issues.list outcome=ok httpStatus=200 durationMs=12\n\
             2026-12-01T10:05:01.000Z  paused  step=1 tool=gh.issues.create reason=default \
             args=\"{{\\\"title\\\":\\\"a bug\\\",\\\"token\\\":\\\"[redacted]\\\"}}\"\n\
             2026-12-01T10:06:00.000Z  decided  decision=accept channel=browser decidedBy={}",
            key.as_str()
        )
    );
}

#[test]
fn values_stay_on_their_line_and_apart() {
    let cases = [
        (serde_json::json!("browser"), "browser"),
        (serde_json::json!("key:ana/1a2b3c4d5e6f"), "key:ana/1a2b3c4d5e6f"),
        (serde_json::json!(r#"{"a":"b"}"#), r#"{"a":"b"}"#),
        (serde_json::json!(r#""quoted""#), r#""\"quoted\"""#),
        (serde_json::json!("two words"), r#""two words""#),
        (serde_json::json!("line\nbreak"), r#""line\nbreak""#),
        (serde_json::json!("\u{1b}[31m"), r#""\u001b[31m""#),
        (serde_json::json!(""), r#""""#),
        (serde_json::json!(12), "12"),
        (serde_json::json!(null), "null"),
    ];
    for (value, expected) in cases {
        assert_eq!(shown(&value), expected, "{value}");
    }
}

#[test]
fn executions_commands_do_not_collide_on_the_admin_socket() {
    let listed = serde_json::to_string(&list(None, None, None, 50)).unwrap();
    assert_eq!(listed, r#"{"command":"executions_list","limit":50}"#);
    assert!(serde_json::from_str::<crate::keys::Command>(&listed).is_err(), "{listed}");
    assert!(serde_json::from_str::<crate::audit::Command>(&listed).is_err(), "{listed}");
    let reply = Reply::ExecutionsListed { executions: vec![] };
    let text = serde_json::to_string(&reply).unwrap();
    assert!(serde_json::from_str::<crate::keys::Reply>(&text).is_err(), "{text}");
    assert_eq!(
        serde_json::from_str::<crate::commands::Reply>(&text).unwrap(),
        crate::commands::Reply::Executions(reply)
    );
}
