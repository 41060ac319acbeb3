//! The driver phase by phase: each transition as a table, then whole runs
//! through a real engine, phase after phase.

use async_trait::async_trait;
use executor_core::{ApprovalAction, ArgsHash, DEFAULT_RULE, Effect, ExecutionId, ManualClock};

use super::*;
use crate::Limits;
use crate::tools::ToolOutcome;

/// `w.*` needs approval, `x.*` is blocked, a `bad` argument is invalid;
/// every call answers its arguments.
struct Echo;

#[async_trait]
impl Tools for Echo {
    fn validate(&self, _: &str, args: &Value) -> Result<(), String> {
        if args.get("bad").is_some() { Err("no argument `bad`".into()) } else { Ok(()) }
    }
    fn policy(&self, call: &PolicyCall<'_>) -> Policy {
        match call.path.split('.').next() {
            Some("w") => Policy::NeedsApproval { message: "write?".into(), rule: "w-asks".into() },
            Some("x") => Policy::Blocked { reason: "off".into(), rule: "x-off".into() },
            _ => Policy::run_by_default(),
        }
    }
    fn effect(&self, path: &str) -> Option<Effect> {
        Some(if path.starts_with("a.") { Effect::Read } else { Effect::Write })
    }
    async fn call(&self, _: &str, args: Value, _: &CallContext) -> ToolOutcome {
        Ok(args)
    }
    async fn search(&self, request: Value) -> ToolOutcome {
        Ok(request)
    }
    async fn describe(&self, request: Value) -> ToolOutcome {
        Ok(request)
    }
}

fn call(step: u32, path: &str, args: Value) -> IssuedCall {
    IssuedCall::new(step, path, args)
}

fn segment(code: &str) -> Segment {
    Segment::start(ExecutionId::parse("exec1").unwrap(), code, Timestamp::from_millis(1_000), 7)
}

fn recorded(step: u32, path: &str, args: Value, outcome: StepOutcome) -> JournalStep {
    JournalStep {
        step,
        path: path.into(),
        args_hash: ArgsHash::of(&args),
        outcome,
        completed_at: Timestamp::from_millis(5),
    }
}

/// What planning leads to: the batch's actions, or how the run exits.
fn planned(phase: Phase) -> Result<Vec<Action>, &'static str> {
    match phase {
        Phase::Calling(batch) => Ok(batch.actions),
        Phase::Exit(Exit::Failed(error)) => Err(error.code()),
        Phase::Exit(Exit::HandedOff) => Err("handed off"),
        other => panic!("planning never leads to {other:?}"),
    }
}

#[test]
fn planning_stops_at_the_safe_point_or_plans_the_whole_batch() {
    let calls = [call(0, "a.read", json!({})), call(1, "w.write", json!({}))];
    let decide =
        |path: &str, args: &Value, _| Echo.validate(path, args).map(|()| Echo.policy(&PolicyCall::new(path, args)));
    let asks = Action::Await { message: "write?".into(), connect: None, rule: Some("w-asks".into()) };
    let run = || Action::Call(Allowed::By(Allowance::Rule(DEFAULT_RULE.into())));
    let decided = || Action::Call(Allowed::Decision);
    let with = |change: &dyn Fn(&mut Segment)| {
        let mut segment = segment("");
        change(&mut segment);
        segment
    };
    let waiting = |segment: &mut Segment, action| {
        segment.journal.add_pending(PendingCall::new(1, "w.write", json!({}), "write?"));
        segment.decisions.insert(1, action);
    };
    let cases = [
        ("new calls: each planned", segment(""), Ok(vec![run(), asks.clone()])),
        ("a cancellation asked: stopped, nothing called", with(&|s| s.stop.request()), Err("cancelled")),
        ("a hand-off asked: handed off, nothing called", with(&|s| s.stop.request_hand_off()), Err("handed off")),
        (
            "a cancellation stands over a later hand-off",
            with(&|s| {
                s.stop.request();
                s.stop.request_hand_off()
            }),
            Err("cancelled"),
        ),
        (
            "a hand-off while a decided call waits: planned, so the decision is carried out",
            with(&|s| {
                waiting(s, ApprovalAction::Accept);
                s.stop.request_hand_off()
            }),
            Ok(vec![run(), decided()]),
        ),
        ("an accepted pending call: made", with(&|s| waiting(s, ApprovalAction::Accept)), Ok(vec![run(), decided()])),
        (
            "a cancelling decision: the run fails",
            with(&|s| waiting(s, ApprovalAction::Cancel)),
            Err("approval_cancelled"),
        ),
        (
            "off the journal's path: fails, nothing called",
            with(&|s| s.journal.record(recorded(0, "a.other", json!({}), StepOutcome::Ok { data: json!(1) }))),
            Err("non_deterministic_replay"),
        ),
        (
            "a new call past the cap: fails, nothing called",
            with(&|s| s.max_tool_calls = Some(1)),
            Err("quota_exceeded"),
        ),
    ];
    for (case, segment, expected) in cases {
        assert_eq!(
            planned(plan_batch(&segment, calls.to_vec(), vec![CallCounts::default(); calls.len()], decide)),
            expected,
            "{case}"
        );
    }
}

#[test]
fn journaling_records_every_call_and_counts_the_pending() {
    let at = Timestamp::from_millis(9);
    let calls = [
        call(0, "a.replayed", json!({})),
        call(1, "a.made", json!({})),
        call(2, "a.http", json!({})),
        call(3, "a.failed", json!({})),
        call(4, "w.declined", json!({})),
        call(5, "x.blocked", json!({})),
        call(6, "a.invalid", json!({"bad": 1})),
        call(7, "w.asks", json!({"n": 7})),
        call(8, "crm.connects", json!({})),
    ];
    let actions = vec![
        Action::Replay(StepOutcome::Ok { data: json!(0) }),
        Action::Call(Allowed::By(Allowance::Rule("r-read".into()))),
        Action::Call(Allowed::By(Allowance::Grant("g1".into()))),
        Action::Call(Allowed::Decision),
        Action::Decline,
        Action::Block { reason: "off".into(), rule: "x-off".into() },
        Action::Invalid("no argument `bad`".into()),
        Action::Await { message: "write?".into(), connect: None, rule: Some("w-asks".into()) },
        Action::Await { message: "connect crm".into(), connect: Some("crm".into()), rule: None },
    ];
    let failed = ToolError { code: "upstream_error".into(), message: "down".into() };
    let ms = Duration::from_millis;
    let results = vec![
        (Ok(ToolSuccess::plain(json!(1))), ms(4)),
        (Ok(ToolSuccess { data: json!(2), http_status: Some(201) }), ms(5)),
        (Err(failed), ms(6)),
    ];
    let batch = Batch { calls: calls.to_vec(), actions, counts: vec![CallCounts::default(); calls.len()] };
    let mut journal = Journal::new(Timestamp::from_millis(1), 7);
    let mut audited = Vec::new();
    let log = |call: &IssuedCall, action: &Action, made: Option<&(Result<ToolSuccess, ToolError>, Duration)>| {
        audited.extend(called(call, action, made, &Echo));
    };
    let pending = record_batch(&mut journal, &batch, Made { results, completed_at: at }, log);

    assert_eq!(pending, 2);
    let err = |code: &str, message: &str| StepOutcome::Err { code: code.into(), message: message.into() };
    let expected = [
        (1, StepOutcome::Ok { data: json!(1) }),
        (2, StepOutcome::HttpOk { data: json!(2), status: 201 }),
        (3, err("upstream_error", "down")),
        (4, StepOutcome::Declined { message: "the call to tools.w.declined was declined".into() }),
        (5, err("blocked", "off")),
        (6, err("invalid_arguments", "no argument `bad`")),
    ];
    let steps: Vec<_> = journal.steps.iter().map(|s| (s.step, s.outcome.clone())).collect();
    assert_eq!(steps, expected, "a replayed call is not recorded again");
    assert!(journal.steps.iter().all(|s| s.completed_at == at && s.args_hash == calls[s.step as usize].args_hash));
    assert_eq!(
        journal.pending,
        [
            PendingCall::new(7, "w.asks", json!({"n": 7}), "write?").asked_by("w-asks"),
            PendingCall::connect(8, "crm.connects", json!({}), "connect crm", "crm"),
        ]
    );
    // The audit trail: each new call with what let it run, how it ended and
    // how long it took; nothing for the replayed, declined or pending ones.
    let row = |c: &Called| {
        let ids = (c.policy_id.clone(), c.grant_id.clone());
        (c.step, c.kind, c.outcome, c.http_status, c.error_code.clone(), c.duration_ms, c.allowed_by, ids.0, ids.1)
    };
    let s = |text: &str| Some(text.to_owned());
    let (ok, error, blocked) = (CallOutcome::Ok, CallOutcome::Error, CallOutcome::Blocked);
    let (read, write) = (Some(Effect::Read), Some(Effect::Write));
    let expected_audit = [
        (1, read, ok, None, None, 4, Some(AllowedBy::Policy), s("r-read"), None),
        (2, read, ok, Some(201), None, 5, Some(AllowedBy::Grant), None, s("g1")),
        (3, read, error, None, s("upstream_error"), 6, Some(AllowedBy::Decision), None, None),
        (5, write, blocked, None, s("blocked"), 0, None, s("x-off"), None),
        (6, read, error, None, s("invalid_arguments"), 0, None, None, None),
    ];
    assert_eq!(audited.iter().map(row).collect::<Vec<_>>(), expected_audit);
}

#[test]
fn a_completed_run_answers_its_result_within_the_limit() {
    let too_large = |size| Exit::Failed(SandboxError::ResultTooLarge { size, limit: 5 });
    let cases = [
        ("3", Exit::Completed(json!(3))),
        // At the limit: it fits.
        ("\"abc\"", Exit::Completed(json!("abc"))),
        ("[1,2,3]", too_large(7)),
        // Text that is not JSON (the engine always serialises) answers null.
        ("nope", Exit::Completed(Value::Null)),
    ];
    for (json, expected) in cases {
        assert_eq!(completed(json.into(), 5), expected, "{json}");
    }
}

#[test]
fn deliveries_wrap_tool_results_but_not_builtins() {
    let ok = StepOutcome::Ok { data: json!(1) };
    let http = StepOutcome::HttpOk { data: json!({"id": 3}), status: 201 };
    let err = StepOutcome::Err { code: "http_404".into(), message: "not found".into() };
    let declined = StepOutcome::Declined { message: "no".into() };
    let value = |v: Value| Delivery::Json(v.to_string());
    let cases = [
        ("a.b", &ok, value(json!({"ok": true, "data": 1}))),
        ("a.b", &http, value(json!({"ok": true, "data": {"id": 3}, "http": {"status": 201}}))),
        ("a.b", &err, value(json!({"ok": false, "error": {"code": "http_404", "message": "not found"}}))),
        ("a.b", &declined, Delivery::Declined("no".into())),
        ("search", &ok, value(json!(1))),
        ("describe.tool", &err, Delivery::Error("not found".into())),
    ];
    let parsed = |d: Delivery| match d {
        Delivery::Json(text) => Ok(serde_json::from_str::<Value>(&text).unwrap()),
        other => Err(other),
    };
    for (path, outcome, expected) in cases {
        assert_eq!(parsed(delivery(path, outcome)), parsed(expected), "{path} {outcome:?}");
    }
}

/// Runs segments through a real engine with [`Echo`], phase by phase.
struct Harness {
    runtime: tokio::runtime::Runtime,
    limits: Limits,
    clock: ManualClock,
}

/// A run's phases until its exit, and the outcome the exit makes.
struct Traced {
    phases: Vec<&'static str>,
    outcome: Result<Outcome, Relocate>,
    steps: Steps,
}

impl Harness {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        Self { runtime, limits: Limits::default(), clock: ManualClock::new(Timestamp::from_millis(2_000)) }
    }

    fn env(&self) -> Env<'_> {
        Env {
            tools: Arc::new(Echo),
            limits: &self.limits,
            clock: &self.clock,
            runtime: self.runtime.handle(),
            deadline: Instant::now() + self.limits.wall_clock,
        }
    }

    fn trace(&self, segment: Segment, budget: Option<Duration>) -> Traced {
        let env = self.env();
        let mut steps = Steps::default();
        let (mut driver, mut phase) = Driver::start(segment, &env, budget, &mut steps).unwrap();
        let mut phases = Vec::new();
        loop {
            phases.push(match &phase {
                Phase::Running => "running",
                Phase::Planning(_) => "planning",
                Phase::Calling(_) => "calling",
                Phase::Journaling(..) => "journaling",
                Phase::Delivering(_) => "delivering",
                Phase::Exit(_) => break,
            });
            phase = driver.advance(phase);
        }
        let Phase::Exit(exit) = phase else { unreachable!("the loop ends at the exit") };
        let outcome = driver.exit(exit);
        Traced { phases, outcome, steps }
    }
}

/// How a run ended, in a word and what it left.
fn summary(outcome: &Result<Outcome, Relocate>) -> String {
    match outcome {
        Ok(Outcome::Completed { result, .. }) => format!("completed {result}"),
        Ok(Outcome::Failed { error, .. }) => format!("failed {}", error.code()),
        Ok(Outcome::Paused { snapshot, .. }) => {
            let pending: Vec<_> = snapshot.journal.pending.iter().map(|p| p.step).collect();
            format!("paused at {pending:?} after {} calls", snapshot.journal.steps.len())
        }
        Ok(Outcome::Yielded { snapshot, .. }) => format!("handed off after {} calls", snapshot.journal.steps.len()),
        Err(Relocate(segment)) => format!("relocated after {} calls", segment.journal.steps.len()),
    }
}

#[test]
fn a_run_goes_phase_by_phase_to_its_exit() {
    const ROUND: [&str; 5] = ["running", "planning", "calling", "journaling", "delivering"];
    let rounds = |n: usize| -> Vec<&str> { ROUND.iter().copied().cycle().take(5 * n).chain(["running"]).collect() };
    let paused = || -> Vec<&str> { ROUND[..4].to_vec() };
    let read = "const r = await tools.a.read({n: 1}); return r.data.n";
    let mut replayed = segment(read);
    replayed.journal.record(recorded(0, "a.read", json!({"n": 1}), StepOutcome::Ok { data: json!({"n": 5}) }));
    let handed_off = segment("await tools.a.read({}); return 1");
    handed_off.stop.request_hand_off();
    let steps = |replayed, called, pending| Steps { replayed, called, pending };
    let long = Some(Duration::from_millis(200));
    let cases = [
        ("no calls: completes from running", segment("return 1 + 2"), None, rounds(0), "completed 3", steps(0, 0, 0)),
        ("a call: one round", segment(read), None, rounds(1), "completed 1", steps(0, 1, 0)),
        ("a journaled call: the recorded outcome", replayed, None, rounds(1), "completed 5", steps(1, 0, 0)),
        (
            "the clock pinned to the batch's completion",
            segment("await Promise.all([tools.a.b({}), tools.a.c({})]); await tools.a.d({}); return Date.now()"),
            None,
            rounds(2),
            "completed 2000",
            steps(0, 3, 0),
        ),
        (
            "a blocked call: journaled and delivered, not made",
            segment("const r = await tools.x.drop({}); return r.error.code"),
            None,
            rounds(1),
            "completed \"blocked\"",
            steps(0, 0, 0),
        ),
        (
            "a write in a batch: the read made, the write pending, nothing delivered",
            segment("await Promise.all([tools.a.read({}), tools.w.write({})])"),
            None,
            paused(),
            "paused at [1] after 1 calls",
            steps(0, 1, 1),
        ),
        (
            "a thrown error: fails from running",
            segment("throw new Error('no')"),
            None,
            rounds(0),
            "failed runtime_error",
            steps(0, 0, 0),
        ),
        (
            "waiting on nothing: fails from running",
            segment("await new Promise(() => {})"),
            None,
            rounds(0),
            "failed never_settles",
            steps(0, 0, 0),
        ),
        (
            "a hand-off: at the first safe point",
            handed_off,
            None,
            ROUND[..2].to_vec(),
            "handed off after 0 calls",
            steps(0, 0, 0),
        ),
        (
            "past the budget: relocated with the calls made so far",
            segment("await tools.a.read({}); while (true) {}"),
            long,
            rounds(1),
            "relocated after 1 calls",
            steps(0, 1, 0),
        ),
    ];
    let harness = Harness::new();
    for (case, segment, budget, phases, outcome, counted) in cases {
        let traced = harness.trace(segment, budget);
        assert_eq!(traced.phases, phases, "{case}");
        assert_eq!(summary(&traced.outcome), outcome, "{case}");
        assert_eq!(traced.steps, counted, "{case}");
    }
}

#[test]
fn a_run_that_cannot_start_fails_without_logs() {
    let harness = Harness::new();
    let env = harness.env();
    let outcome = Driver::run(segment("return ("), &env, None, &mut Steps::default());
    assert!(matches!(&outcome, Ok(Outcome::Failed { logs, .. }) if logs.is_empty()), "{}", summary(&outcome));
    assert_eq!(summary(&outcome), "failed syntax_error");
}
