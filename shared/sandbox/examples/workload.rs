//! One of the `execution` bench's workloads run a given number of times, for
//! counting instructions with callgrind (`scripts/profile-sandbox`): three
//! warm-up runs, then the measured runs inside `measured`.
//!
//! `cargo run --release -p executor-sandbox --example workload -- W1 [RUNS]`

use std::sync::Arc;

use async_trait::async_trait;
use executor_core::{ExecutionId, Timestamp};
use executor_sandbox::{CallContext, Limits, Outcome, Policy, Sandbox, Segment, ToolOutcome, Tools};
use serde_json::Value;

/// A host tool that returns its arguments, as in the bench.
struct Echo;

#[async_trait]
impl Tools for Echo {
    fn policy(&self, _: &str, _: &Value) -> Policy {
        Policy::Run
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

/// The bench's workloads (benches/execution.rs).
fn code(name: &str) -> Option<&'static str> {
    Some(match name {
        "W1" => "return 1 + 2",
        "W2" => "let s = 0; for (let i = 0; i < 100000; i++) s += i % 7; return s",
        "W3" => {
            "const items = []; for (let i = 0; i < 1000; i++) items.push({id: i, name: 'item ' + i, tags: ['a', 'b', 'c']});\n\
             return JSON.parse(JSON.stringify(items)).length"
        }
        "W4" => "for (let i = 0; i < 20; i++) await tools.echo({i}); return 'done'",
        _ => return None,
    })
}

/// On the calling thread, as criterion's `to_async` does; with `SPAWNED=1`, on a
/// tokio worker thread, as a server does.
fn run_once(runtime: &tokio::runtime::Runtime, sandbox: &Sandbox, tools: &Arc<dyn Tools>, code: &'static str) {
    let segment = Segment::start(ExecutionId::parse("bench").unwrap(), code, Timestamp::from_millis(0), 7);
    let outcome = if std::env::var_os("SPAWNED").is_some_and(|v| v == "1") {
        let (sandbox, tools) = (sandbox.clone(), tools.clone());
        runtime.block_on(runtime.spawn(async move { sandbox.run(segment, tools).await })).unwrap()
    } else {
        runtime.block_on(sandbox.run(segment, tools.clone()))
    };
    assert!(matches!(outcome, Outcome::Completed { .. }), "{outcome:?}");
}

/// The runs callgrind counts (`--toggle-collect=*workload::measured*`).
#[inline(never)]
fn measured(
    runtime: &tokio::runtime::Runtime,
    sandbox: &Sandbox,
    tools: &Arc<dyn Tools>,
    code: &'static str,
    runs: u32,
) {
    for _ in 0..runs {
        run_once(runtime, sandbox, tools, code);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "W1".into());
    let runs = args.next().map_or(10, |n| n.parse().expect("RUNS is a number"));
    let code = code(&name).unwrap_or_else(|| panic!("unknown workload {name}: W1, W2, W3 or W4"));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let tools: Arc<dyn Tools> = Arc::new(Echo);
    let sandbox = Sandbox::new(Limits::default());
    for _ in 0..3 {
        run_once(&runtime, &sandbox, &tools, code);
    }
    measured(&runtime, &sandbox, &tools, code, runs);
}
