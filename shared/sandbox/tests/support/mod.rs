//! A real `Tools` implementation for tests: in-process tools with a policy by
//! prefix, a record of every call made, and a clock that advances per call.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use executor_core::{Clock, ExecutionId, Timestamp};
use executor_sandbox::{
    CallContext, Limits, Outcome, Policy, PolicyCall, Sandbox, Segment, ToolError, ToolOutcome, Tools,
};
use serde_json::{Value, json};

pub const START: u64 = 1_700_000_000_000;

/// Tools by prefix: `w.*` need approval, `x.*` are blocked, `slow.*` sleep for
/// `args.ms`, `fail.*` fail; everything else echoes its arguments. Any call
/// with a `bad` argument is invalid.
#[derive(Default)]
pub struct TestTools {
    pub calls: Mutex<Vec<(String, Value, String)>>,
    pub made: AtomicU64,
}

impl TestTools {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().iter().map(|(p, a, _)| (p.clone(), a.clone())).collect()
    }
}

#[async_trait]
impl Tools for TestTools {
    fn validate(&self, path: &str, args: &Value) -> Result<(), String> {
        match args.get("bad") {
            Some(_) => Err(format!("unknown argument `bad`; tools.{path} takes no such argument")),
            None => Ok(()),
        }
    }

    fn policy(&self, call: &PolicyCall<'_>) -> Policy {
        let path = call.path;
        if path.starts_with("w.") {
            Policy::NeedsApproval { message: format!("{path} wants to write"), rule: "writes".into() }
        } else if path.starts_with("x.") {
            Policy::Blocked { reason: format!("{path} is blocked by policy"), rule: "blocked".into() }
        } else {
            Policy::run_by_default()
        }
    }

    fn effect(&self, path: &str) -> Option<executor_core::Effect> {
        Some(if path.starts_with("w.") { executor_core::Effect::Write } else { executor_core::Effect::Read })
    }

    async fn call(&self, path: &str, args: Value, ctx: &CallContext) -> ToolOutcome {
        self.calls.lock().unwrap().push((path.to_owned(), args.clone(), ctx.idempotency_key()));
        self.made.fetch_add(1, Ordering::SeqCst);
        if path.starts_with("slow.") {
            let ms = args["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if path.starts_with("fail.") {
            return Err(ToolError { code: "upstream_error".into(), message: format!("{path} failed") });
        }
        Ok(json!({ "path": path, "args": args }))
    }

    async fn search(&self, request: Value) -> ToolOutcome {
        self.made.fetch_add(1, Ordering::SeqCst);
        let query = request["query"].as_str().unwrap_or("").to_owned();
        Ok(
            json!({ "items": [{ "path": "gh.issues.list", "description": format!("matches {query}"), "namespace": "gh" }], "total": 1 }),
        )
    }

    async fn describe(&self, request: Value) -> ToolOutcome {
        self.made.fetch_add(1, Ordering::SeqCst);
        match request["path"].as_str() {
            Some("gh.issues.list") => Ok(json!("declare function list(input: { repo: string }): Promise<Issue[]>")),
            other => Err(ToolError { code: "not_found".into(), message: format!("no tool at {other:?}") }),
        }
    }
}

/// Time = START + 1 s per tool call made so far, so a run and its paused-and-
/// resumed twin see the same completion times.
pub struct CallClock(pub Arc<TestTools>);

impl std::fmt::Debug for CallClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallClock")
    }
}

impl Clock for CallClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(START + 1000 * self.0.made.load(Ordering::SeqCst))
    }
}

pub fn sandbox(tools: &Arc<TestTools>, limits: Limits) -> Sandbox {
    Sandbox::with_clock(limits, Arc::new(CallClock(tools.clone())))
}

pub fn segment(code: &str) -> Segment {
    Segment::start(ExecutionId::parse("exec1").unwrap(), code, Timestamp::from_millis(START), 42)
}

/// Run fresh code with default limits.
pub async fn run(code: &str) -> (Outcome, Arc<TestTools>) {
    let tools = TestTools::new();
    let outcome = sandbox(&tools, Limits::default()).run(segment(code), tools.clone()).await;
    (outcome, tools)
}

pub fn completed(outcome: &Outcome) -> &Value {
    match outcome {
        Outcome::Completed { result, .. } => result,
        other => panic!("expected completion, got {other:?}"),
    }
}

pub fn error_code(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Failed { error, .. } => error.code(),
        other => panic!("expected failure, got {other:?}"),
    }
}
