//! `let` declared as `var` wherever no program can tell the difference.
//!
//! QuickJS reads and writes a `let` variable through opcodes that check its
//! temporal dead zone on every access, and fuses `i++` or `s += x` on a local
//! into one opcode only for a `var`: a `for (let i ...)` loop runs about half
//! as fast as the same loop over `var`s (docs/benchmarks.md, W2), and code
//! mode is full of such loops. A `let` becomes a `var` only when all of these
//! hold, which leave nothing for a program to observe:
//!
//! - no `with` and no direct `eval` anywhere: they resolve names at run time;
//! - its name is declared once in the whole code and names nothing else (no
//!   global either), so hoisting it to its function cannot capture or shadow
//!   another binding;
//! - every use is in the same function as the declaration, so no closure can
//!   tell one variable per loop iteration from one shared variable;
//! - every use comes after the declarator in the text (after a `for-in`/`of`
//!   head's right-hand side), inside the declaration's block, so it runs after
//!   the variable is set and no dead-zone error turns into a value;
//! - the declaration is not directly in a `switch` case, whose labels jump
//!   into the middle of one block;
//! - a declarator without a value gets `= void 0`: a `let` starts out
//!   `undefined` each time its block is entered, where a `var` would keep its
//!   last value (a `for-in`/`of` head is assigned on every iteration anyway).

use std::collections::HashMap;

use oxc::allocator::Allocator;
use oxc::ast::AstKind;
use oxc::ast::ast::{BindingPattern, Expression, Program, VariableDeclaration, VariableDeclarationKind};
use oxc::ast::builder::AstBuilder;
use oxc::ast_visit::{VisitMut, walk_mut};
use oxc::semantic::{Semantic, SemanticBuilder};
use oxc::span::{GetSpan, SPAN};
use oxc::syntax::node::NodeId;
use oxc::syntax::scope::ScopeId;

/// Declare as `var` every `let` of `program` that no program could tell from one.
pub(crate) fn lower<'a>(allocator: &'a Allocator, program: &mut Program<'a>) {
    let chosen = {
        let built = SemanticBuilder::new().with_build_nodes(true).build(program);
        choose(&built.semantic)
    };
    if !chosen.is_empty() {
        LetAsVar { chosen, builder: AstBuilder::new(allocator) }.visit_program(program);
    }
}

/// The `let` declarations to declare as `var`, by node, each with whether its
/// declarators without a value get `void 0`.
fn choose(semantic: &Semantic<'_>) -> HashMap<NodeId, bool> {
    let (scoping, nodes) = (semantic.scoping(), semantic.nodes());
    let dynamic_names = nodes.iter().any(|node| match node.kind() {
        AstKind::WithStatement(_) => true,
        AstKind::CallExpression(call) => call.callee.is_specific_id("eval"),
        _ => false,
    });
    if dynamic_names {
        return HashMap::new();
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    for symbol in scoping.symbol_ids() {
        *names.entry(scoping.symbol_name(symbol)).or_default() += 1;
    }
    for name in scoping.root_unresolved_references().keys() {
        *names.entry(name.as_str()).or_default() += 1;
    }
    let function_of = |scope: ScopeId| scoping.scope_ancestors(scope).find(|&s| scoping.scope_flags(s).is_var());

    let mut chosen = HashMap::new();
    for node in nodes.iter() {
        let AstKind::VariableDeclaration(declaration) = node.kind() else { continue };
        if declaration.kind != VariableDeclarationKind::Let {
            continue;
        }
        // Where uses may start, and whether declarators without a value get one.
        let (uses_from, fill) = match nodes.parent_kind(node.id()) {
            AstKind::SwitchCase(_) => continue,
            AstKind::ForInStatement(statement) => (statement.body.span().start, false),
            AstKind::ForOfStatement(statement) => (statement.body.span().start, false),
            _ => (0, true),
        };
        let unobservable = declaration.declarations.iter().all(|declarator| {
            let BindingPattern::BindingIdentifier(id) = &declarator.id else { return false };
            let Some(symbol) = id.symbol_id.get() else { return false };
            let after = uses_from.max(declarator.span.end);
            let home = function_of(scoping.symbol_scope_id(symbol));
            // Declared again in the same scope (`let x; let x;`) is one symbol: as
            // `var`s the redeclaration, a syntax error, would run.
            names.get(id.name.as_str()) == Some(&1)
                && scoping.symbol_redeclarations(symbol).is_empty()
                && scoping.get_resolved_references(symbol).all(|reference| {
                    let used = nodes.get_node(reference.node_id());
                    used.span().start >= after && function_of(used.scope_id()) == home
                })
        });
        if unobservable {
            chosen.insert(declaration.node_id.get(), fill);
        }
    }
    chosen
}

struct LetAsVar<'a> {
    chosen: HashMap<NodeId, bool>,
    builder: AstBuilder<'a>,
}

impl<'a> VisitMut<'a> for LetAsVar<'a> {
    fn visit_variable_declaration(&mut self, declaration: &mut VariableDeclaration<'a>) {
        if let Some(&fill) = self.chosen.get(&declaration.node_id.get()) {
            declaration.kind = VariableDeclarationKind::Var;
            for declarator in declaration.declarations.iter_mut().filter(|d| fill && d.init.is_none()) {
                declarator.init = Some(Expression::new_void_0(SPAN, &self.builder));
            }
        }
        walk_mut::walk_variable_declaration(self, declaration);
    }
}

#[cfg(test)]
mod tests {
    use oxc::codegen::Codegen;
    use oxc::parser::Parser;
    use oxc::span::SourceType;

    use super::*;

    fn lowered(code: &str) -> String {
        let allocator = Allocator::default();
        let wrapped = format!("(async function () {{\n{code}\n}})");
        let mut program = Parser::new(&allocator, &wrapped, SourceType::mjs().with_script(true)).parse().program;
        lower(&allocator, &mut program);
        let js = Codegen::new().build(&program).code;
        js.lines().skip(1).take_while(|l| !l.starts_with("})")).map(str::trim).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn which_lets_become_vars() {
        let cases = [
            // The loops code mode is full of.
            ("let s = 0; for (let i = 0; i < 9; i++) s += i; return s;", "var s = 0; for (var i = 0;"),
            ("for (let x of [1]) { x; }", "for (var x of"),
            ("for (let k in {}) { k; }", "for (var k in"),
            ("let a = 1, b = a + 1; return b;", "var a = 1, b = a + 1;"),
            ("for (let j = 0; j < 2; j++) { let x; x = j; }", "var x = void 0;"),
            // Used before its declaration: the dead-zone error stays.
            ("x; let x = 1;", "let x = 1;"),
            ("let y = y + 1;", "let y = y + 1;"),
            ("for (let z of z) {}", "for (let z of z)"),
            // Seen by a closure: one binding per iteration stays.
            ("const f = []; for (let i = 0; i < 3; i++) f.push(() => i);", "for (let i = 0;"),
            ("let n = 1; function g() { return n; } return g();", "let n = 1;"),
            // The name means something else somewhere.
            ("let i = 5; for (let i = 0; i < 2; i++) {} return i;", "let i = 5; for (let i = 0;"),
            ("{ let a = 1; a; } return a;", "let a = 1;"),
            ("let tools = 1; return tools;", "var tools = 1;"),
            ("{ let tools = 1; tools; } return tools.x;", "let tools = 1;"),
            // Names resolved at run time, a case label jumping past the declaration, patterns.
            ("let e = 1; eval('e');", "let e = 1;"),
            ("let w = 1; with ({}) { w; }", "let w = 1;"),
            ("switch (1) { case 0: let c = 1; c; break; case 1: c = 2; }", "let c = 1;"),
            ("let { p } = { p: 1 }; return p;", "let { p } ="),
            // Declared twice in one scope: the syntax error stays one.
            ("let d = 1; let d = 2; return d;", "let d = 1; let d = 2;"),
            ("let v = 1; var v = 2;", "let v = 1; var v = 2;"),
            ("const k = 1; return k;", "const k = 1;"),
        ];
        for (code, expected) in cases {
            let js = lowered(code);
            assert!(js.contains(expected), "{code}\n  became: {js}\n  expected to contain: {expected}");
        }
    }

    /// Generated programs, each run as written and as the sandbox compiles
    /// them (TypeScript stripped, then lowered): any program whose answer
    /// the compiling changes turns up as a difference. The
    /// statements mix what decides a `let`'s fate: blocks, `for` heads,
    /// closures that outlive an iteration, reads before the declaration (the
    /// dead zone), names declared twice or assigned without a declaration,
    /// `switch` cases and `try`.
    mod generated {
        use proptest::prelude::*;
        use rquickjs::promise::PromiseState;
        use rquickjs::{CatchResultExt, Context, Function, Promise, Runtime};

        use super::*;

        /// Names statements declare and assign; loop heads have their own
        /// (`i`, `j`), which nothing assigns, so every loop ends.
        fn name() -> impl Strategy<Value = &'static str> {
            prop::sample::select(vec!["a", "b", "x"])
        }

        fn read() -> impl Strategy<Value = &'static str> {
            prop::sample::select(vec!["a", "b", "x", "i", "j"])
        }

        fn expression() -> impl Strategy<Value = String> {
            prop_oneof![
                (0..4u8).prop_map(|n| n.to_string()),
                read().prop_map(str::to_owned),
                read().prop_map(|n| format!("{n} + 1")),
            ]
        }

        fn statement() -> impl Strategy<Value = String> {
            let leaf = prop_oneof![
                (name(), expression()).prop_map(|(n, e)| format!("let {n} = {e};")),
                name().prop_map(|n| format!("let {n};")),
                (name(), expression()).prop_map(|(n, e)| format!("{n} = {e};")),
                read().prop_map(|n| format!("out.push({n});")),
                read().prop_map(|n| format!("fs.push(() => {n});")),
                read().prop_map(|n| format!("out.push((() => {n})());")),
                read().prop_map(|n| format!("out.push(typeof {n});")),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                let body = || prop::collection::vec(inner.clone(), 0..4).prop_map(|s| s.join(" "));
                prop_oneof![
                    body().prop_map(|b| format!("{{ {b} }}")),
                    (prop::sample::select(vec!["i", "j"]), body())
                        .prop_map(|(v, b)| format!("for (let {v} = 0; {v} < 3; {v}++) {{ {b} }}")),
                    (prop::sample::select(vec!["i", "j"]), body())
                        .prop_map(|(v, b)| format!("for (let {v} of [1, 2]) {{ {b} }}")),
                    (read(), body(), body()).prop_map(|(n, t, e)| format!("if ({n}) {{ {t} }} else {{ {e} }}")),
                    (0..3u8, body(), body())
                        .prop_map(|(k, c0, c1)| format!("switch ({k}) {{ case 0: {c0} break; case 1: {c1} }}")),
                    body().prop_map(|b| format!("try {{ {b} }} catch (e) {{ out.push(e.name); }}")),
                ]
            })
        }

        /// What the wrapped code answers: the observations, or the error it threw.
        fn run(js: &str) -> String {
            let runtime = Runtime::new().unwrap();
            let context = Context::full(&runtime).unwrap();
            context.with(|ctx| {
                let main: Function = match ctx.eval(js.as_bytes().to_vec()).catch(&ctx) {
                    Ok(main) => main,
                    Err(error) => return format!("does not compile: {error}"),
                };
                let promise: Promise = main.call(()).unwrap();
                assert_eq!(promise.state(), PromiseState::Resolved, "{js}");
                promise.result::<String>().unwrap().unwrap()
            })
        }

        fn plain(code: &str) -> String {
            let allocator = Allocator::default();
            let wrapped = format!("(async function () {{\n{code}\n}})");
            let program = Parser::new(&allocator, &wrapped, SourceType::mjs().with_script(true)).parse().program;
            Codegen::new().build(&program).code
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            #[test]
            fn lowering_never_changes_what_a_program_does(body in prop::collection::vec(statement(), 1..6)) {
                let code = format!(
                    "const out = []; const fs = []; \
                     try {{ {} }} catch (e) {{ out.push('threw ' + e.name); }} \
                     out.push(fs.map(f => {{ try {{ return f(); }} catch (e) {{ return e.name; }} }})); \
                     return JSON.stringify(out);",
                    body.join(" ")
                );
                // Code the parser refuses (a name declared twice in one block) never runs.
                let allocator = Allocator::default();
                let wrapped = format!("(async function () {{\n{code}\n}})");
                prop_assume!(Parser::new(&allocator, &wrapped, SourceType::mjs().with_script(true)).parse().diagnostics.is_empty());
                // As the sandbox compiles it: TypeScript stripped (nothing to strip here), then lowered.
                let (as_written, compiled) = (plain(&code), crate::source::compile(&code).unwrap());
                prop_assert_eq!(run(&as_written), run(&compiled), "{}\ncompiled: {}", code, compiled);
            }
        }
    }
}
