use serde_json::json;

use super::*;
use crate::{Decider, ElicitationMode, ExecutionEvent, ExecutionFailure, Journal};

fn at(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn new_execution() -> Execution {
    Execution::start(
        ExecutionId::parse("e1").unwrap(),
        Principal::parse("ana").unwrap(),
        None,
        ElicitationMode::Browser,
        "return 1",
        Journal::new(at(0), 7),
        at(0),
    )
}

fn paused_journal(connect: Option<&str>) -> Journal {
    let mut journal = Journal::new(at(0), 7);
    let call = PendingCall::new(2, "gh.issues.create", json!({"title": "t", "api_token": "s3cr3t"}), "Create?");
    let call = match connect {
        Some(source) => PendingCall { connect: Some(source.into()), ..call },
        None => call.asked_by("rule:gh.issues.*"),
    };
    journal.add_pending(call);
    journal
}

fn key_decider(channel: Channel) -> Decider {
    let owner = Principal::parse("ana").unwrap();
    Decider { channel, by: DecidedBy::key(&owner, &TokenHash::of_token("tok")) }
}

fn call(step: u32) -> Called {
    Called {
        step,
        tool: "gh.issues.list".into(),
        kind: Some(Effect::Read),
        outcome: CallOutcome::Ok,
        http_status: Some(200),
        error_code: None,
        duration_ms: 3,
        allowed_by: Some(AllowedBy::Policy),
        policy_id: Some(DEFAULT_RULE.into()),
        grant_id: None,
    }
}

/// The `type` of each entry, in order.
fn types(entries: &[HistoryEntry]) -> Vec<String> {
    entries.iter().map(|e| serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_owned()).collect()
}

/// (what it is, events applied before, the event, calls since the last write, created?, entry types)
type Case = (&'static str, Vec<ExecutionEvent>, ExecutionEvent, Vec<Called>, Option<Via>, Vec<&'static str>);

#[test]
fn each_change_adds_its_entries() {
    let deadline = at(60_000);
    let pause = || ExecutionEvent::Pause { journal: paused_journal(None), deadline };
    let claim =
        |action, channel| ExecutionEvent::Claim { action, link: None, claim: "c".into(), by: key_decider(channel) };
    let failure = ExecutionFailure { code: "upstream_error".into(), message: "no".into(), retry_after_ms: None };
    let cases: Vec<Case> = vec![
        ("new code that pauses", vec![], pause(), vec![call(0)], Some(Via::Mcp), vec!["created", "called", "paused"]),
        (
            "new code that completes",
            vec![],
            ExecutionEvent::Complete { result: json!(1) },
            vec![call(0), call(1)],
            Some(Via::Task),
            vec!["created", "called", "called", "settled"],
        ),
        ("a decision", vec![pause()], claim(ApprovalAction::Accept, Channel::OwnerApi), vec![], None, vec!["decided"]),
        (
            "a decline",
            vec![pause()],
            claim(ApprovalAction::Decline, Channel::ApprovalPage),
            vec![],
            None,
            vec!["decided"],
        ),
        (
            "a settle after the approved call",
            vec![pause(), claim(ApprovalAction::Accept, Channel::Model)],
            ExecutionEvent::Fail { error: failure },
            vec![call(2)],
            None,
            vec!["called", "settled"],
        ),
        ("an expiry", vec![pause()], ExecutionEvent::Expire, vec![], None, vec!["settled"]),
        ("an interruption", vec![], ExecutionEvent::Interrupt, vec![], None, vec!["settled"]),
        (
            "a cancel request",
            vec![],
            ExecutionEvent::RequestCancel { by: Decider::model(Channel::Task) },
            vec![],
            None,
            vec!["decided"],
        ),
        ("a heartbeat", vec![], ExecutionEvent::Heartbeat, vec![], None, vec![]),
        (
            "a hand-off with its calls",
            vec![],
            ExecutionEvent::Yield { journal: Journal::new(at(0), 7), lease: Duration::from_secs(1) },
            vec![call(0)],
            None,
            vec!["called"],
        ),
        (
            "handed on when new",
            vec![],
            ExecutionEvent::HandOn { claim: "c".into(), lease: Duration::from_secs(1) },
            vec![],
            Some(Via::Mcp),
            vec!["created"],
        ),
    ];
    for (case, before, event, calls, created, expected) in cases {
        let mut execution = new_execution();
        for earlier in before {
            execution.apply(earlier, at(10)).unwrap();
        }
        let applied = execution.apply(event, at(20)).unwrap();
        let entries = entries_of(&applied, &execution, &calls, created);
        assert_eq!(types(&entries), expected, "{case}");
    }
}

#[test]
fn a_decision_names_its_channel_and_who_decided() {
    let mut execution = new_execution();
    execution.apply(ExecutionEvent::Pause { journal: paused_journal(None), deadline: at(60_000) }, at(10)).unwrap();
    let by = key_decider(Channel::ApprovalPage);
    let event = ExecutionEvent::Claim { action: ApprovalAction::Accept, link: None, claim: "c".into(), by };
    let applied = execution.apply(event, at(20)).unwrap();
    let [entry] = entries_of(&applied, &execution, &[], None).try_into().unwrap();
    let hash = TokenHash::of_token("tok");
    let key = &hash.as_str()[..KEY_ID_LEN];
    assert_eq!(
        entry.to_json(),
        json!({
            "at": "1970-01-01T00:00:00.020Z",
            "type": "decided",
            "decision": "accept",
            "channel": "browser",
            "decidedBy": format!("key:ana/{key}"),
        })
    );
}

#[test]
fn a_pause_records_its_rule_and_redacted_arguments() {
    let mut execution = new_execution();
    let applied =
        execution.apply(ExecutionEvent::Pause { journal: paused_journal(None), deadline: at(60_000) }, at(10)).unwrap();
    let entries = entries_of(&applied, &execution, &[], Some(Via::Mcp));
    let paused = entries[1].to_json();
    assert_eq!(paused["reason"], "rule:gh.issues.*");
    assert_eq!(paused["tool"], "gh.issues.create");
    let args = paused["args"].as_str().unwrap();
    assert!(args.contains("\"title\":\"t\"") && !args.contains("s3cr3t"), "{args}");
    let created = entries[0].to_json();
    assert_eq!(created["codeBytes"], 8);
    assert_eq!(created["codeSha256"].as_str().unwrap().len(), 64);
    assert_eq!(created["via"], "mcp");
    // A long argument is cut.
    assert!(args_summary(&json!({"body": "x".repeat(10_000)})).len() < MAX_ARGS_SUMMARY_BYTES + 64);
}

#[test]
fn a_connection_made_at_a_connect_link_is_recorded() {
    let mut execution = new_execution();
    execution
        .apply(ExecutionEvent::Pause { journal: paused_journal(Some("crm")), deadline: at(60_000) }, at(10))
        .unwrap();
    let owner = Principal::parse("ana").unwrap();
    let by = Decider { channel: Channel::Connect, by: DecidedBy::link(&owner, &TokenHash::of_token("link")) };
    let event = ExecutionEvent::Claim { action: ApprovalAction::Accept, link: None, claim: "c".into(), by };
    let applied = execution.apply(event, at(20)).unwrap();
    let entries = entries_of(&applied, &execution, &[], None);
    assert_eq!(types(&entries), ["decided", "connected"]);
    assert_eq!(entries[1].what, Happened::Connected { source: "crm".into() });
}

#[test]
fn entries_read_back_as_they_were_written() {
    let entries = [
        HistoryEntry { at: at(1), what: Happened::Called(call(0)) },
        HistoryEntry {
            at: at(2),
            what: Happened::Settled { status: ExecutionStatus::Failed, error_code: Some("x".into()) },
        },
    ];
    for entry in entries {
        let text = serde_json::to_string(&entry).unwrap();
        assert_eq!(serde_json::from_str::<HistoryEntry>(&text).unwrap(), entry, "{text}");
    }
}

#[test]
fn a_listed_pause_past_its_window_reads_as_expired() {
    let mut execution = new_execution();
    execution.apply(ExecutionEvent::Pause { journal: paused_journal(None), deadline: at(60_000) }, at(10)).unwrap();
    let record = ExecutionRecord::of(&execution);
    assert_eq!(record.status_at(at(59_999)), ExecutionStatus::Paused);
    assert_eq!(record.to_json(at(59_999))["pending"]["tool"], "gh.issues.create");
    assert_eq!(record.status_at(at(60_000)), ExecutionStatus::Expired);
    assert!(record.to_json(at(60_000)).get("pending").is_none());
}
