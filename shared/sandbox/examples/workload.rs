//! One of the `execution` bench's workloads run a given number of times, for
//! counting instructions with callgrind (`scripts/profile-sandbox`): three
//! warm-up runs, then the measured runs inside `measured`.
//!
//! `cargo run --release -p executor-sandbox --example workload -- W1 [RUNS]`

use std::sync::Arc;

use executor_core::{ExecutionId, Timestamp};
use executor_sandbox::{Limits, Outcome, Sandbox, Segment, Tools};

#[path = "../benches/support/workloads.rs"]
mod workloads;
use workloads::Echo;

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

/// The runs callgrind counts (`--toggle-collect=*workload::measured*`): on the
/// request path, the last context freed and the next prepared (`tidy`)
/// between runs, uncounted, as a host's idle workers do; with `WHOLE=1`,
/// back to back, that work included.
fn measure(
    runtime: &tokio::runtime::Runtime,
    sandbox: &Sandbox,
    tools: &Arc<dyn Tools>,
    code: &'static str,
    runs: u32,
) {
    let whole = std::env::var_os("WHOLE").is_some_and(|v| v == "1");
    for _ in 0..runs {
        if !whole {
            executor_sandbox::tidy();
        }
        measured(runtime, sandbox, tools, code);
    }
}

#[inline(never)]
fn measured(runtime: &tokio::runtime::Runtime, sandbox: &Sandbox, tools: &Arc<dyn Tools>, code: &'static str) {
    run_once(runtime, sandbox, tools, code);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "W1".into());
    let runs = args.next().map_or(10, |n| n.parse().expect("RUNS is a number"));
    let code = workloads::ALL
        .iter()
        .find(|(label, _)| label.split(' ').next() == Some(name.as_str()))
        .map(|(_, code)| *code)
        .unwrap_or_else(|| panic!("unknown workload {name}: W1, W2, W3 or W4"));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let tools: Arc<dyn Tools> = Arc::new(Echo);
    let sandbox = Sandbox::new(Limits::default());
    for _ in 0..3 {
        run_once(&runtime, &sandbox, &tools, code);
    }
    measure(&runtime, &sandbox, &tools, code, runs);
}
