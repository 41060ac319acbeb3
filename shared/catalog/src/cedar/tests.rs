//! The policy sets as tables: the examples' decisions call by call, and the
//! checks at start with the file and line they name; and generated sets,
//! whose every call the slices must decide as the whole set does.

use std::path::PathBuf;

use executor_core::{Effect, PolicyAction, Principal, ToolkitName};
use executor_sandbox::{CallCounts, PolicyCall};
use serde_json::{Value, json};

use super::*;

const GITHUB: &str = include_str!("../../../../examples/policies/github.cedar");
const SANDBOX: &str = include_str!("../../../../examples/policies/sandbox-toolkit.cedar");

fn policies(text: &str) -> Result<CedarPolicies, CedarError> {
    let source = CedarSource { file: PathBuf::from("policies/github.cedar"), text: text.to_owned() };
    CedarPolicies::load(&source, &|path| Some(path.starts_with("github.")))
}

/// A GitHub operation as the catalog describes it.
fn github(method: &'static str, path_template: &'static str, operation: &'static str) -> ToolFacts<'static> {
    let kind = if method == "GET" { Effect::Read } else { Effect::Write };
    ToolFacts {
        namespace: "github",
        kind,
        source_kind: "openapi",
        method,
        path_template,
        operation,
        destructive: method == "DELETE",
    }
}

fn decide(set: &CedarPolicies, tool: &ToolFacts<'_>, args: Value, writes: u32, toolkit: Option<&str>) -> CedarDecision {
    let owner = Principal::parse("alice").unwrap();
    let toolkit = toolkit.map(|t| ToolkitName::parse(t).unwrap());
    let before = CallCounts { calls: writes + 1, writes, calls_to_tool: 0 };
    let call =
        PolicyCall { owner: Some(&owner), toolkit: toolkit.as_ref(), before, ..PolicyCall::new("github.x.y", &args) };
    set.decide(&call, tool)
}

#[test]
fn the_github_examples_decide_call_by_call() {
    use PolicyAction::{Approve, Block, Run};
    let set = policies(GITHUB).unwrap();
    let comment = github("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/create-comment");
    let labels = github("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels", "issues/add-labels");
    let update = github("PATCH", "/repos/{owner}/{repo}/issues/{issue_number}", "issues/update");
    let delete_ref = github("DELETE", "/repos/{owner}/{repo}/git/refs/{ref}", "git/delete-ref");
    let list = github("GET", "/repos/{owner}/{repo}/issues", "issues/list-for-repo");
    let repo = json!({"owner": "acme", "repo": "web", "issue_number": 7});
    // A case: the call (tool, arguments, writes before), the decision and the ids that made it.
    type Case<'a> = (&'a str, &'a ToolFacts<'a>, Value, u32, PolicyAction, &'a [&'a str]);
    let cases: [Case; 11] = [
        ("a read runs", &list, repo.clone(), 9, Run, &["reads-run"]),
        ("a comment runs", &comment, json!({"body": {"body": "hi"}}), 0, Run, &["issue-comments-and-labels-run"]),
        ("labels run", &labels, json!({"body": {"labels": ["bug"]}}), 2, Run, &["issue-comments-and-labels-run"]),
        (
            "the fourth write asks",
            &comment,
            json!({"body": {"body": "hi"}}),
            3,
            Approve,
            &["at-most-three-unattended-writes"],
        ),
        ("closing asks", &update, json!({"body": {"state": "closed"}}), 0, Approve, &["closing-an-issue-asks"]),
        ("retitling asks too, by default", &update, json!({"body": {"title": "t"}}), 0, Approve, &[]),
        ("a tmp branch goes", &delete_ref, json!({"ref": "heads/tmp/spike"}), 0, Run, &["tmp-branches-go-unattended"]),
        ("another branch asks", &delete_ref, json!({"ref": "heads/feature"}), 0, Approve, &[]),
        ("main never goes", &delete_ref, json!({"ref": "heads/main"}), 0, Block, &["never-delete-main"]),
        (
            "main never goes, granted or not",
            &delete_ref,
            json!({"ref": "heads/main", "extra": null}),
            5,
            Block,
            &["never-delete-main"],
        ),
        // An argument of another type than the policy compares makes its condition fail: it does not apply.
        ("a ref that is no string", &delete_ref, json!({"ref": 7}), 0, Approve, &[]),
    ];
    for (case, tool, args, writes, action, ids) in cases {
        let decision = decide(&set, tool, args, writes, None);
        let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        assert_eq!((decision.action, decision.policies), (action, ids), "{case}");
    }
    let asks = decide(&set, &delete_ref, json!({"ref": "heads/x"}), 0, None);
    assert_eq!(
        (asks.id(), asks.reason()),
        ("cedar:default".into(), "the Cedar policies (none lets it run unattended)".into())
    );
    let blocked = decide(&set, &delete_ref, json!({"ref": "heads/main"}), 0, None);
    assert_eq!(
        (blocked.id(), blocked.reason()),
        ("never-delete-main".into(), "Cedar policy `never-delete-main`".into())
    );
}

#[test]
fn the_sandbox_toolkit_only_touches_its_org() {
    let set = policies(SANDBOX).unwrap();
    let comment = github("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/create-comment");
    let cases = [
        (json!({"owner": "acme-sandbox", "repo": "play"}), PolicyAction::Run, "sandbox-everything"),
        (json!({"owner": "acme", "repo": "web"}), PolicyAction::Block, "only-acme-sandbox"),
        (json!({"repo": "web"}), PolicyAction::Block, "only-acme-sandbox"),
    ];
    for (args, action, ids) in cases {
        let decision = decide(&set, &comment, args.clone(), 0, Some("sandbox"));
        assert_eq!((decision.action, decision.policies), (action, vec![ids.to_owned()]), "{args}");
    }
}

#[test]
fn the_principal_and_the_counts_are_there_to_be_seen() {
    let set = policies(
        r#"permit(principal == Executor::Owner::"alice", action, resource)
           when { principal.toolkit == "" && context.execution.calls_to_tool < 1 && context.execution.calls < 10 };"#,
    )
    .unwrap();
    let tool = github("POST", "/x", "x");
    let owner = Principal::parse("alice").unwrap();
    let args = json!({});
    let first = PolicyCall { owner: Some(&owner), ..PolicyCall::new("github.x", &args) };
    assert_eq!(set.decide(&first, &tool).action, PolicyAction::Run);
    let again = PolicyCall { before: CallCounts { calls: 1, writes: 1, calls_to_tool: 1 }, ..first };
    assert_eq!(set.decide(&again, &tool).action, PolicyAction::Block);
    let bob = Principal::parse("bob").unwrap();
    assert_eq!(set.decide(&PolicyCall { owner: Some(&bob), ..first }, &tool).action, PolicyAction::Block);
}

#[test]
fn arguments_become_cedar_values_and_never_entities() {
    // Shaped like Cedar's JSON escape for an entity: it stays a record.
    let set = policies(
        r#"@id("entity") forbid(principal, action, resource) when { context.args has who && context.args.who == principal };
           @id("all") permit(principal, action, resource);
           @id("float") forbid(principal, action, resource) when { context.args has n && context.args.n == "1.5" };
           @id("deep") forbid(principal, action, resource) when { context.args has a && context.args.a has b };
           @id("deeper") forbid(principal, action, resource) when { context.args has a && context.args.a has a };"#,
    )
    .unwrap();
    let tool = github("POST", "/x", "x");
    let cases = [
        (json!({"who": {"__entity": {"type": "Executor::Owner", "id": "alice"}}}), PolicyAction::Run),
        (json!({"n": 1.5}), PolicyAction::Block),
        (json!({"a": {"b": null}}), PolicyAction::Run),
        (json!({"a": {"b": [1, null, "x"]}}), PolicyAction::Block),
        (json!(["not", "an", "object"]), PolicyAction::Run),
    ];
    for (args, action) in cases {
        assert_eq!(decide(&set, &tool, args.clone(), 0, None).action, action, "{args}");
    }
    let mut deep = json!("bottom");
    for _ in 0..200 {
        deep = json!({"a": deep});
    }
    assert_eq!(decide(&set, &tool, deep, 0, None).action, PolicyAction::Block, "deep values are cut, not followed");
}

#[test]
fn mistakes_stop_the_start_naming_the_file_and_line() {
    // Each case follows a valid policy of two lines: its line 1 is the file's line 3.
    let ok_first = "@id(\"ok\")\npermit(principal, action, resource);\n";
    let cases = [
        ("permit(principal, action, resource)\n", 1, "unexpected end of input"),
        (
            "@id(\"kinds\")\npermit(principal, action, resource)\nwhen { resource.knd == \"read\" };",
            3,
            "policy `kinds`",
        ),
        (
            "permit(principal, action, resource)\nwhen { context.execution.writes == \"3\" };",
            2,
            "policy `github.cedar:3`",
        ),
        ("permit(principal, action, resource)\nwhen { context.args has id && resource.knd == \"x\" };", 2, "knd"),
        ("permit(principal, action == Executor::Action::\"cal\", resource);", 1, "cal"),
        ("permit(principal, action, resource == Executor::Tol::\"x\");", 1, "Tol"),
        ("permit(principal, action, resource == Executor::Tool::\"gitlab.x\");", 1, "gitlab.x\", which no source has"),
        (
            "@id(\"a\")\npermit(principal, action, resource);\n@id(\"a\")\nforbid(principal, action, resource);",
            3,
            "two policies have the id `a`",
        ),
        ("permit(principal == ?principal, action, resource);", 1, "templates"),
    ];
    for (text, line, words) in cases {
        let text = format!("{ok_first}{text}");
        let error = policies(&text).map(drop).unwrap_err().to_string();
        let place = format!("policies/github.cedar:{}:", line + 2);
        assert!(error.starts_with(&place) && error.contains(words), "{text}\n -> {error}\n wanted {place} ... {words}");
    }
}

#[test]
fn arguments_stay_open_and_unchecked() {
    let accepted = [
        "permit(principal, action, resource) when { context.args has id && context.args.id == 7 };",
        "permit(principal, action, resource) when { context.args.ref like \"heads/*\" };",
        "permit(principal, action, resource) when { context.args has body && context.args.body.state == \"closed\" };",
    ];
    for text in accepted {
        assert!(policies(text).is_ok(), "{text}: {:?}", policies(text).err());
    }
    let set = policies(accepted[0]).unwrap();
    let tool = github("POST", "/x", "x");
    assert_eq!(decide(&set, &tool, json!({"id": 7}), 0, None).action, PolicyAction::Run);
    assert_eq!(decide(&set, &tool, json!({"id": 8}), 0, None).action, PolicyAction::Block);
}

#[test]
fn the_schema_parses_and_names_the_namespaces() {
    let text = schema_text(&[("github".into(), "openapi", 1223)]);
    assert!(text.contains("//   github: openapi, 1223 tools"), "{text}");
    let body: String = text.lines().filter(|l| !l.starts_with("//")).collect::<Vec<_>>().join("\n");
    let (_, warnings) = cedar_policy::Schema::from_cedarschema_str(&body).unwrap();
    assert_eq!(warnings.count(), 0);
}

/// Policies of every kind the slicing follows, and of kinds it does not.
const MIXED: &str = r#"
@id("scoped") permit(principal, action == Executor::Action::"call_unattended", resource == Executor::Tool::"github.git.delete_ref");
@id("scoped-forbid") forbid(principal, action, resource == Executor::Tool::"github.repos.delete") when { context.args has repo && context.args.repo == "prod" };
@id("in-actions") permit(principal, action in [Executor::Action::"call", Executor::Action::"call_unattended"], resource) when { resource.source_kind == "mcp" };
@id("resource-in") forbid(principal, action, resource in Executor::Tool::"github.issues.update") when { context.execution.calls > 5 };
@id("resource-is") permit(principal, action == Executor::Action::"call_unattended", resource is Executor::Tool) when { resource.method == "HEAD" };
@id("alice") permit(principal == Executor::Owner::"alice", action == Executor::Action::"call_unattended", resource) when { resource.path_template like "/repos/*/issues*" };
@id("principal-in") forbid(principal in Executor::Owner::"bob", action == Executor::Action::"call_unattended", resource);
@id("kit") forbid(principal, action, resource) when { principal.toolkit like "kit*" && resource.destructive };
@id("kit-has") permit(principal, action == Executor::Action::"call_unattended", resource) when { principal has toolkit && principal.toolkit == "sandbox" && resource.kind == "write" };
@id("unless") forbid(principal, action == Executor::Action::"call_unattended", resource) unless { resource.namespace == "github" };
@id("not-equal") forbid(principal, action == Executor::Action::"call_unattended", resource) when { resource.kind != "read" && context.execution.writes >= 3 };
@id("if") forbid(principal, action, resource) when { if context.args has n then context.args.n > 3 else false };
@id("arithmetic") forbid(principal, action == Executor::Action::"call_unattended", resource) when { context.execution.calls_to_tool + 1 > 3 };
@id("unguarded") permit(principal, action == Executor::Action::"call_unattended", resource) when { context.args.ref like "heads/tmp/*" };
@id("nested") forbid(principal, action == Executor::Action::"call_unattended", resource) when { context.args has body && context.args.body has title && context.args.body.title like "*WIP*" };
@id("deep") forbid(principal, action, resource) when { context.args has a && context.args.a has b && context.args.a.b.c == true };
@id("set") permit(principal, action == Executor::Action::"call_unattended", resource) when { context.args has labels && context.args.labels.contains("bug") };
@id("set-any") forbid(principal, action, resource) when { context.args has labels && context.args.labels.containsAny(["wontfix", "spam"]) };
@id("float") forbid(principal, action, resource) when { context.args has n && context.args.n == "1.5" };
@id("or") permit(principal, action == Executor::Action::"call_unattended", resource) when { context.args has dry_run && (context.args.dry_run == true || resource.operation == "x") };
@id("literal-set") permit(principal, action == Executor::Action::"call_unattended", resource) when { ["issues/list-for-repo", "repos/get"].contains(resource.operation) };
@id("whole-context") forbid(principal, action == Executor::Action::"call", resource) when { context has args && context.args has stop };
@id("action-in-body") permit(principal, action, resource) when { action == Executor::Action::"call" && resource.kind == "read" };
"#;

/// The generated policies of `slices_decide_as_the_whole_set_does`: many, each about a few calls.
fn generated() -> String {
    (0..40).fold(String::new(), |mut text, i| {
        text.push_str(&format!(
            "@id(\"g{i}\") forbid(principal, action == Executor::Action::\"call_unattended\", resource) when {{ context.args has ref && context.args.ref like \"heads/release-{i}/*\" }};\n\
             @id(\"h{i}\") permit(principal, action, resource) when {{ resource.operation == \"op-{i}\" && context.args has owner && context.args.owner == \"org{i}\" }};\n"
        ));
        text
    })
}

/// Tools of several kinds, some named by the policies.
fn mixed_tools() -> [(&'static str, ToolFacts<'static>); 9] {
    let mcp = ToolFacts {
        namespace: "linear",
        source_kind: "mcp",
        method: "",
        path_template: "",
        ..github("GET", "", "search")
    };
    [
        ("github.issues.list_for_repo", github("GET", "/repos/{owner}/{repo}/issues", "issues/list-for-repo")),
        (
            "github.issues.create_comment",
            github("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/create-comment"),
        ),
        ("github.issues.update", github("PATCH", "/repos/{owner}/{repo}/issues/{issue_number}", "issues/update")),
        ("github.git.delete_ref", github("DELETE", "/repos/{owner}/{repo}/git/refs/{ref}", "git/delete-ref")),
        ("github.repos.delete", github("DELETE", "/repos/{owner}/{repo}", "repos/delete")),
        ("github.repos.head", github("HEAD", "/repos/{owner}/{repo}", "repos/head")),
        ("github.op", github("POST", "/op", "op-7")),
        ("linear.search", mcp.clone()),
        ("linear.delete", ToolFacts { kind: Effect::Write, destructive: true, operation: "delete", ..mcp }),
    ]
}

/// Arguments present, absent, `null`, of other types, nested.
fn mixed_args() -> Vec<Value> {
    vec![
        json!({}),
        json!(null),
        json!(["not", "an", "object"]),
        json!({"ref": "heads/main"}),
        json!({"ref": "heads/tmp/spike", "owner": "acme"}),
        json!({"ref": "heads/release-7/x"}),
        json!({"ref": 7}),
        json!({"ref": null, "repo": "prod"}),
        json!({"owner": "org7", "repo": "web"}),
        json!({"owner": "acme-sandbox", "repo": "play", "ref": "heads/tmp/x"}),
        json!({"body": {"state": "closed", "title": "WIP: x"}}),
        json!({"body": {"title": 3}}),
        json!({"body": "text"}),
        json!({"n": 1.5}),
        json!({"n": 4}),
        json!({"n": "4"}),
        json!({"n": 18446744073709551615u64}),
        json!({"a": {"b": {"c": true}}}),
        json!({"a": {"b": "c"}}),
        json!({"labels": ["bug", null, "x"]}),
        json!({"labels": ["spam"]}),
        json!({"labels": [["nested"]]}),
        json!({"dry_run": true}),
        json!({"dry_run": "yes"}),
        json!({"stop": 1}),
    ]
}

#[test]
fn slices_decide_as_the_whole_set_does() {
    use PolicyAction::{Approve, Block, Run};
    let text = format!("{GITHUB}\n{SANDBOX}\n{MIXED}\n{}", generated());
    let set = policies(&text).unwrap();
    let (tools, args) = (mixed_tools(), mixed_args());
    let principals =
        [(None, None), (Some("alice"), None), (Some("bob"), Some("kit3")), (Some("carol"), Some("sandbox"))];
    let counts = [
        CallCounts::default(),
        CallCounts { calls: 4, writes: 3, calls_to_tool: 2 },
        CallCounts { calls: 9, writes: 1, calls_to_tool: 3 },
    ];
    let (mut seen, mut calls, mut cedar_asked, mut whole_asked) = (std::collections::BTreeSet::new(), 0, 0, 0);
    for (path, tool) in &tools {
        for args in &args {
            for (owner, toolkit) in principals {
                let owner = owner.map(|o| Principal::parse(o).unwrap());
                let toolkit = toolkit.map(|t| ToolkitName::parse(t).unwrap());
                for before in counts {
                    let call = PolicyCall {
                        owner: owner.as_ref(),
                        toolkit: toolkit.as_ref(),
                        before,
                        ..PolicyCall::new(path, args)
                    };
                    let before_asking = CEDAR_ASKED.get();
                    let sliced = set.decide(&call, tool);
                    cedar_asked += CEDAR_ASKED.get() - before_asking;
                    let before_asking = CEDAR_ASKED.get();
                    let whole = set.decide_whole(&call, tool);
                    whole_asked += CEDAR_ASKED.get() - before_asking;
                    assert_eq!(sliced, whole, "{path} {args} {owner:?} {toolkit:?} {before:?}");
                    seen.insert(format!("{:?}", sliced.action));
                    calls += 1;
                }
            }
        }
    }
    assert_eq!(seen, [Run, Approve, Block].map(|a| format!("{a:?}")).into(), "the table meets every action");
    // Calls are answered from the terms where they can be (the policies above
    // that are not followed, `principal in` and arithmetic, ask Cedar of every
    // `call_unattended` here), and Cedar is asked less than for the whole set.
    let asked = format!("Cedar asked {cedar_asked} times for {calls} calls, {whole_asked} for the whole set");
    assert!(0 < cedar_asked && cedar_asked * 3 < whole_asked * 2, "{asked}");
    // The slicing took place: Cedar is asked of fewer policies, or of none.
    let total = text.matches("@id(").count();
    let asked: Vec<_> = tools
        .iter()
        .flat_map(|(path, tool)| set.slices.get(path, tool, &uid("Tool", path)).unwrap().asked_of())
        .collect();
    assert!(asked.iter().all(|n| n.is_some_and(|n| n < total)), "{asked:?} of {total} ({calls} calls)");
    let example = policies(GITHUB).unwrap();
    let (path, read) = &tools[0];
    let slice = example.slices.get(path, read, &uid("Tool", path)).unwrap();
    assert_eq!(slice.asked_of(), [None, None], "a read is known from the tool alone");
}

/// Generated policy sets and arguments, for `slices_follow_cedar_on_generated_sets`:
/// conditions of every kind `terms.rs` follows (and some it leaves to Cedar),
/// over arguments of every shape, so that any call where the terms would
/// say other than Cedar turns up. Such a call is a policy that does not
/// hold: a write run unattended that a `forbid` was written to stop.
mod generated_sets {
    use proptest::prelude::*;

    /// An argument path: what the generated conditions and arguments both name.
    fn arg() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["a", "n", "ref", "a.b", "a.n", "labels"])
    }

    fn literal() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "\"x\"",
            "\"\"",
            "\"heads/x\"",
            "\"1.5\"",
            "\"7\"",
            "7",
            "0",
            "-1",
            "true",
            "false",
            "Executor::Owner::\"alice\"",
            "[\"x\", \"heads/x\"]",
        ])
    }

    fn pattern() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["\"*\"", "\"heads/*\"", "\"*x\"", "\"x\"", "\"\"", "\"*/*\"", "\"h*s/x*\""])
    }

    /// A boolean condition: leaves over the arguments, the tool, the
    /// principal, the counts and the action, joined by `!`, `&&`, `||`, `if`.
    fn condition() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            3 => arg().prop_map(|a| match a.split_once('.') {
                Some((record, name)) => format!("context.args.{record} has {name}"),
                None => format!("context.args has {a}"),
            }),
            2 => (arg(), literal()).prop_map(|(a, l)| format!("context.args.{a} == {l}")),
            1 => (arg(), literal()).prop_map(|(a, l)| format!("context.args.{a} != {l}")),
            2 => (arg(), prop::sample::select(vec!["<", "<=", ">", ">="]), prop::sample::select(vec![-1i64, 0, 7, 8]))
                .prop_map(|(a, op, n)| format!("context.args.{a} {op} {n}")),
            2 => (
                prop::sample::select(vec!["calls", "writes", "calls_to_tool"]),
                prop::sample::select(vec!["<", "<=", ">", ">=", "=="]),
                prop::sample::select(vec![0i64, 3, 9]),
            )
                .prop_map(|(count, op, n)| format!("context.execution.{count} {op} {n}")),
            2 => (arg(), pattern()).prop_map(|(a, p)| format!("context.args.{a} like {p}")),
            1 => (arg(), literal()).prop_map(|(a, l)| format!("context.args.{a}.contains({l})")),
            1 => arg().prop_map(|a| format!("context.args.{a}")),
            1 => arg().prop_map(|a| format!("context.args.{a}.containsAny([\"x\", \"heads/x\"])")),
            3 => prop::sample::select(vec![
                "true",
                "false",
                "resource.kind == \"write\"",
                "resource.destructive",
                "resource.method == \"DELETE\"",
                "resource.namespace like \"git*\"",
                "resource.operation == \"issues/update\"",
                "[\"repos/delete\", \"op-7\"].contains(resource.operation)",
                "resource has namespace",
                "principal.toolkit == \"sandbox\"",
                "principal.toolkit like \"kit*\"",
                "principal == Executor::Owner::\"alice\"",
                "action == Executor::Action::\"call_unattended\"",
                "context.execution.calls_to_tool + 1 > 3",
                "principal in Executor::Owner::\"bob\"",
            ])
            .prop_map(str::to_owned),
        ];
        leaf.prop_recursive(2, 6, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|c| format!("!({c})")),
                (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l}) && ({r})")),
                (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l}) || ({r})")),
                (inner.clone(), inner.clone(), inner).prop_map(|(c, t, e)| format!("if {c} then {t} else {e}")),
            ]
        })
    }

    /// A policy: permit or forbid, scoped or not, with a `when` and maybe an `unless`.
    fn policy() -> impl Strategy<Value = String> {
        let effect = prop::sample::select(vec!["permit", "forbid"]);
        let principal = prop::sample::select(vec!["principal", "principal == Executor::Owner::\"alice\""]);
        let action = prop::sample::select(vec![
            "action",
            "action == Executor::Action::\"call\"",
            "action == Executor::Action::\"call_unattended\"",
        ]);
        let resource = prop::sample::select(vec![
            "resource",
            "resource == Executor::Tool::\"github.repos.delete\"",
            "resource == Executor::Tool::\"github.issues.update\"",
        ]);
        (effect, principal, action, resource, condition(), prop::option::of(condition())).prop_map(
            |(effect, principal, action, resource, when, unless)| {
                let unless = unless.map(|u| format!(" unless {{ {u} }}")).unwrap_or_default();
                format!("{effect}({principal}, {action}, {resource}) when {{ {when} }}{unless};")
            },
        )
    }

    /// A set of one to three policies, each with its id, after the broad
    /// permits most sets have (without one, every call is blocked).
    pub(super) fn policy_set() -> impl Strategy<Value = String> {
        let base = prop::sample::select(vec![
            "permit(principal, action == Executor::Action::\"call\", resource);\n",
            "permit(principal, action == Executor::Action::\"call\", resource);\n\
             permit(principal, action, resource) when { resource.kind == \"read\" };\n",
            "",
        ]);
        (base, prop::collection::vec(policy(), 1..=3)).prop_map(|(base, policies)| {
            let generated: String = policies.iter().enumerate().map(|(i, p)| format!("@id(\"p{i}\") {p}\n")).collect();
            format!("{base}{generated}")
        })
    }

    fn value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::json;
        let plain = prop::sample::select(vec![
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(7),
            json!(-1),
            json!(1.5),
            json!(18446744073709551615u64),
            json!("x"),
            json!(""),
            json!("7"),
            json!("1.5"),
            json!("heads/x"),
            json!("heads/xs/x"),
            json!("alice"),
            // What Cedar's JSON reads as an entity or an extension value: here only records.
            json!({"__entity": {"type": "Executor::Owner", "id": "alice"}}),
            json!({"__extn": {"fn": "decimal", "arg": "1.5"}}),
        ]);
        plain.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(serde_json::Value::Array),
                prop::collection::btree_map(prop::sample::select(vec!["b", "n", "x"]), inner, 0..3).prop_map(
                    |fields| serde_json::Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                ),
            ]
        })
    }

    /// A call's arguments: mostly a record of the names the conditions ask about.
    pub(super) fn arguments() -> impl Strategy<Value = serde_json::Value> {
        let names = prop::sample::select(vec!["a", "n", "ref", "labels", "other"]);
        prop_oneof![
            3 => prop::collection::btree_map(names, value(), 0..4)
                .prop_map(|fields| serde_json::Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            1 => value(),
        ]
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    #[test]
    fn slices_follow_cedar_on_generated_sets(
        text in generated_sets::policy_set(),
        args in proptest::collection::vec(generated_sets::arguments(), 6),
    ) {
        // Every generated policy is well typed: the checks at start take it.
        let set = policies(&text).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{text}")))?;
        let principals = [(Some("alice"), None), (Some("bob"), Some("kit3")), (Some("carol"), Some("sandbox"))];
        let counts = [CallCounts::default(), CallCounts { calls: 9, writes: 3, calls_to_tool: 3 }];
        for (path, tool) in &mixed_tools() {
            for args in &args {
                for (owner, toolkit) in principals {
                    let owner = owner.map(|o| Principal::parse(o).unwrap());
                    let toolkit = toolkit.map(|t| ToolkitName::parse(t).unwrap());
                    for before in counts {
                        let (owner, toolkit) = (owner.as_ref(), toolkit.as_ref());
                        let call = PolicyCall { owner, toolkit, before, ..PolicyCall::new(path, args) };
                        let (sliced, whole) = (set.decide(&call, tool), set.decide_whole(&call, tool));
                        proptest::prop_assert_eq!(sliced, whole, "{}\n{} {} {:?} {:?}", text, path, args, owner, before);
                    }
                }
            }
        }
    }
}
