//! Every limit, and code written to break out or bring the host down. After
//! each, the same sandbox must still run ordinary code.

mod support;

use std::time::{Duration, Instant};

use executor_sandbox::{Limits, Outcome};
use serde_json::json;
use support::*;

/// Run `code` under `limits`, expect `code_expected`, then prove the host is healthy.
async fn refused(code: &str, limits: Limits, code_expected: &str) -> Outcome {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, limits);
    let outcome = sandbox.run(segment(code), tools.clone()).await;
    assert_eq!(error_code(&outcome), code_expected, "{code}: {outcome:?}");
    let after = sandbox.run(segment("return 40 + 2"), tools.clone()).await;
    assert_eq!(completed(&after), &json!(42), "the sandbox still works after {code}");
    outcome
}

fn quick() -> Limits {
    Limits { cpu: Duration::from_millis(300), wall_clock: Duration::from_secs(3), ..Limits::default() }
}

#[tokio::test]
async fn infinite_loops_hit_the_cpu_limit() {
    for code in [
        "while (true) {}",
        "for (;;) { try { while (true) {} } catch (e) {} }",
        "while (true) { try { for (;;) {} } finally { continue } }",
        "await Promise.resolve(); while (true) {}",
        "const spin = async () => { for (;;) await null }; await spin()",
    ] {
        let started = Instant::now();
        refused(code, quick(), "cpu_limit").await;
        assert!(started.elapsed() < Duration::from_secs(3), "{code} was stopped promptly");
    }
}

#[tokio::test]
async fn cpu_clock_stops_while_tools_are_in_flight() {
    let tools = TestTools::new();
    let limits = Limits { cpu: Duration::from_millis(200), ..Limits::default() };
    let code = "for (let i = 0; i < 4; i++) await tools.slow.op({ms: 100}); return 'done'";
    let outcome = sandbox(&tools, limits).run(segment(code), tools.clone()).await;
    assert_eq!(completed(&outcome), &json!("done"), "400 ms waiting on tools is not CPU time");
}

#[tokio::test]
async fn wall_clock_limit_covers_tool_calls() {
    let limits = Limits { wall_clock: Duration::from_millis(300), ..Limits::default() };
    refused("await tools.slow.op({ms: 5000}); return 1", limits, "wall_clock_limit").await;
}

#[tokio::test]
async fn memory_bombs_hit_the_memory_limit() {
    // CPU to spare: on a loaded machine the memory limit must still be what trips.
    let limits =
        Limits { memory_bytes: 16 << 20, cpu: Duration::from_secs(20), wall_clock: Duration::from_secs(30), ..quick() };
    for code in [
        "const a = []; while (true) a.push(new Array(100000).fill(1.5));",
        "const m = new Map(); for (let i = 0; ; i++) m.set(i, {i, s: 'v' + i});",
        "return new Array(1 << 26).fill(0).length",
    ] {
        refused(code, limits.clone(), "memory_limit").await;
    }
    // Doubling a string hits QuickJS's length cap first: a clear error all the same.
    let outcome = refused("let s = 'x'; while (true) s = s + s;", limits, "runtime_error").await;
    let Outcome::Failed { error, .. } = outcome else { unreachable!() };
    assert!(error.to_string().contains("string too long"), "{error}");
}

#[tokio::test]
async fn garbage_is_collected_during_a_run_long_before_the_limit() {
    // Ten times the limit in short-lived cycles (which only a collection
    // frees): the run completes, so collections happen well under the limit.
    let limits = Limits { memory_bytes: 16 << 20, cpu: Duration::from_secs(20), ..Limits::default() };
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, limits);
    let code = "let kept = 0;\n\
                for (let i = 0; i < 200; i++) {\n\
                  const batch = [];\n\
                  for (let j = 0; j < 4000; j++) { const a = {j, s: 'x'.repeat(16)}; a.self = a; batch.push(a); }\n\
                  kept += batch.length;\n\
                }\n\
                return kept";
    let outcome = sandbox.run(segment(code), tools.clone()).await;
    assert_eq!(completed(&outcome), &json!(800_000), "{outcome:?}");
}

#[tokio::test]
async fn deep_recursion_hits_the_stack_limit() {
    refused("function f(n) { return f(n + 1) + 1 } return f(0)", quick(), "stack_limit").await;
    refused("const f = async n => 1 + await f(n + 1); return await f(0)", quick(), "stack_limit").await;
}

#[tokio::test]
async fn code_and_nesting_are_capped_before_parsing() {
    let limits = Limits { code_bytes: 1000, ..quick() };
    refused(&format!("return '{}'", "a".repeat(2000)), limits, "code_too_large").await;
    let deep = format!("return {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    refused(&deep, quick(), "code_too_deep").await;
    let arrays = format!("return {}{}", "[".repeat(50_000), "]".repeat(50_000));
    refused(&arrays, quick(), "code_too_deep").await;
}

#[tokio::test]
async fn deep_constructs_without_brackets_do_not_crash_the_host() {
    for code in [
        // Each as deep as the default code-size limit allows.
        format!("let a; return {}1", "a = ".repeat(65_000)),
        format!("return {}1", "!".repeat(260_000)),
        format!("return {}1", "- ".repeat(130_000)),
        format!("return {}0", "1 ? 1 : ".repeat(32_000)),
        format!("return {}1", "x => ".repeat(52_000)),
        format!("return 1{}", " + 1".repeat(65_000)),
        format!("return `{}`", "${`".repeat(40_000)),
    ] {
        let tools = TestTools::new();
        let sandbox = sandbox(&tools, quick());
        // Any outcome but a crash: a clean result or a clear error.
        let _ = sandbox.run(segment(&code), tools.clone()).await;
        assert_eq!(completed(&sandbox.run(segment("return 1"), tools.clone()).await), &json!(1));
    }
}

#[tokio::test]
async fn results_are_capped() {
    let limits = Limits { result_bytes: 1000, ..quick() };
    refused("return 'x'.repeat(5000)", limits, "result_too_large").await;
}

#[tokio::test]
async fn huge_strings_and_outputs_stay_contained() {
    let limits = Limits { log_bytes: 1000, memory_bytes: 32 << 20, ..quick() };
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, limits);
    let outcome =
        sandbox.run(segment("console.log('y'.repeat(5_000_000)); return 'x'.repeat(100)"), tools.clone()).await;
    let Outcome::Completed { logs, .. } = outcome else { panic!("{outcome:?}") };
    assert!(logs.iter().map(String::len).sum::<usize>() <= 1100, "logs stay under the cap");
}

#[tokio::test]
async fn escape_attempts_find_nothing() {
    let code = r#"
        const found = [];
        const F = (() => {}).constructor.constructor;
        found.push(typeof F('return this')().fetch);
        found.push(typeof Function('return globalThis')().process);
        found.push(({}).constructor.constructor('return typeof require')());
        try { Object.getPrototypeOf(tools).x = 1 } catch (e) { found.push('proto: ' + e.name) }
        try { tools.__proto__.polluted = 1 } catch (e) { found.push('set: ' + e.name) }
        found.push(typeof tools.constructor);
        found.push(Object.getOwnPropertyNames(globalThis).filter(n => /host|executor|__/i.test(n)).join(','));
        try { globalThis.tools = null } catch (e) { found.push('frozen: ' + e.name) }
        found.push(typeof eval('1 + 1'));
        return found"#;
    let (outcome, tools) = run(code).await;
    let found = completed(&outcome);
    assert_eq!(found[0], json!("undefined"));
    assert_eq!(found[1], json!("undefined"));
    assert_eq!(found[2], json!("undefined"));
    assert!(!found.to_string().contains("polluted"));
    assert!(found.as_array().unwrap().contains(&json!("")), "no host helpers on globalThis: {found}");
    assert_eq!(tools.calls().len(), 0, "probing the proxy makes no calls: {:?}", tools.calls());
}

#[tokio::test]
async fn executions_share_no_state() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, quick());
    let first =
        sandbox.run(segment("globalThis.secret = 'alice'; Array.prototype.leak = 1; return 1"), tools.clone()).await;
    assert_eq!(completed(&first), &json!(1));
    let second = sandbox.run(segment("return [typeof globalThis.secret, typeof [].leak]"), tools.clone()).await;
    assert_eq!(completed(&second), &json!(["undefined", "undefined"]));
}

#[tokio::test]
async fn many_hostile_runs_in_parallel_leave_the_host_healthy() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, Limits { memory_bytes: 8 << 20, ..quick() });
    let runs = (0..8).map(|i| {
        let (sandbox, tools) = (sandbox.clone(), tools.clone());
        let code = if i % 2 == 0 { "while (true) {}" } else { "const a = []; for (;;) a.push('x'.repeat(1000))" };
        tokio::spawn(async move { sandbox.run(segment(code), tools).await })
    });
    for run in runs {
        assert!(matches!(run.await.unwrap(), Outcome::Failed { .. }));
    }
    assert_eq!(completed(&sandbox.run(segment("return 'ok'"), tools.clone()).await), &json!("ok"));
}

/// On a multi-threaded runtime consecutive executions run on the same thread and
/// reuse its QuickJS runtime; each still starts from a clean context.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_reused_runtime_carries_nothing_over() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, quick());
    let first = "globalThis.secret = 'alice'; Object.prototype.polluted = 1; Math.leak = 2;\n\
                 Date.prototype.toJSON = () => 'x'; JSON.stringify = () => 'hijacked'; Symbol.for('k');\n\
                 tools.svc.unawaited({}); return 1";
    assert_eq!(completed(&sandbox.run(segment(first), tools.clone()).await), &json!(1));
    let second = "return [typeof globalThis.secret, ({}).polluted, Math.leak, JSON.stringify({a: 1}), \
                  JSON.stringify(new Date(0))]";
    assert_eq!(
        completed(&sandbox.run(segment(second), tools.clone()).await),
        &json!(["undefined", null, null, "{\"a\":1}", "\"1970-01-01T00:00:00.000Z\""])
    );
    // Work left running by one execution is that execution's CPU, never the next one's.
    let spinner = "(async () => { for (;;) await null })(); return 1";
    assert_eq!(error_code(&sandbox.run(segment(spinner), tools.clone()).await), "cpu_limit");
    assert_eq!(completed(&sandbox.run(segment("return 2"), tools.clone()).await), &json!(2));
    assert!(tools.calls().is_empty(), "an unawaited call is never made: {:?}", tools.calls());
}
