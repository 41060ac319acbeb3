//! Executions in tasks on a host's runtime (`executor_sandbox::tokio_runtime`),
//! as servers and Lambda functions run them: on the worker thread at first,
//! moved off it past the inline budget (started over, its calls replayed from
//! the journal), with contexts freed and prepared while workers are idle.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use executor_sandbox::{CallContext, Limits, Outcome, Policy, PolicyCall, Sandbox, ToolOutcome, Tools};
use serde_json::{Value, json};
use support::{TestTools, completed, error_code, segment};
use tokio::runtime::Runtime;

/// Run `code` in a task on `runtime`, as a host's request handler does.
fn in_task(runtime: &Runtime, sandbox: &Sandbox, tools: Arc<dyn Tools>, code: &str) -> Outcome {
    let (sandbox, segment) = (sandbox.clone(), segment(code));
    runtime.block_on(runtime.spawn(async move { sandbox.run(segment, tools).await })).unwrap()
}

/// `t.ticks` reads a counter another task advances; every step it is called
/// for is recorded.
#[derive(Default)]
struct Ticks {
    ticks: Arc<AtomicU64>,
    steps: Mutex<Vec<u32>>,
}

#[async_trait]
impl Tools for Ticks {
    fn validate(&self, _: &str, _: &Value) -> Result<(), String> {
        Ok(())
    }
    fn policy(&self, _: &PolicyCall<'_>) -> Policy {
        Policy::run_by_default()
    }
    fn effect(&self, _: &str) -> Option<executor_core::Effect> {
        None
    }
    async fn call(&self, _: &str, _: Value, ctx: &CallContext) -> ToolOutcome {
        self.steps.lock().unwrap().push(ctx.step);
        Ok(json!(self.ticks.load(Ordering::SeqCst)))
    }
    async fn search(&self, _: Value) -> ToolOutcome {
        Ok(json!([]))
    }
    async fn describe(&self, _: Value) -> ToolOutcome {
        Ok(json!(null))
    }
}

#[test]
fn a_long_run_moves_off_the_worker_and_makes_no_call_twice() {
    // One worker: while an execution holds it, no other task runs.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .on_thread_park(executor_sandbox::tidy)
        .build()
        .unwrap();
    let tools = Arc::new(Ticks::default());
    let ticks = tools.ticks.clone();
    let ticker = runtime.spawn(async move {
        loop {
            ticks.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
        }
    });
    // The counter cannot move while the run holds the only worker, so this
    // loop ends only once the run has moved off it (else: the CPU limit).
    let code = "const first = (await tools.t.ticks()).data;\n\
                let spins = 0;\n\
                while ((await tools.t.ticks()).data === first) { for (let i = 0; i < 20000; i++) spins += i % 2; }\n\
                return spins > 0";
    let sandbox = Sandbox::new(Limits { cpu: std::time::Duration::from_secs(5), ..Limits::default() });
    let outcome = in_task(&runtime, &sandbox, tools.clone(), code);
    ticker.abort();
    assert_eq!(completed(&outcome), &json!(true));
    let mut steps = tools.steps.lock().unwrap().clone();
    let made = steps.len();
    steps.sort_unstable();
    steps.dedup();
    assert_eq!(steps.len(), made, "a call made twice: {steps:?}");
    assert_eq!(steps, (0..made as u32).collect::<Vec<_>>(), "every step made once, in order");
    assert!(made >= 2);
}

#[test]
fn a_moved_run_sees_the_same_clock_and_random_numbers() {
    let runtime = executor_sandbox::tokio_runtime().unwrap();
    let tools = TestTools::new();
    let sandbox = support::sandbox(&tools, Limits::default());
    // Far past the inline budget, with a tool call on each side of the work.
    let code = "const before = [Math.random(), Date.now(), (await tools.svc.a({})).ok];\n\
                let x = 0; for (let i = 0; i < 3000000; i++) x += i % 7;\n\
                const after = (await tools.svc.b({x})).data.args.x;\n\
                return [...before, Math.random(), Date.now(), after]";
    let on_worker = in_task(&runtime, &sandbox, tools.clone(), code);
    let made_on_worker = tools.calls();
    // The same code where blocking is fine (a `block_on` caller's thread): never moved.
    let blocking = runtime.block_on(sandbox.run(segment(code), tools.clone()));
    assert_eq!(completed(&on_worker)[5], json!(3000000 / 7 * 21 + (0..3000000 % 7).sum::<i64>()));
    let first_four = |outcome: &Outcome| completed(outcome).as_array().unwrap()[..4].to_vec();
    assert_eq!(first_four(&on_worker), first_four(&blocking));
    assert_eq!(completed(&on_worker)[4], json!(support::START + 2000), "pinned to the second call's completion");
    assert_eq!(made_on_worker.len(), 2, "each call once: {made_on_worker:?}");
}

#[test]
fn contexts_reset_while_idle_start_clean_each_time() {
    let runtime = executor_sandbox::tokio_runtime().unwrap();
    let tools = TestTools::new();
    let sandbox = support::sandbox(&tools, Limits { cpu: std::time::Duration::from_millis(200), ..Limits::default() });
    let polluter = "globalThis.secret = 'alice'; try { Object.prototype.polluted = 1 } catch (e) {}\n\
                    try { JSON.stringify = () => 'hijacked' } catch (e) {} tools.svc.unawaited({}); return 1";
    let checker = "return [typeof globalThis.secret, ({}).polluted, Math.leak, JSON.stringify({a: 1})]";
    let spinner = "(async () => { for (;;) await null })(); return 1";
    for _ in 0..4 {
        assert_eq!(completed(&in_task(&runtime, &sandbox, tools.clone(), polluter)), &json!(1));
        assert_eq!(
            completed(&in_task(&runtime, &sandbox, tools.clone(), checker)),
            &json!(["undefined", null, null, "{\"a\":1}"])
        );
        // Moved off the worker, then stopped by its CPU limit; the next run is clean.
        assert_eq!(error_code(&in_task(&runtime, &sandbox, tools.clone(), spinner)), "cpu_limit");
        assert_eq!(completed(&in_task(&runtime, &sandbox, tools.clone(), "return 2")), &json!(2));
    }
    assert!(tools.calls().is_empty(), "an unawaited call is never made: {:?}", tools.calls());
}
