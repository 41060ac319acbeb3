//! Pausing at a sensitive call and resuming from a serialised snapshot.

mod support;

use std::collections::BTreeMap;

use executor_core::{ApprovalAction, ExecutionId};
use executor_sandbox::{Limits, Outcome, Segment, Snapshot};
use serde_json::{Value, json};
use support::*;

fn paused(outcome: Outcome) -> Snapshot {
    match outcome {
        Outcome::Paused { snapshot, .. } => snapshot,
        other => panic!("expected a pause, got {other:?}"),
    }
}

/// Through JSON, as the store keeps it: nothing survives but data.
fn persisted(snapshot: &Snapshot) -> Snapshot {
    serde_json::from_str(&serde_json::to_string(snapshot).unwrap()).unwrap()
}

fn resume(snapshot: &Snapshot, action: ApprovalAction) -> Segment {
    Segment::resume(ExecutionId::parse("exec1").unwrap(), persisted(snapshot), action)
}

const CREATE: &str = "const before = await tools.gh.list({});\n\
    console.log('listed');\n\
    const created = await tools.w.create({title: 'bug'});\n\
    console.log('created');\n\
    return {n: before.ok, created: created.data.args}";

#[tokio::test]
async fn a_write_pauses_and_an_approval_resumes_it_once() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, Limits::default());
    let outcome = sandbox.run(segment(CREATE), tools.clone()).await;
    let Outcome::Paused { snapshot, logs } = outcome else { panic!("{outcome:?}") };
    assert_eq!(logs, ["listed"]);
    assert_eq!(snapshot.journal.pending.len(), 1);
    assert_eq!(snapshot.journal.pending[0].path, "w.create");
    assert_eq!(snapshot.journal.pending[0].args, json!({"title": "bug"}));
    assert_eq!(snapshot.journal.pending[0].message, "w.create wants to write");
    assert_eq!(tools.calls().len(), 1, "only the read ran");

    // A new sandbox and new tools: nothing from the first run is in memory.
    let fresh = TestTools::new();
    let outcome =
        support::sandbox(&fresh, Limits::default()).run(resume(&snapshot, ApprovalAction::Accept), fresh.clone()).await;
    let Outcome::Completed { result, logs } = outcome else { panic!("{outcome:?}") };
    assert_eq!(result, json!({"n": true, "created": {"title": "bug"}}));
    assert_eq!(logs, ["listed", "created"], "logs of the whole run");
    assert_eq!(fresh.calls(), [("w.create".to_owned(), json!({"title": "bug"}))], "the read is replayed, not repeated");
    assert_eq!(fresh.calls.lock().unwrap()[0].2, "exec1:1", "idempotency key is <executionId>:<step>");
}

#[tokio::test]
async fn a_decline_throws_an_error_the_code_may_catch() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, Limits::default());
    let code = "try { await tools.w.drop({t: 1}) } catch (e) { return {name: e.name, message: e.message, isError: e instanceof Error} }";
    let snapshot = paused(sandbox.run(segment(code), tools.clone()).await);
    let outcome = sandbox.run(resume(&snapshot, ApprovalAction::Decline), tools.clone()).await;
    assert_eq!(
        completed(&outcome),
        &json!({"name": "ApprovalDeclinedError", "message": "the call to tools.w.drop was declined", "isError": true})
    );
    assert!(tools.calls().is_empty());

    let snapshot = paused(sandbox.run(segment("await tools.w.drop({}); return 1"), tools.clone()).await);
    let outcome = sandbox.run(resume(&snapshot, ApprovalAction::Decline), tools.clone()).await;
    assert_eq!(error_code(&outcome), "approval_declined");
    let outcome = sandbox.run(resume(&snapshot, ApprovalAction::Cancel), tools.clone()).await;
    assert_eq!(error_code(&outcome), "approval_cancelled");
    assert!(tools.calls().is_empty(), "nothing declined or cancelled is ever called");
}

#[tokio::test]
async fn parallel_writes_pause_together_after_the_reads_finish() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, Limits::default());
    let code = "const [a, b, c] = await Promise.all([tools.w.one({}), tools.r.two({}), tools.w.three({})]);\n\
                return [a.data.path, b.data.path, c.data.path]";
    let snapshot = paused(sandbox.run(segment(code), tools.clone()).await);
    let pending: Vec<_> = snapshot.journal.pending.iter().map(|p| (p.step, p.path.as_str())).collect();
    assert_eq!(pending, [(0, "w.one"), (2, "w.three")]);
    assert_eq!(snapshot.journal.steps.len(), 1, "the read in flight finished and was journaled");
    assert_eq!(tools.calls().len(), 1);

    let outcome = sandbox.run(resume(&snapshot, ApprovalAction::Accept), tools.clone()).await;
    assert_eq!(completed(&outcome), &json!(["w.one", "r.two", "w.three"]));
    let mut paths: Vec<_> = tools.calls().into_iter().map(|(p, _)| p).collect();
    paths.sort();
    assert_eq!(paths, ["r.two", "w.one", "w.three"], "each tool exactly once");
}

#[tokio::test]
async fn an_invalid_call_fails_at_once_and_a_valid_write_beside_it_still_waits() {
    // Alone, an invalid write never pauses: the code gets the error straight away.
    let (outcome, tools) = run("return (await tools.w.create({bad: 1})).error").await;
    let error = completed(&outcome);
    assert_eq!(error["code"], "invalid_arguments", "{error}");
    assert_eq!(error["message"], "unknown argument `bad`; tools.w.create takes no such argument");
    assert!(tools.calls().is_empty());

    // Beside a valid write: the invalid write, blocked call and read fail (checked
    // before the policy), and the batch waits for the valid write alone.
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, Limits::default());
    let code = "const all = await Promise.all([tools.w.create({bad: 1}), tools.x.drop({bad: 1}), \
                tools.r.get({bad: 1}), tools.w.create({title: 'ok'})]);\n\
                return all.map(r => r.ok ? r.data.args : r.error.code)";
    let snapshot = paused(sandbox.run(segment(code), tools.clone()).await);
    let pending: Vec<_> = snapshot.journal.pending.iter().map(|p| (p.step, p.path.as_str())).collect();
    assert_eq!(pending, [(3, "w.create")]);
    let failed: Vec<_> = snapshot.journal.steps.iter().map(|s| (s.step, s.outcome.clone())).collect();
    let invalid = |path: &str| executor_core::StepOutcome::Err {
        code: "invalid_arguments".into(),
        message: format!("unknown argument `bad`; tools.{path} takes no such argument"),
    };
    assert_eq!(failed, [(0, invalid("w.create")), (1, invalid("x.drop")), (2, invalid("r.get"))]);
    assert!(tools.calls().is_empty(), "nothing was called");

    // Approved: the failures replay as journaled, and only the valid write is made.
    let outcome = sandbox.run(resume(&snapshot, ApprovalAction::Accept), tools.clone()).await;
    let expected = json!(["invalid_arguments", "invalid_arguments", "invalid_arguments", {"title": "ok"}]);
    assert_eq!(completed(&outcome), &expected);
    assert_eq!(tools.calls(), [("w.create".to_owned(), json!({"title": "ok"}))]);
}

#[tokio::test]
async fn consecutive_approvals_pause_again() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, Limits::default());
    let code = "const a = await tools.w.a({}); const b = await tools.w.b({}); return [a.ok, b.ok, Date.now()]";
    let first = paused(sandbox.run(segment(code), tools.clone()).await);
    let second = paused(sandbox.run(resume(&first, ApprovalAction::Accept), tools.clone()).await);
    assert_eq!(second.journal.steps.len(), 1);
    assert_eq!(second.journal.pending[0].path, "w.b");
    let outcome = sandbox.run(resume(&second, ApprovalAction::Accept), tools.clone()).await;
    assert_eq!(completed(&outcome), &json!([true, true, START + 2000]));
    assert_eq!(tools.calls().len(), 2);
}

#[tokio::test]
async fn replay_that_diverges_calls_nothing() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, Limits::default());
    let snapshot = paused(sandbox.run(segment(CREATE), tools.clone()).await);
    let before = tools.calls().len();
    let cases = [
        CREATE.replace("tools.gh.list({})", "tools.gh.search({})"),
        CREATE.replace("tools.gh.list({})", "tools.gh.list({page: 2})"),
        CREATE.replace("{title: 'bug'}", "{title: 'other'}"),
    ];
    for code in cases {
        let tampered = Snapshot { code: code.clone(), journal: snapshot.journal.clone() };
        let outcome = sandbox.run(resume(&tampered, ApprovalAction::Accept), tools.clone()).await;
        let Outcome::Failed { error, .. } = &outcome else { panic!("{code}: {outcome:?}") };
        assert_eq!(error.code(), "non_deterministic_replay", "{code}");
        assert!(error.to_string().contains("non-deterministic replay at step"), "{error}");
    }
    assert_eq!(tools.calls().len(), before, "a divergent replay makes no call");
}

#[tokio::test]
async fn decisions_by_step_apply_to_calls_not_yet_made() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, Limits::default());
    let mut ahead = segment("const a = await tools.w.a({}); return a.ok");
    ahead.decisions = BTreeMap::from([(0, ApprovalAction::Accept)]);
    assert_eq!(completed(&sandbox.run(ahead, tools.clone()).await), &Value::Bool(true));
}
