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
        // Text the host writes for plain data (engine/plain_json.rs) counts against the limit too.
        "const a = new Array(1000).fill('x'.repeat(1000)); const texts = []; while (true) texts.push(JSON.stringify(a));",
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

/// Calls the code makes without waiting are held by the host, outside the
/// QuickJS heap: a round may hold only so much, however the code spends it.
#[tokio::test]
async fn calls_made_without_waiting_are_capped() {
    let limits = Limits { call_bytes: 1 << 20, cpu: Duration::from_secs(5), ..quick() };
    for code in [
        // A few big ones: the same string sent again and again.
        "const s = 'x'.repeat(1 << 16); for (let i = 0; i < 100000; i++) tools.echo.x({s}); return 1",
        // Many tiny ones: each counts its overhead.
        "for (let i = 0; i < 100000; i++) tools.echo.x({}); return 1",
        // Caught nowhere: nothing is thrown to catch, the run just ends.
        "try { for (let i = 0; i < 100000; i++) tools.echo.x({i}); } catch (e) {} return 1",
        // One too big for any round.
        "await tools.echo.x({s: 'x'.repeat(2 << 20)}); return 1",
        // Cut before its first await: the round never starts.
        "const s = 'x'.repeat(1 << 18); tools.echo.a({s}); tools.echo.b({s}); tools.echo.c({s}); tools.echo.d({s}); \
         await null; return 1",
    ] {
        let tools = TestTools::new();
        let sandbox = sandbox(&tools, limits.clone());
        let outcome = sandbox.run(segment(code), tools.clone()).await;
        assert_eq!(error_code(&outcome), "call_bytes_limit", "{code}: {outcome:?}");
        assert!(tools.calls().is_empty(), "no call of the round is made: {code}");
        let after = sandbox.run(segment("return 40 + 2"), tools.clone()).await;
        assert_eq!(completed(&after), &json!(42), "the sandbox still works after {code}");
    }
    // Within the cap: a round of 100 calls, and a run that waits between big calls
    // and so sends more in all than one round may hold.
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, limits);
    let many = "const r = await Promise.all(Array.from({length: 100}, (_, i) => tools.echo.x({i}))); return r.length";
    assert_eq!(completed(&sandbox.run(segment(many), tools.clone()).await), &json!(100));
    let paced = "const s = 'x'.repeat(1 << 16); let n = 0; \
                 for (let i = 0; i < 40; i++) { await tools.echo.x({s}); n++ } return n";
    assert_eq!(completed(&sandbox.run(segment(paced), tools.clone()).await), &json!(40));
}

/// Every answer an execution receives is kept in its journal (a resume
/// replays it), by the host: an execution may keep only so much.
#[tokio::test]
async fn the_answers_an_execution_keeps_are_capped() {
    // CPU to spare (200 calls of 64 KiB take about 0.2 s of a debug build's
    // JavaScript time): on a loaded machine the cap must still be what trips.
    let limits = Limits {
        kept_results_bytes: 1 << 20,
        cpu: Duration::from_secs(10),
        wall_clock: Duration::from_secs(30),
        ..quick()
    };
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, limits.clone());
    // Each answer echoes 64 KiB and a little more: the sixteenth passes 1 MiB.
    let code = "const s = 'x'.repeat(1 << 16); for (let i = 0; i < 1000; i++) await tools.echo.x({s}); return 1";
    let outcome = sandbox.run(segment(code), tools.clone()).await;
    assert_eq!(error_code(&outcome), "kept_results_limit", "{outcome:?}");
    assert_eq!(tools.calls().len(), 16, "the run ends with the answer that passes the cap");
    assert_eq!(completed(&sandbox.run(segment("return 40 + 2"), tools.clone()).await), &json!(42));
    // One round of many calls: once the answers in hand pass the cap, the
    // rest are not made (at most one round's worth of calls in flight, 64).
    let wide = "const s = 'x'.repeat(1 << 16); \
                await Promise.all(Array.from({length: 200}, (_, i) => tools.echo.x({s, i}))); return 1";
    let tools = TestTools::new();
    let outcome = sandbox.run(segment(wide), tools.clone()).await;
    assert_eq!(error_code(&outcome), "kept_results_limit", "{outcome:?}");
    assert!(tools.calls().len() <= 64, "{} of 200 calls made", tools.calls().len());
    // Within the cap, many small answers.
    let small = "let n = 0; for (let i = 0; i < 200; i++) { await tools.echo.x({i}); n++ } return n";
    assert_eq!(completed(&sandbox.run(segment(small), tools.clone()).await), &json!(200));
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
    let first = "globalThis.secret = 'alice'; try { Array.prototype.leak = 1 } catch (e) { return e.name }";
    assert_eq!(completed(&sandbox.run(segment(first), tools.clone()).await), &json!("TypeError"));
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

/// What an attacker's execution tries, in one reused context, to leave for
/// the next: every way to change a global, a built-in, an object only syntax
/// reaches, the `tools` proxy or `console`. Each is tried on its own (a
/// refused one throws); the attempts that succeed are returned.
const POLLUTE: &str = r#"
    const tries = {
        global: () => { globalThis.secret = 'alice' },
        globalAccessor: () => Object.defineProperty(globalThis, 'getter', { get: () => 'alice', configurable: true }),
        replaceJson: () => { JSON.stringify = () => 'hijacked' },
        deleteMath: () => { if (!delete globalThis.Math) throw new TypeError('kept') },
        objectProto: () => { Object.prototype.polluted = 1 },
        arrayProto: () => { Array.prototype.leak = 1 },
        mathProp: () => { Math.leak = 2 },
        dateToJson: () => { Date.prototype.toJSON = () => 'x' },
        dateNow: () => { Date.now = () => 0 },
        random: () => { Math.random = () => 0.5 },
        errorName: () => { Error.prototype.name = 'Hijacked' },
        errorLimit: () => { Error.stackTraceLimit = { secret: 'alice' }; Error.stackTraceLimit = {} },
        errorFormatter: () => { Error.prepareStackTrace = () => 'hijacked' },
        functionProto: () => { Function.prototype.leak = 1 },
        asyncProto: () => { Object.getPrototypeOf(async function () {}).leak = 1 },
        generatorProto: () => { Object.getPrototypeOf(function* () {}).prototype.leak = 1 },
        iteratorProto: () => { Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())).leak = 1 },
        arrayIteratorNext: () => { Object.getPrototypeOf([][Symbol.iterator]()).next = () => ({ done: true }) },
        mapIterator: () => { Object.getPrototypeOf(new Map().entries()).leak = 1 },
        regexpIterator: () => { Object.getPrototypeOf('a'.matchAll(/a/g)).leak = 1 },
        promiseThen: () => { Promise.prototype.then = () => 'x' },
        symbolRegistry: () => { Symbol.for('k').description },
        console: () => { console.leak = 1 },
        consoleLog: () => { console.log = () => {} },
        toolsFrozen: () => Object.preventExtensions(tools),
        toolsProto: () => Object.setPrototypeOf(tools.svc, { leak: 1 }),
        toolsProp: () => { tools.svc.leak = 1 },
        indirectEval: () => (0, eval)('var evalVar = 1; let evalLet = 2; function evalFn() {}'),
        functionCtor: () => Function('globalThis.fromFunction = 1')(),
        unawaited: () => { tools.svc.unawaited({}) },
    };
    const done = [];
    for (const [name, attempt] of Object.entries(tries)) {
        try { attempt(); done.push(name) } catch (e) {}
    }
    return done"#;

/// What the next execution sees of every attempt in [`POLLUTE`].
const INSPECT: &str = r#"
    const leaks = [
        typeof globalThis.secret, typeof globalThis.getter, JSON.stringify({ a: 1 }), typeof Math,
        ({}).polluted, [].leak, Math.leak, JSON.stringify(new Date(0)), Date.now() > 0, Math.random() !== 0.5,
        new Error('m').name, Error.stackTraceLimit, typeof Error.prepareStackTrace, new Error('m').stack !== 'hijacked',
        Function.prototype.leak, Object.getPrototypeOf(async function () {}).leak,
        (function* () {})().leak, [][Symbol.iterator]().leak, new Map().entries().leak, 'a'.matchAll(/a/g).leak,
        typeof Promise.resolve(1).then(() => 1), console.leak, typeof console.log, Object.isExtensible(tools),
        Object.getPrototypeOf(tools.svc), Object.keys(tools).join(), typeof evalVar, typeof evalLet,
        typeof evalFn, typeof fromFunction, typeof more, [...[1, 2]].length,
    ];
    return leaks"#;

/// A context that ran an execution is reset and runs the next (one context
/// made for all of them), and nothing an attacker's execution tried reaches
/// the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_reused_context_carries_nothing_over() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, quick());
    // Warm the worker: its first execution makes its context.
    let warm = tokio::spawn({
        let (sandbox, tools) = (sandbox.clone(), tools.clone());
        async move {
            completed(&sandbox.run(segment("return 1"), tools.clone()).await);
            let before = executor_sandbox::contexts_created();
            let polluted = sandbox.run(segment(POLLUTE), tools.clone()).await;
            // An execution that fails on its own terms leaves its context clean too.
            let thrown = sandbox.run(segment("globalThis.more = 1; throw new Error('boom')"), tools.clone()).await;
            assert_eq!(error_code(&thrown), "runtime_error");
            let seen = sandbox.run(segment(INSPECT), tools.clone()).await;
            (before, polluted, seen, executor_sandbox::contexts_created())
        }
    });
    let (before, polluted, seen, after) = warm.await.unwrap();
    // Only what is harmless or removed afterwards succeeded.
    let allowed = ["global", "globalAccessor", "symbolRegistry", "indirectEval", "functionCtor", "unawaited"];
    let done: Vec<&str> = completed(&polluted).as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(done.iter().all(|name| allowed.contains(name)), "refused attempts succeeded: {done:?}");
    assert!(done.contains(&"global") && done.contains(&"indirectEval"), "{done:?}");
    assert_eq!(
        completed(&seen),
        &json!([
            "undefined",
            "undefined",
            "{\"a\":1}",
            "object",
            null,
            null,
            null,
            "\"1970-01-01T00:00:00.000Z\"",
            true,
            true,
            "Error",
            10,
            "undefined",
            true,
            null,
            null,
            null,
            null,
            null,
            null,
            "object",
            null,
            "function",
            true,
            null,
            "search,describe",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            2
        ])
    );
    assert_eq!(after, before, "the four executions ran in one context, reset between them");
    assert!(tools.calls().is_empty(), "an unawaited call is never made: {:?}", tools.calls());
}

/// A global the reset cannot remove, or a global object changed, retires
/// the context: the next execution gets a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_context_that_cannot_be_reset_is_not_reused() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, quick());
    let run = tokio::spawn({
        let (sandbox, tools) = (sandbox.clone(), tools.clone());
        async move {
            let mut seen = Vec::new();
            for attack in [
                "Object.defineProperty(globalThis, 'kept', { value: 'alice', configurable: false }); return 1",
                "Object.setPrototypeOf(globalThis, { kept: 'alice' }); return 1",
                "Object.preventExtensions(globalThis); return 1",
            ] {
                completed(&sandbox.run(segment("return 0"), tools.clone()).await);
                let before = executor_sandbox::contexts_created();
                completed(&sandbox.run(segment(attack), tools.clone()).await);
                let next = sandbox.run(segment("globalThis.x = 1; return [typeof kept, x]"), tools.clone()).await;
                seen.push((attack, completed(&next).clone(), executor_sandbox::contexts_created() - before));
            }
            seen
        }
    });
    for (attack, next, created) in run.await.unwrap() {
        assert_eq!(next, json!(["undefined", 1]), "{attack}");
        assert_eq!(created, 1, "a fresh context after {attack}");
    }
}

/// Code cannot close the function it is wrapped in to declare a global.
#[tokio::test]
async fn code_cannot_step_outside_its_function() {
    let (outcome, _) = run("return 1 }); let leaked = 1; (async function () {").await;
    assert_eq!(error_code(&outcome), "syntax_error", "{outcome:?}");
}

/// Work left running by one execution is that execution's CPU, never the
/// next one's, on the same thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn work_left_running_stays_with_its_execution() {
    let tools = TestTools::new();
    let sandbox = sandbox(&tools, quick());
    let spinner = "(async () => { for (;;) await null })(); return 1";
    assert_eq!(error_code(&sandbox.run(segment(spinner), tools.clone()).await), "cpu_limit");
    assert_eq!(completed(&sandbox.run(segment("return 2"), tools.clone()).await), &json!(2));
}
