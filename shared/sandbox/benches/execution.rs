//! Whole executions, context creation included (see docs/benchmarks.md).
//! `cargo bench -p executor-sandbox --bench execution`

use std::sync::Arc;

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
    let mut group = c.benchmark_group("execution");
    for (name, code) in workloads::ALL {
        group.bench_function(name, |b| b.to_async(&runtime).iter(run(code)));
    }

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
