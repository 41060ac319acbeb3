//! Cedar policies on the request path (docs/benchmarks.md, "Cedar policies:
//! evaluation per call"): `CedarPolicies::decide` with 100 policies for a
//! read, a comment and a branch deletion, beside the pattern rules'
//! `SourcePolicy::decide` with 10 rules in the same run; and
//! `CedarPolicies::load` of the 100 (once at start), and the first calls of
//! 100 tools (each tool's slice is made at its first call).
//! `cargo bench -p executor-catalog --bench cedar`

use std::hint::black_box;
use std::path::PathBuf;

use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, Criterion, criterion_group, criterion_main};
use executor_catalog::cedar::{CedarPolicies, CedarSource, ToolFacts};
use executor_core::{Effect, PolicyAction, PolicyRule, Principal, SourcePolicy, ToolPattern};
use executor_sandbox::{CallCounts, PolicyCall};
use serde_json::{Value, json};

const GITHUB: &str = include_str!("../../../examples/policies/github.cedar");
const POLICIES: usize = 100;
const FIRST_CALLS: usize = 100;

/// The example's 7 policies, then generated ones up to [`POLICIES`]: permits
/// and forbids on the operation, the kind, arguments (`has` and `==`, `like`
/// on a ref), the write count, and some scoped to one tool.
fn policies() -> String {
    let mut text = GITHUB.to_owned();
    let example = GITHUB.matches("@id(").count();
    let (call, unattended) = (r#"Executor::Action::"call""#, r#"Executor::Action::"call_unattended""#);
    for i in 0..POLICIES - example {
        let policy = match i % 10 {
            0 => format!(
                "permit(principal, action == {unattended}, resource) when {{ resource.operation == \"repos/get-{i}\" }};"
            ),
            1 => format!(
                "forbid(principal, action == {call}, resource) when {{ resource.operation == \"repos/delete-{i}\" && \
                 context.args has owner && context.args.owner == \"org{i}\" }};"
            ),
            2 => format!(
                "permit(principal, action == {unattended}, resource) when {{ resource.kind == \"read\" && \
                 resource.namespace == \"ns{i}\" }};"
            ),
            3 => format!(
                "forbid(principal, action == {unattended}, resource) when {{ context.args has ref && \
                 context.args.ref like \"heads/release-{i}/*\" }};"
            ),
            4 => format!(
                "forbid(principal, action == {unattended}, resource) when {{ resource.kind == \"write\" && \
                 resource.namespace == \"ns{i}\" && context.execution.writes >= 3 }};"
            ),
            5 => format!(
                "permit(principal, action == {unattended}, resource == Executor::Tool::\"github.scoped.tool{i}\");"
            ),
            6 => format!(
                "forbid(principal, action, resource == Executor::Tool::\"github.repos.delete{i}\") when {{ \
                 context.args has repo && context.args.repo == \"prod{i}\" }};"
            ),
            7 => format!(
                "forbid(principal, action, resource) when {{ principal.toolkit == \"kit{i}\" && \
                 resource.destructive }};"
            ),
            8 => format!(
                "permit(principal, action == {unattended}, resource) when {{ resource.operation == \"issues/op-{i}\" && \
                 context.args has body && context.args.body has title && context.args.body.title like \"*[bot]*\" }};"
            ),
            _ => format!(
                "forbid(principal, action == {unattended}, resource) when {{ resource.method == \"PUT\" && \
                 resource.path_template like \"/orgs/*/team{i}/*\" && context.execution.calls_to_tool >= 2 }};"
            ),
        };
        text.push_str(&format!("\n@id(\"generated-{i}\")\n{policy}\n"));
    }
    text
}

fn source() -> CedarSource {
    CedarSource { file: PathBuf::from("policies/bench.cedar"), text: policies() }
}

/// Ten pattern rules, as a GitHub source might set them.
fn rules() -> SourcePolicy {
    let rule = |pattern: &str, action| PolicyRule { pattern: ToolPattern::parse(pattern).unwrap(), action };
    use PolicyAction::{Approve, Block, Run};
    SourcePolicy {
        default: None,
        rules: vec![
            rule("github.*.list*", Run),
            rule("github.*.get*", Run),
            rule("github.issues.create_comment", Run),
            rule("github.issues.*label*", Run),
            rule("github.issues.update", Approve),
            rule("github.git.delete_ref", Approve),
            rule("github.repos.delete", Block),
            rule("github.*.delete*", Approve),
            rule("github.actions.*", Approve),
            rule("github.orgs.*", Block),
        ],
    }
}

struct Case {
    name: &'static str,
    path: &'static str,
    args: Value,
    tool: ToolFacts<'static>,
    writes: u32,
    want: PolicyAction,
}

fn github(method: &'static str, path_template: &'static str, operation: &'static str) -> ToolFacts<'static> {
    let kind = if method == "GET" { Effect::Read } else { Effect::Write };
    let destructive = method == "DELETE";
    ToolFacts { namespace: "github", kind, source_kind: "openapi", method, path_template, operation, destructive }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "read",
            path: "github.issues.list_for_repo",
            args: json!({"owner": "acme", "repo": "web", "state": "open", "per_page": 30}),
            tool: github("GET", "/repos/{owner}/{repo}/issues", "issues/list-for-repo"),
            writes: 0,
            want: PolicyAction::Run,
        },
        Case {
            name: "comment",
            path: "github.issues.create_comment",
            args: json!({"owner": "acme", "repo": "web", "issue_number": 7, "body": {"body": "Looks good to me."}}),
            tool: github("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/create-comment"),
            writes: 1,
            want: PolicyAction::Run,
        },
        Case {
            name: "delete ref",
            path: "github.git.delete_ref",
            args: json!({"owner": "acme", "repo": "web", "ref": "heads/tmp/spike"}),
            tool: github("DELETE", "/repos/{owner}/{repo}/git/refs/{ref}", "git/delete-ref"),
            writes: 2,
            want: PolicyAction::Run,
        },
    ]
}

/// The first call of each of [`FIRST_CALLS`] tools (its slice made), a fresh set each time: divide by that many.
fn first_calls(group: &mut BenchmarkGroup<'_, WallTime>, source: &CedarSource, case: &Case, owner: &Principal) {
    let has_tool = |path: &str| Some(path.starts_with("github."));
    let paths: Vec<String> = (0..FIRST_CALLS).map(|i| format!("github.tool{i}.create_comment")).collect();
    let call = |path| PolicyCall { owner: Some(owner), ..PolicyCall::new(path, &case.args) };
    group.bench_function(format!("first calls of {FIRST_CALLS} tools"), |b| {
        b.iter_batched(
            || CedarPolicies::load(source, &has_tool).unwrap(),
            |set| paths.iter().for_each(|path| drop(black_box(set.decide(&call(path), &case.tool)))),
            BatchSize::PerIteration,
        )
    });
}

fn bench(c: &mut Criterion) {
    let has_tool = |path: &str| Some(path.starts_with("github."));
    let example = CedarSource { file: PathBuf::from("policies/github.cedar"), text: GITHUB.to_owned() };
    let source = source();
    let rules = rules();
    let owner = Principal::parse("alice").unwrap();
    let cases = cases();
    for source in [&example, &source] {
        let set = CedarPolicies::load(source, &has_tool).unwrap();
        let count = source.text.matches("@id(").count();
        assert!(format!("{set:?}").contains(&format!("policies: {count}")), "{set:?}");
        let mut group = c.benchmark_group(format!("cedar, {count} policies"));
        for case in &cases {
            let before = CallCounts { calls: case.writes + 1, writes: case.writes, calls_to_tool: 0 };
            let call = PolicyCall { owner: Some(&owner), before, ..PolicyCall::new(case.path, &case.args) };
            let decision = set.decide(&call, &case.tool);
            assert_eq!(decision.action, case.want, "{}: {decision:?}", case.name);
            eprintln!("{count} policies, {}: {:?} by {:?}", case.name, decision.action, decision.policies);
            if count == POLICIES {
                let decided = rules.decide(case.path, case.tool.kind);
                eprintln!("10 rules, {}: {:?} by {}", case.name, decided.action, decided.reason);
                group.bench_function(format!("{}: pattern rules (10)", case.name), |b| {
                    b.iter(|| rules.decide(black_box(case.path), black_box(case.tool.kind)))
                });
            }
            group.bench_function(format!("{}: cedar decide", case.name), |b| {
                b.iter(|| set.decide(black_box(&call), black_box(&case.tool)))
            });
        }
        group
            .bench_function("load (parse, validate)", |b| b.iter(|| CedarPolicies::load(black_box(source), &has_tool)));
        first_calls(&mut group, source, &cases[1], &owner);
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
