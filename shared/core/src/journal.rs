//! The journal of an execution: what deterministic replay needs to re-run code
//! from the start without calling anything twice (a resume is such a replay;
//! see docs/architecture.md, "Invariants").

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Timestamp;

/// SHA-256 of a tool call's arguments in canonical JSON (object keys sorted), hex.
/// Replay compares hashes, so the journal does not have to keep every argument.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ArgsHash(String);

impl ArgsHash {
    pub fn of(args: &Value) -> Self {
        let mut canonical = Vec::new();
        write_canonical(args, &mut canonical);
        // `encode_to_slice`, not `encode`: `encode` builds the text a char at a
        // time, ten times slower, and every tool call is hashed.
        let mut text = [0u8; 64];
        hex::encode_to_slice(Sha256::digest(&canonical), &mut text).expect("64 hex digits for 32 bytes");
        Self(std::str::from_utf8(&text).expect("hex digits are ASCII").to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Key order must not depend on how the map was built (serde_json's
/// `preserve_order` may be switched on by any crate in the build).
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(&Value::String(key.clone()), out);
                out.push(b':');
                write_canonical(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    // Serialising a scalar `Value` into a Vec cannot fail.
    serde_json::to_writer(out, value).expect("scalar JSON serialises");
}

/// How a journaled tool call ended, exactly as the code saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum StepOutcome {
    Ok {
        data: Value,
    },
    /// A successful HTTP call: the code saw `{ok:true, data, http:{status}}`.
    /// A variant of its own, so journals written before it existed read as before.
    HttpOk {
        data: Value,
        status: u16,
    },
    Err {
        code: String,
        message: String,
    },
    /// A person or the model declined the call: it throws in the code.
    Declined {
        message: String,
    },
}

/// A completed tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalStep {
    /// Position in issue order, from 0.
    pub step: u32,
    pub path: String,
    pub args_hash: ArgsHash,
    pub outcome: StepOutcome,
    pub completed_at: Timestamp,
}

/// A call that needs a decision before it may run. Its arguments are kept in
/// full: the approver must see them and the approved call must use them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCall {
    pub step: u32,
    pub path: String,
    pub args: Value,
    pub args_hash: ArgsHash,
    /// What the approver is asked, e.g. "github.issues.create wants to run".
    pub message: String,
    /// The source (namespace) the owner must connect (OAuth) before the call
    /// can run: a `connect` pause rather than an approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<String>,
    /// The policy rule that asked for the approval (`None`: the default,
    /// writes ask), for the audit trail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl PendingCall {
    pub fn new(step: u32, path: impl Into<String>, args: Value, message: impl Into<String>) -> Self {
        let args_hash = ArgsHash::of(&args);
        Self { step, path: path.into(), args, args_hash, message: message.into(), connect: None, rule: None }
    }

    /// The same call, asked for by the policy rule `rule`.
    pub fn asked_by(self, rule: impl Into<String>) -> Self {
        Self { rule: Some(rule.into()), ..self }
    }

    /// A call that waits for its owner to connect `source`.
    pub fn connect(step: u32, path: impl Into<String>, args: Value, message: impl Into<String>, source: &str) -> Self {
        Self { connect: Some(source.to_owned()), ..Self::new(step, path, args, message) }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// `Date.now()` before the first completed step.
    pub started_at: Timestamp,
    /// Seed of `Math.random()`.
    pub seed: u64,
    /// Completed calls, sorted by step.
    pub steps: Vec<JournalStep>,
    /// Calls waiting for approval, sorted by step.
    pub pending: Vec<PendingCall>,
}

/// What replay does with the call the code makes at a step.
#[derive(Debug, PartialEq, Eq)]
pub enum Replay<'a> {
    /// Completed earlier: hand back this outcome, call nothing.
    Recorded(&'a JournalStep),
    /// The call the execution paused on; it runs only with an approval.
    Pending(&'a PendingCall),
    /// Not in the journal: a new call.
    New,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "non-deterministic replay at step {step}: the code now calls `{actual_path}`{args} where the \
     journal recorded `{expected_path}`; resumed code must make the same tool calls with the same \
     arguments in the same order, so branch only on tool results, Date (the same clock, in UTC, on every \
     host) and Math.random",
    args = if *.args_differ { " with different arguments" } else { "" }
)]
pub struct NonDeterministicReplay {
    pub step: u32,
    pub expected_path: String,
    pub actual_path: String,
    pub args_differ: bool,
}

impl Journal {
    pub fn new(started_at: Timestamp, seed: u64) -> Self {
        Self { started_at, seed, steps: Vec::new(), pending: Vec::new() }
    }

    /// Match the call made at `step` against the journal.
    pub fn check(&self, step: u32, path: &str, args_hash: &ArgsHash) -> Result<Replay<'_>, NonDeterministicReplay> {
        let recorded = |expected_path: &str, expected_hash: &ArgsHash| {
            if expected_path == path && expected_hash == args_hash {
                Ok(())
            } else {
                Err(NonDeterministicReplay {
                    step,
                    expected_path: expected_path.to_owned(),
                    actual_path: path.to_owned(),
                    args_differ: expected_hash != args_hash,
                })
            }
        };
        if let Some(done) = self.completed(step) {
            recorded(&done.path, &done.args_hash)?;
            return Ok(Replay::Recorded(done));
        }
        if let Some(pending) = self.pending.iter().find(|p| p.step == step) {
            recorded(&pending.path, &pending.args_hash)?;
            return Ok(Replay::Pending(pending));
        }
        Ok(Replay::New)
    }

    pub fn completed(&self, step: u32) -> Option<&JournalStep> {
        self.steps.binary_search_by_key(&step, |s| s.step).ok().map(|i| &self.steps[i])
    }

    /// Record a completed call; it is no longer pending.
    pub fn record(&mut self, done: JournalStep) {
        self.pending.retain(|p| p.step != done.step);
        match self.steps.binary_search_by_key(&done.step, |s| s.step) {
            Ok(i) => self.steps[i] = done,
            Err(i) => self.steps.insert(i, done),
        }
    }

    /// Ask for a decision on a call.
    pub fn add_pending(&mut self, call: PendingCall) {
        let at = self.pending.partition_point(|p| p.step < call.step);
        if self.pending.get(at).is_some_and(|p| p.step == call.step) {
            self.pending[at] = call;
        } else {
            self.pending.insert(at, call);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn step(n: u32, path: &str, args: Value) -> JournalStep {
        JournalStep {
            step: n,
            path: path.into(),
            args_hash: ArgsHash::of(&args),
            outcome: StepOutcome::Ok { data: json!({"n": n}) },
            completed_at: Timestamp::from_millis(1_000 + u64::from(n)),
        }
    }

    #[test]
    fn args_hash_ignores_key_order_but_not_values() {
        let a = ArgsHash::of(&json!({"b": 1, "a": [1, {"y": "x", "x": null}]}));
        let b = ArgsHash::of(&json!({"a": [1, {"x": null, "y": "x"}], "b": 1}));
        assert_eq!(a, b);
        assert_ne!(a, ArgsHash::of(&json!({"b": 2, "a": [1, {"y": "x", "x": null}]})));
        assert_ne!(ArgsHash::of(&json!([1, 2])), ArgsHash::of(&json!([2, 1])));
        assert_ne!(ArgsHash::of(&json!("1")), ArgsHash::of(&json!(1)));
    }

    #[test]
    fn replay_matches_calls_against_the_journal() {
        let mut journal = Journal::new(Timestamp::from_millis(1_000), 7);
        journal.record(step(0, "gh.issues.list", json!({"repo": "x"})));
        journal.add_pending(PendingCall::new(1, "gh.issues.create", json!({"title": "t"}), "create?"));
        let h = |v: Value| ArgsHash::of(&v);

        type Case = (u32, &'static str, Value, Result<&'static str, (bool, &'static str)>);
        let cases: Vec<Case> = vec![
            (0, "gh.issues.list", json!({"repo": "x"}), Ok("recorded")),
            (0, "gh.issues.list", json!({"repo": "y"}), Err((true, "gh.issues.list"))),
            (0, "gh.repos.get", json!({"repo": "x"}), Err((false, "gh.issues.list"))),
            (1, "gh.issues.create", json!({"title": "t"}), Ok("pending")),
            (1, "gh.issues.create", json!({"title": "u"}), Err((true, "gh.issues.create"))),
            (2, "anything", json!(null), Ok("new")),
        ];
        for (n, path, args, expected) in cases {
            let got = journal.check(n, path, &h(args.clone()));
            match (got, expected) {
                (Ok(Replay::Recorded(s)), Ok("recorded")) => assert_eq!(s.step, n),
                (Ok(Replay::Pending(p)), Ok("pending")) => assert_eq!(p.step, n),
                (Ok(Replay::New), Ok("new")) => {}
                (Err(e), Err((args_differ, expected_path))) => {
                    assert_eq!(e.args_differ, args_differ, "step {n} {path}");
                    assert_eq!(e.expected_path, expected_path);
                    assert_eq!(e.actual_path, path);
                    assert!(e.to_string().contains("non-deterministic replay"));
                }
                (got, expected) => panic!("step {n} {path} {args}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn outcomes_serialise_compatibly() {
        let cases = [
            (StepOutcome::Ok { data: json!([1]) }, json!({"outcome": "ok", "data": [1]})),
            (
                StepOutcome::HttpOk { data: json!({}), status: 201 },
                json!({"outcome": "http_ok", "data": {}, "status": 201}),
            ),
            (
                StepOutcome::Err { code: "c".into(), message: "m".into() },
                json!({"outcome": "err", "code": "c", "message": "m"}),
            ),
        ];
        for (outcome, encoded) in cases {
            assert_eq!(serde_json::to_value(&outcome).unwrap(), encoded);
            assert_eq!(serde_json::from_value::<StepOutcome>(encoded).unwrap(), outcome);
        }
    }

    #[test]
    fn recording_keeps_step_order_and_clears_pending() {
        let mut journal = Journal::new(Timestamp::from_millis(0), 1);
        journal.add_pending(PendingCall::new(3, "a.w", json!({}), "?"));
        journal.add_pending(PendingCall::new(1, "a.w", json!({}), "?"));
        // Parallel calls complete out of issue order.
        journal.record(step(2, "a.r", json!({})));
        journal.record(step(0, "a.r", json!({})));
        journal.record(step(1, "a.w", json!({})));
        let order: Vec<u32> = journal.steps.iter().map(|s| s.step).collect();
        assert_eq!(order, [0, 1, 2]);
        let pending: Vec<u32> = journal.pending.iter().map(|p| p.step).collect();
        assert_eq!(pending, [3]);
    }
}
