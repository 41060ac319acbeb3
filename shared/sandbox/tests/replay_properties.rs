//! Property: running with pauses (the snapshot serialised between segments)
//! gives the same result, logs and tool calls as running straight through with
//! the same decisions, and every tool is called exactly once.

mod support;

use std::collections::BTreeMap;
use std::fmt::Write;

use executor_core::{ApprovalAction, ExecutionId};
use executor_sandbox::{Limits, Outcome, Segment, Snapshot};
use proptest::prelude::*;
use support::*;

#[derive(Debug, Clone)]
enum Stmt {
    /// `await tools.<r|w>.op<k>({k})`
    Call {
        write: bool,
    },
    /// `Promise.allSettled` over several calls.
    Parallel(Vec<bool>),
    /// Branch on a tool result and `Math.random()`.
    Branch {
        write: bool,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    Now,
    Random,
    Log,
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let leaf = prop_oneof![
        3 => any::<bool>().prop_map(|write| Stmt::Call { write }),
        2 => prop::collection::vec(any::<bool>(), 1..4).prop_map(Stmt::Parallel),
        1 => Just(Stmt::Now),
        1 => Just(Stmt::Random),
        1 => Just(Stmt::Log),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        (any::<bool>(), prop::collection::vec(inner.clone(), 0..3), prop::collection::vec(inner, 0..3))
            .prop_map(|(write, then, otherwise)| Stmt::Branch { write, then, otherwise })
    })
}

/// JavaScript for `stmts`; `k` numbers the calls so each has unique arguments.
fn emit(stmts: &[Stmt], k: &mut u32, js: &mut String) {
    let call = |write: bool, k: &mut u32| {
        *k += 1;
        format!("tools.{}.op{k}({{k: {k}}})", if write { "w" } else { "r" })
    };
    for stmt in stmts {
        match stmt {
            Stmt::Call { write } => {
                let c = call(*write, k);
                writeln!(js, "try {{ const v = await {c}; out.push(v.data.args.k) }} catch (e) {{ out.push('declined ' + e.message) }}").unwrap();
            }
            Stmt::Parallel(writes) => {
                let calls: Vec<String> = writes.iter().map(|w| call(*w, k)).collect();
                writeln!(
                    js,
                    "for (const r of await Promise.allSettled([{}])) out.push(r.status === 'fulfilled' ? r.value.data.args.k : 'declined ' + r.reason.message);",
                    calls.join(", ")
                )
                .unwrap();
            }
            Stmt::Branch { write, then, otherwise } => {
                let c = call(*write, k);
                writeln!(js, "let b{k}; try {{ b{k} = (await {c}).data.args.k }} catch (e) {{ b{k} = 1 }}").unwrap();
                writeln!(js, "if ((b{k} + Math.floor(Math.random() * 2)) % 2 === 0) {{").unwrap();
                emit(then, k, js);
                js.push_str("} else {\n");
                emit(otherwise, k, js);
                js.push_str("}\n");
            }
            Stmt::Now => js.push_str("out.push(Date.now());\n"),
            Stmt::Random => js.push_str("out.push(Math.random());\n"),
            Stmt::Log => js.push_str("console.log('at', out.length, Date.now(), Math.random());\n"),
        }
    }
}

fn program(stmts: &[Stmt]) -> String {
    let mut js = String::from("const out = [];\n");
    emit(stmts, &mut 0, &mut js);
    js.push_str("return out;\n");
    js
}

fn sorted_calls(tools: &TestTools) -> Vec<String> {
    let mut calls: Vec<String> = tools.calls().into_iter().map(|(p, a)| format!("{p} {a}")).collect();
    calls.sort();
    calls
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn pausing_is_invisible_to_the_code(stmts in prop::collection::vec(stmt(), 1..8), decisions in prop::collection::vec(any::<bool>(), 0..16)) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let code = program(&stmts);
        runtime.block_on(async {
            // With pauses: each segment ends in a snapshot that goes through JSON.
            let paused_tools = TestTools::new();
            let sandbox = sandbox(&paused_tools, Limits::default());
            let mut decided = BTreeMap::new();
            let mut choices = decisions.iter().copied();
            let mut outcome = sandbox.run(segment(&code), paused_tools.clone()).await;
            let mut pauses = 0;
            while let Outcome::Paused { snapshot, .. } = outcome {
                pauses += 1;
                prop_assert!(pauses < 100, "too many pauses");
                let snapshot: Snapshot = serde_json::from_str(&serde_json::to_string(&snapshot).unwrap()).unwrap();
                let mut segment = Segment::resume(ExecutionId::parse("exec1").unwrap(), snapshot, ApprovalAction::Accept);
                for (step, action) in segment.decisions.iter_mut() {
                    if !choices.next().unwrap_or(true) {
                        *action = ApprovalAction::Decline;
                    }
                    decided.insert(*step, *action);
                }
                outcome = sandbox.run(segment, paused_tools.clone()).await;
            }

            // Straight through, every decision known in advance.
            let straight_tools = TestTools::new();
            let mut straight = segment(&code);
            straight.decisions = decided;
            let expected = support::sandbox(&straight_tools, Limits::default()).run(straight, straight_tools.clone()).await;

            prop_assert!(matches!(expected, Outcome::Completed { .. }), "{code}\n{expected:?}");
            prop_assert_eq!(&outcome, &expected, "{}", code);
            let calls = sorted_calls(&paused_tools);
            prop_assert_eq!(&calls, &sorted_calls(&straight_tools));
            let mut unique = calls.clone();
            unique.dedup();
            prop_assert_eq!(unique.len(), calls.len(), "a tool was called twice");
            Ok(())
        })?;
    }
}
