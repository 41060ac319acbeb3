//! The sandbox as the model sees it: values, TypeScript, globals, tools, logs.

mod support;

use executor_sandbox::{Limits, Outcome};
use serde_json::json;
use support::*;

#[tokio::test]
async fn returned_values_come_back_as_json() {
    let cases = [
        ("return 1 + 2", json!(3)),
        ("return", json!(null)),
        ("return undefined", json!(null)),
        ("", json!(null)),
        ("return {a: [1, 'x', null, true], b: {c: 1.5}}", json!({"a": [1, "x", null, true], "b": {"c": 1.5}})),
        ("const x = await Promise.resolve(7); return x * 2", json!(14)),
        ("return new Date(0).toISOString()", json!("1970-01-01T00:00:00.000Z")),
        ("const shared = {v: 1}; return [shared, shared]", json!([{"v": 1}, {"v": 1}])),
    ];
    for (code, expected) in cases {
        let (outcome, _) = run(code).await;
        assert_eq!(completed(&outcome), &expected, "{code}");
    }
}

#[tokio::test]
async fn values_json_cannot_hold_are_clear_errors() {
    let cases = [
        ("return () => 1", "function"),
        ("return {f() {}}", "function at key \"f\""),
        ("return 10n", "BigInt"),
        ("const a = {}; a.self = a; return a", "circular"),
        ("return Symbol('s')", "Symbol"),
    ];
    for (code, needle) in cases {
        let (outcome, _) = run(code).await;
        assert_eq!(error_code(&outcome), "result_not_serializable", "{code}");
        let Outcome::Failed { error, .. } = &outcome else { unreachable!() };
        assert!(error.to_string().contains(needle), "{code}: {error}");
    }
}

/// `JSON.stringify` writes plain data itself (engine/plain_json.rs) and leaves
/// the rest to QuickJS's: the answers are the standard's either way.
#[tokio::test]
async fn json_stringify_is_the_standard_one() {
    let cases = [
        (
            "return JSON.stringify({b: 1, a: [1, 'x', null, undefined, () => 1], c: undefined, s: Symbol()})",
            json!("{\"b\":1,\"a\":[1,\"x\",null,null,null]}"),
        ),
        (
            "return JSON.stringify({d: new Date(0), n: new Number(2), t: {toJSON: (key) => 'at ' + key}})",
            json!("{\"d\":\"1970-01-01T00:00:00.000Z\",\"n\":2,\"t\":\"at t\"}"),
        ),
        ("return JSON.stringify({a: [1, {b: 2}]}, null, 1)", json!("{\n \"a\": [\n  1,\n  {\n   \"b\": 2\n  }\n ]\n}")),
        ("return JSON.stringify({a: 1, b: 2}, ['b'])", json!("{\"b\":2}")),
        ("return JSON.stringify({a: 1, b: 2}, (k, v) => k === 'a' ? undefined : v)", json!("{\"b\":2}")),
        // A getter that changes the object as it is written: the keys are the ones it had.
        (
            "const o = {a: 1, get b() { delete this.c; this.d = 4; return 2 }, c: 3}; return JSON.stringify(o)",
            json!("{\"a\":1,\"b\":2}"),
        ),
        ("return JSON.stringify('\\ud800\\u0007\"')", json!("\"\\ud800\\u0007\\\"\"")),
        ("return [JSON.stringify(), JSON.stringify(undefined), JSON.stringify(() => 1)]", json!([null, null, null])),
        ("return JSON.stringify([1], undefined, undefined, 'more')", json!("[1]")),
        (
            "return [JSON.stringify.name, JSON.stringify.length, JSON.stringify(-0), JSON.stringify([NaN, 1e21, 0.1])]",
            json!(["stringify", 3, "0", "[null,1e+21,0.1]"]),
        ),
        ("try { new JSON.stringify({}); return 'constructed' } catch (e) { return e.name }", json!("TypeError")),
        ("const c = {}; c.c = c; try { JSON.stringify(c) } catch (e) { return e.name }", json!("TypeError")),
        ("try { JSON.stringify({a: 1n}) } catch (e) { return e.name }", json!("TypeError")),
    ];
    for (code, expected) in cases {
        let (outcome, _) = run(code).await;
        assert_eq!(completed(&outcome), &expected, "{code}");
    }
}

/// `JSON.parse` reads a string itself (engine/json_parse.rs) and leaves the
/// rest to QuickJS's: the answers are the standard's either way.
#[tokio::test]
async fn json_parse_is_the_standard_one() {
    let cases = [
        (
            r#"return JSON.parse('{"a": [1, -0, 1.5e3, "x\\u00e9\\ud83d\\ude00"], "b": {"c": null, "d": true}}')"#,
            json!({"a": [1, 0, 1500, "xé😀"], "b": {"c": null, "d": true}}),
        ),
        (
            r#"const o = JSON.parse('{"__proto__": {"x": 1}}'); return [Object.keys(o), o.x === undefined, Object.getPrototypeOf(o) === Object.prototype]"#,
            json!([["__proto__"], true, true]),
        ),
        (r#"return Object.is(JSON.parse('-0'), -0)"#, json!(true)),
        (r#"return JSON.parse('{"a": 1, "b": 2}', (k, v) => k === 'a' ? undefined : v)"#, json!({"b": 2})),
        (r#"return JSON.parse({toString: () => '[7]'})"#, json!([7])),
        (r#"return JSON.parse('"\\ud800"').charCodeAt(0)"#, json!(0xd800)),
        (r#"try { JSON.parse('{"a": 1,}') } catch (e) { return e.name }"#, json!("SyntaxError")),
        (r#"try { JSON.parse() } catch (e) { return e.name }"#, json!("SyntaxError")),
        (r#"return [JSON.parse.name, JSON.parse.length]"#, json!(["parse", 2])),
    ];
    for (code, expected) in cases {
        let (outcome, _) = run(code).await;
        assert_eq!(completed(&outcome), &expected, "{code}");
    }
}

#[tokio::test]
async fn typescript_and_fences_are_accepted() {
    let code = "```ts\ninterface Row { id: number; name?: string }\nconst rows: Row[] = [{ id: 1 }, { id: 2 }];\n\
                const sum = rows.reduce<number>((acc, r: Row): number => acc + r.id, 0);\n\
                enum Color { Red = 'r' }\nreturn { sum, color: Color.Red, n: (rows as Row[]).length! };\n```";
    let (outcome, _) = run(code).await;
    assert_eq!(completed(&outcome), &json!({"sum": 3, "color": "r", "n": 2}));
}

#[tokio::test]
async fn syntax_errors_give_line_and_column() {
    let (outcome, _) = run("const a = 1;\nconst b: = 2;\nreturn a").await;
    let Outcome::Failed { error, .. } = &outcome else { panic!("{outcome:?}") };
    assert_eq!(error.code(), "syntax_error");
    assert!(error.to_string().contains("line 2, column 10"), "{error}");
}

#[tokio::test]
async fn uncaught_errors_name_the_error() {
    let (outcome, _) = run("const o = null;\nreturn o.x").await;
    let Outcome::Failed { error, .. } = &outcome else { panic!("{outcome:?}") };
    assert_eq!(error.code(), "runtime_error");
    assert!(error.to_string().contains("TypeError"), "{error}");
    let (outcome, _) = run("throw new RangeError('bad input')").await;
    let Outcome::Failed { error, .. } = &outcome else { panic!("{outcome:?}") };
    assert_eq!(error.to_string(), "uncaught RangeError: bad input");
}

#[tokio::test]
async fn console_goes_to_logs() {
    let code = "console.log('a', 1, {b: 2}); console.warn('careful'); console.error(new Error('boom')); \
                console.info([1]); console.debug(undefined); return null";
    let (outcome, _) = run(code).await;
    let Outcome::Completed { logs, .. } = outcome else { panic!() };
    assert_eq!(logs, ["a 1 {\"b\":2}", "[warn] careful", "[error] Error: boom", "[info] [1]", "[debug] undefined"]);
}

#[tokio::test]
async fn logs_are_capped_with_a_marker() {
    let tools = TestTools::new();
    let limits = Limits { log_bytes: 100, ..Limits::default() };
    let outcome = sandbox(&tools, limits)
        .run(segment("for (let i = 0; i < 1000; i++) console.log('line ' + i); return 1"), tools.clone())
        .await;
    let Outcome::Completed { logs, result } = outcome else { panic!() };
    assert_eq!(result, json!(1));
    assert!(logs.iter().map(String::len).sum::<usize>() < 200, "{logs:?}");
    assert!(logs.last().unwrap().contains("logs truncated"), "{logs:?}");
}

#[tokio::test]
async fn tools_proxy_calls_by_path_and_is_not_a_thenable() {
    let code = "const r = await tools.github.issues.create({title: 't'});\n\
                return { r, then: typeof tools.then, sym: tools[Symbol.iterator], keys: Object.keys(tools), \
                         text: String(tools), json: JSON.stringify(tools.github), awaited: typeof (await tools.gh) }";
    let (outcome, tools) = run(code).await;
    let result = completed(&outcome);
    assert_eq!(result["r"], json!({"ok": true, "data": {"path": "github.issues.create", "args": {"title": "t"}}}));
    assert_eq!(result["then"], json!("undefined"));
    assert_eq!(result["sym"], json!(null));
    assert_eq!(result["keys"], json!(["search", "describe"]));
    assert!(result["text"].as_str().unwrap().contains("tools.search"), "{result}");
    assert!(result["json"].as_str().unwrap().contains("tools.describe.tool"), "{result}");
    assert_eq!(result["awaited"], json!("function"), "awaiting a namespace does not call it");
    assert_eq!(tools.calls(), [("github.issues.create".to_owned(), json!({"title": "t"}))]);
}

/// `let`s run as `var`s where nothing can tell (let_as_var.rs): what a
/// program can see of a `let` stays as the language says.
#[tokio::test]
async fn let_keeps_its_meaning() {
    let cases = [
        ("let s = 0; for (let i = 0; i < 100; i++) s += i % 7; return s", json!(295)),
        ("const f = []; for (let i = 0; i < 3; i++) f.push(() => i); return f.map(g => g())", json!([0, 1, 2])),
        ("try { x; } catch (e) { return e.name } let x = 1; return x", json!("ReferenceError")),
        (
            "const out = []; for (let j = 0; j < 2; j++) { let x; if (j === 0) x = 5; out.push(x) } return out",
            json!([5, null]),
        ),
        ("let i = 5; for (let i = 0; i < 2; i++) {} return i", json!(5)),
        (
            "try { switch (1) { case 0: let c = 1; break; case 1: c = 2; } } catch (e) { return e.name } return 'no error'",
            json!("ReferenceError"),
        ),
        ("let t = 0; for (let x of [1, 2, 3]) t += x; return t", json!(6)),
        ("let ks = ''; for (let k in {a: 1, b: 2}) ks += k; return ks", json!("ab")),
        ("try { for (let z of z) {} } catch (e) { return e.name }", json!("ReferenceError")),
        ("{ let a = 1; } { let a = 2; } return typeof a", json!("undefined")),
        ("{ let Math = 1; } return typeof Math", json!("object")),
        ("let n = 1; const g = () => n; n = 2; return g()", json!(2)),
    ];
    for (code, expected) in cases {
        let (outcome, _) = run(code).await;
        assert_eq!(completed(&outcome), &expected, "{code}");
    }
    // Declared twice in one scope: refused, as the language says, not run as two `var`s.
    for code in ["let d = 1; let d = 2; return d", "let v = 1; var v = 2; return v"] {
        let (outcome, _) = run(code).await;
        let Outcome::Failed { error, .. } = &outcome else { panic!("{code}: {outcome:?}") };
        assert!(error.to_string().contains("redefinition"), "{code}: {error}");
    }
}

#[tokio::test]
async fn a_tool_called_without_arguments_gets_null() {
    let (outcome, tools) = run("return (await tools.status.ping()).data.args").await;
    assert_eq!(completed(&outcome), &json!(null));
    assert_eq!(tools.calls(), [("status.ping".to_owned(), json!(null))]);
}

#[tokio::test]
async fn tool_errors_and_blocked_calls_are_values_not_throws() {
    let code = "const a = await tools.fail.now({}); const b = await tools.x.drop({}); return {a, b}";
    let (outcome, tools) = run(code).await;
    assert_eq!(
        completed(&outcome),
        &json!({
            "a": {"ok": false, "error": {"code": "upstream_error", "message": "fail.now failed"}},
            "b": {"ok": false, "error": {"code": "blocked", "message": "x.drop is blocked by policy"}},
        })
    );
    assert_eq!(tools.calls().len(), 1, "a blocked call is never made");
}

#[tokio::test]
async fn search_and_describe_reach_the_catalog() {
    let code = "const found = await tools.search({query: 'issues'});\n\
                const types = await tools.describe.tool({path: found.items[0].path});\n\
                let missing; try { await tools.describe.tool({path: 'nope'}) } catch (e) { missing = e.message }\n\
                return {found, types, missing}";
    let (outcome, _) = run(code).await;
    let result = completed(&outcome);
    assert_eq!(result["found"]["total"], json!(1));
    assert!(result["types"].as_str().unwrap().contains("declare function list"));
    assert!(result["missing"].as_str().unwrap().contains("no tool"));
}

#[tokio::test]
async fn parallel_calls_with_promise_all() {
    let code =
        "const rs = await Promise.all([1, 2, 3].map(i => tools.svc.get({i})));\nreturn rs.map(r => r.data.args.i)";
    let (outcome, tools) = run(code).await;
    assert_eq!(completed(&outcome), &json!([1, 2, 3]));
    assert_eq!(tools.calls().len(), 3);
}

#[tokio::test]
async fn bad_tool_arguments_throw_in_the_code() {
    let (outcome, tools) =
        run("const a = {}; a.a = a; try { await tools.svc.put(a) } catch (e) { return e.message }").await;
    assert!(completed(&outcome).as_str().unwrap().contains("must be JSON data"), "{outcome:?}");
    assert!(tools.calls().is_empty());
}

#[tokio::test]
async fn nothing_from_the_host_is_reachable() {
    let code = "return ['fetch', 'require', 'process', 'setTimeout', 'setInterval', 'XMLHttpRequest', 'os', 'std', \
                'WebAssembly', 'WeakRef', 'FinalizationRegistry', 'import'].filter(n => typeof globalThis[n] !== 'undefined')";
    let (outcome, _) = run(code).await;
    assert_eq!(completed(&outcome), &json!([]));
    let (outcome, _) = run("return await import('os')").await;
    assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
}

#[tokio::test]
async fn date_is_pinned_and_random_is_seeded() {
    let code = "const t0 = Date.now(); const d0 = new Date().getTime();\n\
                await tools.svc.a({}); const t1 = Date.now();\n\
                return { t0, d0, t1, r: [Math.random(), Math.random()], isDate: new Date() instanceof Date, s: typeof Date() }";
    let (first, _) = run(code).await;
    let (second, _) = run(code).await;
    let result = completed(&first);
    assert_eq!(result["t0"], json!(START));
    assert_eq!(result["d0"], json!(START));
    assert_eq!(result["t1"], json!(START + 1000), "the clock moves to the completion of the call");
    assert_eq!(result["isDate"], json!(true));
    assert_eq!(result["s"], json!("string"));
    assert_eq!(first, second, "same seed and journal, same values");
    let r = result["r"].as_array().unwrap();
    assert!(r[0] != r[1] && r.iter().all(|v| (0.0..1.0).contains(&v.as_f64().unwrap())));
}

#[tokio::test]
async fn code_that_awaits_forever_is_reported() {
    let (outcome, _) = run("await new Promise(() => {}); return 1").await;
    assert_eq!(error_code(&outcome), "never_settles");
}

/// Built-ins are frozen (a context runs many executions), yet code may still
/// give its own objects a `name`, `toString` or `constructor` of their own.
#[tokio::test]
async fn built_ins_are_frozen_and_own_overrides_still_work() {
    let code = "class NotFound extends Error { constructor(m) { super(m); this.name = 'NotFound' } }\n\
                const e = new NotFound('no such repo');\n\
                const o = { v: 2 }; o.toString = function () { return 'v=' + this.v }; o.valueOf = () => 40;\n\
                function Old() {} Old.prototype = Object.create(Error.prototype); Old.prototype.constructor = Old;\n\
                const refused = [];\n\
                for (const change of [() => { Array.prototype.last = 1 }, () => { JSON.parse = null }, () => { delete Math.max }]) {\n\
                  try { change(); refused.push(false) } catch (e) { refused.push(e instanceof TypeError) }\n\
                }\n\
                return [String(e), e instanceof Error, `${o}`, o + 2, new Old().constructor === Old, refused,\n\
                        Object.isFrozen(Object.prototype), Error.prototype.name]";
    let (outcome, _) = run(code).await;
    assert_eq!(
        completed(&outcome),
        &json!(["NotFound: no such repo", true, "v=2", 42, true, [true, true, true], true, "Error"])
    );
}
