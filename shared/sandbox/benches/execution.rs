//! Executions through `Sandbox::run`: on the request path (`execution/`), and
//! whole, context creation and freeing included (`execution-whole/`); see
//! docs/benchmarks.md.
//! `cargo bench -p executor-sandbox --bench execution`

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use executor_core::{ApprovalAction, ExecutionId, Timestamp};
use executor_sandbox::{Limits, Outcome, Sandbox, Segment, Snapshot, Tools};

#[path = "support/workloads.rs"]
mod workloads;
use workloads::Echo;

fn segment(code: &str) -> Segment {
    Segment::start(ExecutionId::parse("bench").unwrap(), code, Timestamp::from_millis(0), 7)
}

/// 100 journaled reads, then a write that pauses: resuming it replays 100 steps.
const REPLAY: &str = "let n = 0; for (let i = 0; i < 100; i++) n += (await tools.svc.read({i})).data.i;\n\
                      await tools.w.write({n}); return n";

fn workloads(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let tools: Arc<dyn Tools> = Arc::new(Echo);
    let sandbox = Sandbox::new(Limits::default());
    let run = |code: &'static str| {
        let (sandbox, tools) = (sandbox.clone(), tools.clone());
        move || {
            let (sandbox, tools) = (sandbox.clone(), tools.clone());
            async move {
                let outcome = sandbox.run(segment(code), tools).await;
                assert!(matches!(outcome, Outcome::Completed { .. }), "{outcome:?}");
            }
        }
    };
    // The request path: what an execution takes when its thread was idle
    // before it, as a host's workers are between requests; the last
    // execution's context freed and this one's prepared (`tidy`), untimed.
    let mut group = c.benchmark_group("execution");
    for (name, code) in workloads::ALL {
        let run = run(code);
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut spent = Duration::ZERO;
                for _ in 0..iterations {
                    executor_sandbox::tidy();
                    let started = Instant::now();
                    runtime.block_on(run());
                    spent += started.elapsed();
                }
                spent
            })
        });
    }
    group.finish();
    // Whole executions back to back, freeing and preparing included: what a
    // host with no idle moment pays per execution.
    let mut group = c.benchmark_group("execution-whole");
    for (name, code) in workloads::ALL {
        group.bench_function(name, |b| b.to_async(&runtime).iter(run(code)));
    }
    group.finish();

    let mut group = c.benchmark_group("replay");

    let paused = runtime.block_on(sandbox.run(segment(REPLAY), tools.clone()));
    let Outcome::Paused { snapshot, .. } = paused else { panic!("{paused:?}") };
    assert_eq!(snapshot.journal.steps.len(), 100);
    group.bench_function("replay 100-step journal", |b| {
        b.to_async(&runtime).iter(|| {
            let (sandbox, tools, snapshot) = (sandbox.clone(), tools.clone(), snapshot.clone());
            async move {
                let segment = Segment::resume(ExecutionId::parse("bench").unwrap(), snapshot, ApprovalAction::Accept);
                let outcome = sandbox.run(segment, tools).await;
                assert!(matches!(outcome, Outcome::Completed { .. }), "{outcome:?}");
            }
        })
    });
    let encoded = serde_json::to_vec(&snapshot).unwrap();
    group.bench_function("snapshot encode (100 steps)", |b| b.iter(|| serde_json::to_vec(&snapshot).unwrap()));
    group.bench_function("snapshot decode (100 steps)", |b| {
        b.iter(|| serde_json::from_slice::<Snapshot>(&encoded).unwrap())
    });
    group.finish();
}

criterion_group!(benches, workloads);
criterion_main!(benches);
