//! The audit trail from the command line, the real binary on a real store:
//! `executor executions list`, `executor executions show ID`, `executor
//! audit export` and `executor grants list` without `--owner`, on a store the
//! command opens itself, then through the admin socket of an `executor
//! serve` holding it, which must print exactly the same.
//!
//! The history is written by hand (`append_history`), times counted from the
//! real clock the binary reads: nothing here waits for time to pass.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use executor_core::{
    ApprovalAction, CallOutcome, Called, Clock, DecidedBy, ExecutionId, ExecutionRecord, ExecutionStatus, Grant,
    GrantId, GrantedBy, Happened, HistoryAppend, HistoryEntry, PendingSummary, Principal, SystemClock, Timestamp,
    TokenHash, Via,
};
use executor_store::{EmbeddedStore, GrantStore, HistoryStore};
use serde_json::{Value, json};

fn executor(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_executor")).args(args).env_remove("EXECUTOR_PUBLIC_URL").output().unwrap()
}

/// `executor ARGS --data-dir DATA`, which must succeed: its stdout.
fn stdout(data: &str, args: &[&str]) -> String {
    let out = executor(&[args, &["--data-dir", data]].concat());
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `executor ARGS --data-dir DATA`, which must fail: its stderr.
fn stderr(data: &str, args: &[&str]) -> String {
    let out = executor(&[args, &["--data-dir", data]].concat());
    assert!(!out.status.success(), "{args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr).unwrap()
}

fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

/// What the tests write and then expect to read.
struct History {
    now: Timestamp,
    /// The entries of `decided`, the execution with the longest history.
    decided: Vec<HistoryEntry>,
    key: DecidedBy,
    /// How many entries there are in all, and within the last three hours.
    total: usize,
    recent: usize,
}

fn record(id: &str, owner: &str, status: ExecutionStatus, created: Timestamp) -> ExecutionRecord {
    ExecutionRecord {
        id: ExecutionId::parse(id).unwrap(),
        owner: Principal::parse(owner).unwrap(),
        status,
        created_at: created,
        updated_at: created.plus(Duration::from_secs(1)),
        toolkit: None,
        pending: None,
    }
}

fn paused_until(record: ExecutionRecord, until: Timestamp) -> ExecutionRecord {
    let pending = PendingSummary { tool: "gh.issues.create".into(), message: "Create?".into(), expires_at: until };
    ExecutionRecord { status: ExecutionStatus::Paused, pending: Some(pending), ..record }
}

fn created(at: Timestamp) -> HistoryEntry {
    let what = Happened::Created { code_sha256: "ab".repeat(32), code_bytes: 42, toolkit: None, via: Via::Mcp };
    HistoryEntry { at, what }
}

fn called(at: Timestamp, step: u32) -> HistoryEntry {
    let call = Called {
        step,
        tool: "gh.issues.list".into(),
        kind: None,
        outcome: CallOutcome::Ok,
        http_status: Some(200),
        error_code: None,
        duration_ms: 7,
        allowed_by: None,
        policy_id: None,
        grant_id: None,
    };
    HistoryEntry { at, what: Happened::Called(call) }
}

fn paused(at: Timestamp) -> HistoryEntry {
    let what = Happened::Paused {
        step: 1,
        tool: "gh.issues.create".into(),
        reason: "default".into(),
        args: r#"{"title":"crash"}"#.into(),
    };
    HistoryEntry { at, what }
}

fn settled(at: Timestamp) -> HistoryEntry {
    HistoryEntry { at, what: Happened::Settled { status: ExecutionStatus::Completed, error_code: None } }
}

/// Four executions of the last two hours (ana's and bob's: completed, paused,
/// paused past its window, decided then completed), 200 of carol's older than
/// three hours (more entries than an export page holds), and two grants.
async fn write_history(store: &EmbeddedStore) -> History {
    let now = SystemClock.now();
    let t0 = Timestamp::from_millis(now.as_millis() - 2 * 3600 * 1000);
    let keep_until = now.plus(Duration::from_secs(86_400));
    let append = |record: ExecutionRecord, part: u64, entries: Vec<HistoryEntry>| async move {
        store.append_history(&HistoryAppend { record, part, entries, keep_until }).await.unwrap();
    };
    let done = record("ana-done", "ana", ExecutionStatus::Completed, t0);
    append(done, 1, vec![created(t0), called(t0, 0), settled(t0)]).await;
    let waiting = paused_until(
        record("bob-waiting", "bob", ExecutionStatus::Paused, t0.plus(minutes(10))),
        now.plus(minutes(120)),
    );
    append(waiting, 1, vec![created(t0.plus(minutes(10))), paused(t0.plus(minutes(10)))]).await;
    let lapsed =
        paused_until(record("ana-lapsed", "ana", ExecutionStatus::Paused, t0.plus(minutes(20))), t0.plus(minutes(30)));
    append(lapsed, 1, vec![created(t0.plus(minutes(20))), paused(t0.plus(minutes(20)))]).await;

    let start = t0.plus(minutes(40));
    let key = DecidedBy::key(&Principal::parse("ana").unwrap(), &TokenHash::of_token("exk_ana"));
    let decision =
        Happened::Decided { decision: ApprovalAction::Accept, channel: "browser".into(), decided_by: key.clone() };
    let decided = vec![
        created(start),
        paused(start.plus(Duration::from_millis(250))),
        HistoryEntry { at: start.plus(minutes(2)), what: decision },
        called(start.plus(minutes(2)), 1),
        settled(start.plus(minutes(2))),
    ];
    let first = paused_until(record("ana-decided", "ana", ExecutionStatus::Paused, start), start.plus(minutes(10)));
    append(first, 1, decided[..2].to_vec()).await;
    let resuming = ExecutionRecord { status: ExecutionStatus::Resuming, pending: None, ..first_record(start) };
    append(resuming, 2, decided[2..3].to_vec()).await;
    append(first_record(start), 3, decided[3..].to_vec()).await;

    for i in 0..200 {
        // Over three hours ago, however long the commands take to start.
        let at = Timestamp::from_millis(t0.as_millis() - 3660 * 1000 - i * 1000);
        let old = record(&format!("carol-{i:03}"), "carol", ExecutionStatus::Completed, at);
        append(old, 1, vec![created(at), called(at, 0), settled(at)]).await;
    }
    for (id, owner, by) in [("g-ana", "ana", GrantedBy::ApprovalPage), ("g-bob", "bob", GrantedBy::Client)] {
        let (id, owner) = (GrantId::parse(id).unwrap(), Principal::parse(owner).unwrap());
        store.create_grant(&Grant::new(id, owner, "gh.issues.create", by, t0, minutes(60 * 24))).await.unwrap();
    }
    History { now, decided, key, total: 3 + 2 + 2 + 5 + 600, recent: 12 }
}

/// `ana-decided` as its last write left it: completed.
fn first_record(start: Timestamp) -> ExecutionRecord {
    ExecutionRecord {
        updated_at: start.plus(minutes(2)),
        ..record("ana-decided", "ana", ExecutionStatus::Completed, start)
    }
}

/// Each row of a table: its cells (split on two spaces or more).
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|line| line.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(Into::into).collect())
        .collect()
}

/// `executions list` with `args`: the (id, owner, status, waiting on) of each row after the header.
fn listed(data: &str, args: &[&str]) -> Vec<(String, String, String, String)> {
    let table = stdout(data, &[&["executions", "list"], args].concat());
    let rows = rows(&table);
    assert_eq!(rows[0], ["ID", "OWNER", "STATUS", "CREATED", "UPDATED", "WAITING ON"], "{table}");
    rows[1..].iter().map(|r| (r[0].clone(), r[1].clone(), r[2].clone(), r[5].clone())).collect()
}

fn ids(rows: &[(String, String, String, String)]) -> Vec<&str> {
    rows.iter().map(|r| r.0.as_str()).collect()
}

/// Every command's output on a store with history (`history`), as checked by
/// the assertions: returned so a second run (through the server) can be
/// compared with it.
fn check_commands(data: &str, history: &History) -> Vec<String> {
    let recent = listed(data, &["--since", "3h"]);
    let row = |id: &str, owner: &str, status: &str, waiting: &str| {
        (id.to_owned(), owner.to_owned(), status.to_owned(), waiting.to_owned())
    };
    assert_eq!(
        recent,
        [
            row("ana-decided", "ana", "completed", "-"),
            row("ana-lapsed", "ana", "expired", "-"),
            row("bob-waiting", "bob", "paused", "tools.gh.issues.create"),
            row("ana-done", "ana", "completed", "-"),
        ],
        "newest first, a pause past its window expired"
    );
    assert_eq!(ids(&listed(data, &["--since", "3h", "--owner", "ana"])), ["ana-decided", "ana-lapsed", "ana-done"]);
    assert_eq!(ids(&listed(data, &["--status", "expired"])), ["ana-lapsed"]);
    assert_eq!(ids(&listed(data, &["--status", "paused"])), ["bob-waiting"]);
    // An RFC 3339 time as well as a duration: 2h30m ago, in whole seconds.
    let since = Timestamp::from_millis((history.now.as_millis() - 150 * 60 * 1000) / 1000 * 1000);
    let since = format!("{}Z", &since.to_rfc3339()[..19]);
    assert_eq!(ids(&listed(data, &["--since", &since, "--owner", "ana"])), ["ana-decided", "ana-lapsed", "ana-done"]);
    let every = listed(data, &["--limit", "1000"]);
    assert_eq!(every.len(), 204, "every execution, through the store's pages");
    assert_eq!(every[4].0, "carol-000");
    assert_eq!(every[203].0, "carol-199", "the oldest last");
    assert_eq!(listed(data, &[]).len(), 50, "50 unless told");
    assert_eq!(listed(data, &["--limit", "7", "--owner", "carol"]).len(), 7);

    let shown = stdout(data, &["executions", "show", "ana-decided"]);
    check_shown(&shown, history);

    let export = stdout(data, &["audit", "export"]);
    check_export(&export, history);
    let recent_export = stdout(data, &["audit", "export", "--since", "3h"]);
    assert_eq!(recent_export.lines().count(), history.recent, "{recent_export}");

    let grants = stdout(data, &["grants", "list"]);
    let rows = rows(&grants);
    assert_eq!(rows[0], ["ID", "OWNER", "TOOL", "CREATED", "EXPIRES", "GRANTED BY"], "{grants}");
    assert_eq!((rows[1][0].as_str(), rows[1][1].as_str(), rows[1][5].as_str()), ("g-ana", "ana", "approval_page"));
    assert_eq!((rows[2][0].as_str(), rows[2][1].as_str(), rows[2][5].as_str()), ("g-bob", "bob", "client"));
    let bobs = stdout(data, &["grants", "list", "--owner", "bob"]);
    assert_eq!(rows_of(&bobs), ["ID", "TOOL", "CREATED", "EXPIRES", "GRANTED BY"], "no owner column for one owner");
    assert_eq!(bobs.lines().count(), 2, "{bobs}");

    let mut sorted: Vec<&str> = export.lines().collect();
    sorted.sort_unstable();
    vec![recent_export.len().to_string(), shown, sorted.join("\n"), grants, bobs]
}

fn rows_of(table: &str) -> Vec<String> {
    rows(table).remove(0)
}

fn check_shown(shown: &str, history: &History) {
    let start = history.decided[0].at;
    let at = |entry: usize| history.decided[entry].at.to_rfc3339();
    let code = "ab".repeat(32);
    let expected = format!(
        "id          ana-decided\n\
         owner       ana\n\
         status      completed\n\
         created     {}\n\
         updated     {}\n\
         toolkit     -\n\
         \n\
         {}  created  codeSha256={code} codeBytes=42 via=mcp\n\
         {}  paused  step=1 tool=gh.issues.create reason=default args={{\"title\":\"crash\"}}\n\
         {}  decided  decision=accept channel=browser decidedBy={}\n\
         {}  called  step=1 tool=gh.issues.list outcome=ok httpStatus=200 durationMs=7\n\
         {}  settled  status=completed\n",
        start.to_rfc3339(),
        start.plus(minutes(2)).to_rfc3339(),
        at(0),
        at(1),
        at(2),
        history.key.as_str(),
        at(3),
        at(4),
    );
    assert_eq!(shown, expected);
}

fn check_export(export: &str, history: &History) {
    let lines: Vec<Value> = export.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), history.total, "every entry of every owner, across the export's pages");
    let mut per_execution: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for line in &lines {
        per_execution.entry(line["executionId"].as_str().unwrap()).or_default().push(line);
    }
    assert_eq!(per_execution.len(), 204);
    let decided: Vec<Value> = history
        .decided
        .iter()
        .map(|entry| {
            let mut line = entry.to_json();
            line["executionId"] = json!("ana-decided");
            line["owner"] = json!("ana");
            line
        })
        .collect();
    let exported: Vec<Value> = per_execution["ana-decided"].iter().map(|v| (*v).clone()).collect();
    assert_eq!(exported, decided, "each entry as `to_json` shows it, with its execution and owner, in order");
    let first = export.lines().find(|l| l.contains("\"ana-decided\"")).unwrap();
    assert!(first.starts_with(r#"{"executionId":"ana-decided","owner":"ana","at":""#), "{first}");
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `executor serve` on `data`, once it listens (its admin socket too).
fn serve(data: &str) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir", data])
        .env_remove("EXECUTOR_PUBLIC_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a greeting").unwrap();
    assert!(first.starts_with("Executor is listening on "), "{first}");
    std::thread::spawn(move || lines.for_each(drop));
    Server(child)
}

#[tokio::test]
async fn the_audit_trail_is_read_from_the_store_and_through_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let history = {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        write_history(&store).await
    };
    let direct = check_commands(data, &history);

    let server = serve(data);
    assert!(dir.path().join("admin.sock").exists());
    let through_server = check_commands(data, &history);
    assert_eq!(through_server, direct, "the same output, whoever holds the store");
    drop(server);
}

#[tokio::test]
async fn mistakes_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    drop(EmbeddedStore::open(dir.path()).unwrap());
    let unknown = stderr(data, &["executions", "show", "nope"]);
    assert!(unknown.contains("no execution has the id \"nope\" in the history"), "{unknown}");
    let status = stderr(data, &["executions", "list", "--status", "done"]);
    assert!(
        status.contains(
            "invalid --status \"done\": give one of running, paused, resuming, completed, failed, declined, expired"
        ),
        "{status}"
    );
    let limit = stderr(data, &["executions", "list", "--limit", "1001"]);
    assert!(limit.contains("invalid --limit 1001: give a number from 1 to 1000"), "{limit}");
    for args in [&["executions", "list", "--since"][..], &["audit", "export", "--since"]] {
        for bad in ["yesterday", "2026-12-01", "2026-12-01T10:00:00"] {
            let since = stderr(data, &[args, &[bad]].concat());
            assert!(since.contains(&format!("invalid --since {bad:?}")) && since.contains("(30m, 24h, 7d)"), "{since}");
        }
    }
    assert_eq!(stdout(data, &["audit", "export"]), "", "no history: no lines");
    let none = stdout(data, &["executions", "list"]);
    assert!(none.starts_with("No executions recorded match."), "{none}");
    assert!(stdout(data, &["grants", "list"]).starts_with("No grants."));
}
