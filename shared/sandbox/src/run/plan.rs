//! Planning a batch: what happens to each call the code issued, decided for
//! the whole batch before any call is made, from the journal, the decisions
//! and, for a new call, its arguments and the policy.

use std::collections::{BTreeMap, HashMap};

use executor_core::{ApprovalAction, Journal, QuotaExceeded, QuotaLimit, Replay, StepOutcome};
use serde_json::Value;

use crate::SandboxError;
use crate::engine::IssuedCall;
use crate::tools::{Allowance, CallCounts, DESCRIBE_PATH, Policy, SEARCH_PATH};

/// Why a call is made, for the audit trail.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Allowed {
    /// The policy, or an owner's grant, lets it run.
    By(Allowance),
    /// A decision on it.
    Decision,
    /// `tools.search` or `tools.describe.tool`: no source's tool.
    Builtin,
}

/// What happens to one call of a batch.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Action {
    /// In the journal: hand back the recorded outcome.
    Replay(StepOutcome),
    /// Make the call now.
    Call(Allowed),
    /// Declined: the code's promise rejects.
    Decline,
    /// The policy refuses it: why, and the id of the rule.
    Block { reason: String, rule: String },
    /// Its arguments do not fit the tool: it fails with `invalid_arguments`,
    /// before the policy is asked, so it never pauses.
    Invalid(String),
    /// Needs a decision that has not been made: pause. `connect`: the source
    /// the owner must connect first; `rule`: the rule that asks.
    Await { message: String, connect: Option<String>, rule: Option<String> },
    /// The decision cancelled the execution.
    Cancel,
}

impl Action {
    /// Why the call is not made, on its span: `None` when it is made, replayed
    /// or the run stops before it.
    pub(super) fn not_made(&self) -> Option<&'static str> {
        match self {
            Action::Await { connect: None, .. } => Some("approval_required"),
            Action::Await { connect: Some(_), .. } => Some("connect_required"),
            Action::Decline => Some("declined"),
            Action::Block { .. } => Some("blocked"),
            Action::Invalid(_) => Some("invalid_arguments"),
            Action::Replay(_) | Action::Cancel | Action::Call(_) => None,
        }
    }
}

pub(super) fn is_builtin(path: &str) -> bool {
    path == SEARCH_PATH || path == DESCRIBE_PATH
}

fn decided(action: ApprovalAction) -> Action {
    match action {
        ApprovalAction::Accept => Action::Call(Allowed::Decision),
        ApprovalAction::Decline => Action::Decline,
        ApprovalAction::Cancel => Action::Cancel,
    }
}

/// A new call's action from what `decide` said of it: `Err` when its arguments
/// do not fit the tool, else the policy. `ahead` is a decision made for its
/// step before it was asked; it never makes an invalid or blocked call.
fn planned(decision: Result<Policy, String>, ahead: Option<ApprovalAction>) -> Action {
    match decision {
        Err(message) => Action::Invalid(message),
        Ok(Policy::Run { by }) => Action::Call(Allowed::By(by)),
        Ok(Policy::NeedsApproval { message, rule }) => match ahead {
            Some(action) => decided(action),
            None => Action::Await { message, connect: None, rule: Some(rule) },
        },
        Ok(Policy::NeedsConnect { source, message }) => Action::Await { message, connect: Some(source), rule: None },
        Ok(Policy::Blocked { reason, rule }) => Action::Block { reason, rule },
    }
}

/// Calls so far per tool. Counted every round over the whole journal, so
/// hashed by foldhash (seeded per process) rather than SipHash: about a
/// tenth of the cost of a short tool path.
type PerTool<'a> = HashMap<&'a str, u32, foldhash::fast::RandomState>;

/// What the execution called before each call of `batch` (see
/// [`CallCounts`]), `writes` saying which tools write. Every earlier step is
/// in the journal (made, refused or waiting) or earlier in the batch, and the
/// same code issues the same calls on every replay, so the counts are stable.
pub(super) fn counts_before(journal: &Journal, batch: &[IssuedCall], writes: impl Fn(&str) -> bool) -> Vec<CallCounts> {
    // Every issued step once, in step order; a step both journaled and in the
    // batch (a replay issues it again) is the batch's. Called every round, so
    // a sort of what is nearly sorted already, not a map built anew.
    let mut issued: Vec<(u32, &str, Option<usize>)> = journal
        .steps
        .iter()
        .map(|s| (s.step, s.path.as_str(), None))
        .chain(journal.pending.iter().map(|p| (p.step, p.path.as_str(), None)))
        .chain(batch.iter().enumerate().map(|(index, c)| (c.step, c.path.as_str(), Some(index))))
        .collect();
    issued.sort_by_key(|&(step, ..)| step);
    let (mut running, mut per_tool) = (CallCounts::default(), PerTool::default());
    let mut before = vec![CallCounts::default(); batch.len()];
    let mut left = batch.len();
    for (at, &(step, path, in_batch)) in issued.iter().enumerate() {
        if left == 0 {
            break;
        }
        if issued.get(at + 1).is_some_and(|&(next, ..)| next == step) {
            continue;
        }
        if let Some(index) = in_batch {
            before[index] = CallCounts { calls_to_tool: per_tool.get(path).copied().unwrap_or(0), ..running };
            left -= 1;
        }
        if !is_builtin(path) {
            running.calls += 1;
            running.writes += u32::from(writes(path));
            *per_tool.entry(path).or_default() += 1;
        }
    }
    before
}

/// Decide every call of a batch before any is made. `decide` checks a new
/// call's arguments, then asks the policy ([`Tools::validate`](crate::Tools::validate), [`Tools::policy`](crate::Tools::policy));
/// journaled calls are never asked again, so a replay is what the first run was.
/// `counts` are [`counts_before`] the batch's calls, handed to `decide`.
pub(super) fn plan(
    journal: &Journal,
    decisions: &BTreeMap<u32, ApprovalAction>,
    batch: &[IssuedCall],
    counts: &[CallCounts],
    max_calls: Option<u32>,
    decide: impl Fn(&str, &Value, CallCounts) -> Result<Policy, String>,
) -> Result<Vec<Action>, SandboxError> {
    batch
        .iter()
        .zip(counts)
        .map(|(call, before)| {
            let decide = || decide(&call.path, &call.args, *before);
            let replay = journal.check(call.step, &call.path, &call.args_hash)?;
            // Steps count every call from 0, so a new call at step `max` is one too many.
            if let (Replay::New, Some(max)) = (&replay, max_calls)
                && call.step >= max
            {
                return Err(SandboxError::Quota(QuotaExceeded::per_execution(QuotaLimit::ToolCallsPerExecution, max)));
            }
            Ok(match replay {
                Replay::Recorded(done) => Action::Replay(done.outcome.clone()),
                Replay::Pending(pending) => match decisions.get(&call.step) {
                    // Accepting a call that waits for a connection does not make one:
                    // while the owner has none, it waits again. Once connected, the
                    // call is planned as new (its arguments checked against the tools
                    // the connection listed; a write still asks for its approval).
                    Some(ApprovalAction::Accept) if pending.connect.is_some() => planned(decide(), None),
                    Some(action) => decided(*action),
                    None => Action::Await {
                        message: pending.message.clone(),
                        connect: pending.connect.clone(),
                        rule: pending.rule.clone(),
                    },
                },
                Replay::New if is_builtin(&call.path) => Action::Call(Allowed::Builtin),
                // A decision made ahead of time (by step) applies without pausing.
                Replay::New => planned(decide(), decisions.get(&call.step).copied()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use executor_core::{ArgsHash, DEFAULT_RULE, JournalStep, PendingCall, Timestamp};
    use serde_json::json;

    use super::*;

    fn call(step: u32, path: &str, args: Value) -> IssuedCall {
        IssuedCall::new(step, path, args)
    }

    /// [`plan`] with no quota, its policy told nothing of earlier calls.
    fn uncounted(
        journal: &Journal,
        decisions: &BTreeMap<u32, ApprovalAction>,
        batch: &[IssuedCall],
        decide: impl Fn(&str, &Value) -> Result<Policy, String>,
    ) -> Result<Vec<Action>, SandboxError> {
        let counts = vec![CallCounts::default(); batch.len()];
        plan(journal, decisions, batch, &counts, None, |path, args, _| decide(path, args))
    }

    #[test]
    fn counts_before_each_call() {
        let mut journal = Journal::new(Timestamp::from_millis(0), 1);
        let done = |step: u32, path: &str| JournalStep {
            step,
            path: path.into(),
            args_hash: ArgsHash::of(&json!({})),
            outcome: StepOutcome::Err { code: "blocked".into(), message: "no".into() },
            completed_at: Timestamp::from_millis(5),
        };
        // Made or refused, waiting, a search: all issued before the batch.
        journal.record(done(0, "gh.create"));
        journal.record(done(1, "search"));
        journal.record(done(2, "gh.list"));
        journal.add_pending(PendingCall::new(3, "gh.create", json!({}), "create?"));
        let batch = [call(4, "gh.create", json!({})), call(5, "gh.delete", json!({})), call(6, "gh.create", json!({}))];
        let writes = |path: &str| path != "gh.list";
        let counts = counts_before(&journal, &batch, writes);
        let expected = [
            CallCounts { calls: 3, writes: 2, calls_to_tool: 2 },
            CallCounts { calls: 4, writes: 3, calls_to_tool: 0 },
            CallCounts { calls: 5, writes: 4, calls_to_tool: 3 },
        ];
        assert_eq!(counts, expected);
        // A replay of the same code counts the same, whatever was decided meanwhile.
        journal.record(done(4, "gh.create"));
        assert_eq!(counts_before(&journal, &batch, writes), expected);
        assert_eq!(
            counts_before(&Journal::new(Timestamp::from_millis(0), 1), &batch[..1], writes),
            [CallCounts::default()]
        );
    }

    #[test]
    fn planning_a_batch() {
        let mut journal = Journal::new(Timestamp::from_millis(0), 1);
        journal.record(JournalStep {
            step: 0,
            path: "gh.list".into(),
            args_hash: ArgsHash::of(&json!({})),
            outcome: StepOutcome::Ok { data: json!([1]) },
            completed_at: Timestamp::from_millis(5),
        });
        for step in [1, 2, 3] {
            journal.add_pending(PendingCall::new(step, "gh.create", json!({"n": step}), "create?"));
        }
        let decisions = BTreeMap::from([(1, ApprovalAction::Accept), (2, ApprovalAction::Decline)]);
        let policy = |path: &str, _: &Value| {
            Ok(match path {
                "gh.create" => Policy::NeedsApproval { message: "create?".into(), rule: "r1".into() },
                "gh.delete" => Policy::Blocked { reason: "deletes are off".into(), rule: "r2".into() },
                _ => Policy::run_by_default(),
            })
        };
        let batch = [
            call(0, "gh.list", json!({})),
            call(1, "gh.create", json!({"n": 1})),
            call(2, "gh.create", json!({"n": 2})),
            call(3, "gh.create", json!({"n": 3})),
            call(4, "gh.create", json!({"n": 4})),
            call(5, "gh.delete", json!({})),
            call(6, "gh.get", json!({})),
            call(7, "search", json!({"query": "x"})),
        ];
        let actions = uncounted(&journal, &decisions, &batch, policy).unwrap();
        assert_eq!(
            actions,
            [
                Action::Replay(StepOutcome::Ok { data: json!([1]) }),
                Action::Call(Allowed::Decision),
                Action::Decline,
                // Pending from the journal: asked by whatever rule it recorded (none here).
                Action::Await { message: "create?".into(), connect: None, rule: None },
                Action::Await { message: "create?".into(), connect: None, rule: Some("r1".into()) },
                Action::Block { reason: "deletes are off".into(), rule: "r2".into() },
                Action::Call(Allowed::By(Allowance::Rule(DEFAULT_RULE.into()))),
                Action::Call(Allowed::Builtin),
            ]
        );

        let diverged = uncounted(&journal, &decisions, &[call(0, "gh.get", json!({}))], policy);
        assert!(matches!(diverged, Err(SandboxError::NonDeterministic(_))));
        let cancelled = uncounted(&journal, &BTreeMap::from([(1, ApprovalAction::Cancel)]), &batch[1..2], policy);
        assert_eq!(cancelled.unwrap(), [Action::Cancel]);
        let ahead = BTreeMap::from([(4, ApprovalAction::Accept), (5, ApprovalAction::Accept)]);
        let planned = uncounted(&journal, &ahead, &batch[4..6], policy).unwrap();
        let blocked = Action::Block { reason: "deletes are off".into(), rule: "r2".into() };
        assert_eq!(planned, [Action::Call(Allowed::Decision), blocked], "a decision never unblocks");
    }

    #[test]
    fn a_call_waiting_for_a_connection_waits_until_there_is_one() {
        let connect = || Ok(Policy::NeedsConnect { source: "crm".into(), message: "connect crm".into() });
        let waits = Action::Await { message: "connect crm".into(), connect: Some("crm".into()), rule: None };
        let batch = [call(0, "crm.list", json!({}))];
        let fresh = Journal::new(Timestamp::from_millis(0), 1);
        let accepted = BTreeMap::from([(0, ApprovalAction::Accept)]);
        // New: it waits, and a decision ahead of time does not connect anything.
        assert_eq!(
            uncounted(&fresh, &BTreeMap::new(), &batch, |_, _| connect()).unwrap(),
            std::slice::from_ref(&waits)
        );
        assert_eq!(uncounted(&fresh, &accepted, &batch, |_, _| connect()).unwrap(), std::slice::from_ref(&waits));
        // Pending: accepted while still not connected, it waits again; once
        // connected it is planned by the policy, so a write still asks for approval.
        let mut journal = Journal::new(Timestamp::from_millis(0), 1);
        journal.add_pending(PendingCall::connect(0, "crm.list", json!({}), "connect crm", "crm"));
        assert_eq!(
            uncounted(&journal, &BTreeMap::new(), &batch, |_, _| Ok(Policy::run_by_default())).unwrap(),
            std::slice::from_ref(&waits)
        );
        assert_eq!(uncounted(&journal, &accepted, &batch, |_, _| connect()).unwrap(), [waits]);
        assert_eq!(
            uncounted(&journal, &accepted, &batch, |_, _| Ok(Policy::run_by_default())).unwrap(),
            [Action::Call(Allowed::By(Allowance::Rule(DEFAULT_RULE.into())))]
        );
        let approve = |_: &str, _: &Value| Ok(Policy::NeedsApproval { message: "write?".into(), rule: "w".into() });
        let asks = Action::Await { message: "write?".into(), connect: None, rule: Some("w".into()) };
        assert_eq!(uncounted(&journal, &accepted, &batch, approve).unwrap(), [asks]);
        let declined = BTreeMap::from([(0, ApprovalAction::Decline)]);
        assert_eq!(uncounted(&journal, &declined, &batch, |_, _| connect()).unwrap(), [Action::Decline]);
    }

    #[test]
    fn an_invalid_call_fails_before_its_policy_and_no_decision_makes_it() {
        let missing = || "missing required argument `title`".to_owned();
        // `gh.create` without a title is invalid; every valid call needs approval.
        let decide = |_: &str, args: &Value| match args.get("title") {
            None => Err(missing()),
            Some(_) => Ok(Policy::NeedsApproval { message: "write?".into(), rule: "w".into() }),
        };
        let fresh = Journal::new(Timestamp::from_millis(0), 1);
        let failed = StepOutcome::Err { code: "invalid_arguments".into(), message: missing() };
        let mut recorded = fresh.clone();
        recorded.record(JournalStep {
            step: 0,
            path: "gh.create".into(),
            args_hash: ArgsHash::of(&json!({})),
            outcome: failed.clone(),
            completed_at: Timestamp::from_millis(5),
        });
        let mut waits_for_connect = fresh.clone();
        waits_for_connect.add_pending(PendingCall::connect(0, "gh.create", json!({}), "connect gh", "gh"));
        let mut waits_for_approval = fresh.clone();
        waits_for_approval.add_pending(PendingCall::new(0, "gh.create", json!({}), "write?"));
        let accept = BTreeMap::from([(0, ApprovalAction::Accept)]);
        let none = BTreeMap::new();
        let asks = Action::Await { message: "write?".into(), connect: None, rule: Some("w".into()) };
        // Step 0 is the invalid call; step 1, a valid write in the same batch.
        let cases = [
            ("new: fails at once", &fresh, &none, Action::Invalid(missing())),
            ("a decision ahead of time does not make it", &fresh, &accept, Action::Invalid(missing())),
            ("journaled: replayed as recorded, not checked again", &recorded, &accept, Action::Replay(failed)),
            (
                "connected at last: checked with the tools now listed",
                &waits_for_connect,
                &accept,
                Action::Invalid(missing()),
            ),
            (
                "pending from before calls were checked, undecided: still waits",
                &waits_for_approval,
                &none,
                Action::Await { message: "write?".into(), connect: None, rule: None },
            ),
            (
                "pending from before calls were checked, approved: made (the call checks it)",
                &waits_for_approval,
                &accept,
                Action::Call(Allowed::Decision),
            ),
        ];
        let batch = [call(0, "gh.create", json!({})), call(1, "gh.create", json!({"title": "t"}))];
        for (case, journal, decisions, first) in cases {
            let planned = uncounted(journal, decisions, &batch, decide).unwrap();
            assert_eq!(planned, [first, asks.clone()], "{case}: the valid write still asks");
        }
    }
}
