//! `executor policy`, the real binary on a sources file of its own: a GitHub
//! source (a small OpenAPI document on file, its base URL on loopback where
//! nothing listens: nothing is called) decided by the example Cedar policies
//! (`examples/policies/github.cedar`), and a toolkit with its own
//! (`examples/policies/sandbox-toolkit.cedar`). `policy check` says what a
//! call would meet, `policy schema` what the policies are checked against,
//! and a mistake in a policy stops `serve` and `check` naming its file and line.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The tools of the document below, as the catalog names them:
/// `<namespace>.<first tag>.<operationId sanitised>`.
const DELETE_REF: &str = "github.git.git_delete_ref";
const COMMENT: &str = "github.issues.issues_create_comment";
const UPDATE: &str = "github.issues.issues_update";
const LIST: &str = "github.issues.issues_list_for_repo";

/// Longer than any command here takes; a command still running then is a failure, not a hang.
const DEADLINE: Duration = Duration::from_secs(60);

/// Four GitHub operations, shaped as in GitHub's own document (`ref` of
/// several segments, `heads/main`, marked `x-multi-segment` as GitHub does).
fn spec() -> Value {
    let param =
        |name: &str, kind: &str| json!({"name": name, "in": "path", "required": true, "schema": {"type": kind}});
    let repo = [param("owner", "string"), param("repo", "string")];
    let issue = [param("owner", "string"), param("repo", "string"), param("issue_number", "integer")];
    let body = |schema: Value| json!({"required": true, "content": {"application/json": {"schema": schema}}});
    let ok = json!({"200": {"description": "ok"}});
    let mut multi_segment = param("ref", "string");
    multi_segment["x-multi-segment"] = json!(true);
    json!({
        "openapi": "3.0.3",
        "info": {"title": "GitHub, four operations", "version": "1"},
        "paths": {
            "/repos/{owner}/{repo}/git/refs/{ref}": {"delete": {
                "operationId": "git/delete-ref", "tags": ["git"], "summary": "Delete a reference",
                "parameters": [param("owner", "string"), param("repo", "string"), multi_segment],
                "responses": {"204": {"description": "deleted"}},
            }},
            "/repos/{owner}/{repo}/issues": {"get": {
                "operationId": "issues/list-for-repo", "tags": ["issues"], "summary": "List issues",
                "parameters": repo, "responses": ok,
            }},
            "/repos/{owner}/{repo}/issues/{issue_number}": {"patch": {
                "operationId": "issues/update", "tags": ["issues"], "summary": "Update an issue",
                "parameters": issue,
                "requestBody": body(json!({"type": "object", "properties": {
                    "title": {"type": "string"}, "state": {"type": "string", "enum": ["open", "closed"]},
                }})),
                "responses": ok,
            }},
            "/repos/{owner}/{repo}/issues/{issue_number}/comments": {"post": {
                "operationId": "issues/create-comment", "tags": ["issues"], "summary": "Create a comment",
                "parameters": issue,
                "requestBody": body(json!({"type": "object", "required": ["body"], "properties": {
                    "body": {"type": "string"},
                }})),
                "responses": {"201": {"description": "created"}},
            }},
        },
    })
}

fn example(name: &str) -> String {
    let path = format!(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/policies/{}"), name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// A directory with the sources file `executor.toml`, the document, and
/// `github_cedar` as the executor's policies; the toolkit `sandbox` has the
/// sandbox example's, `readers` only lists issues.
fn sources(github_cedar: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write("github.json", &serde_json::to_string_pretty(&spec()).unwrap());
    write("github.cedar", github_cedar);
    write("sandbox.cedar", &example("sandbox-toolkit.cedar"));
    write(
        "executor.toml",
        "[outbound]\nallow_loopback = true\n\n[policy]\ncedar = \"github.cedar\"\n\n\
         [[sources]]\nnamespace = \"github\"\nkind = \"openapi\"\nspec = \"github.json\"\n\
         base_url = \"http://127.0.0.1:9/api\"\n\n\
         [[toolkits]]\nname = \"sandbox\"\ntools = [\"github.*\"]\ncedar = \"sandbox.cedar\"\n\n\
         [[toolkits]]\nname = \"readers\"\ntools = [\"github.issues.issues_list*\"]\n",
    );
    dir
}

fn github() -> tempfile::TempDir {
    sources(&example("github.cedar"))
}

struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// `command` run to its end with `vars` set (and none of the test's own
/// `EXECUTOR_*`), within [`DEADLINE`]: killed past it.
fn bounded(mut command: Command, vars: &[(&str, &str)]) -> Ran {
    for var in ["EXECUTOR_CONFIG", "EXECUTOR_CATALOG_INDEX", "EXECUTOR_PUBLIC_URL"] {
        command.env_remove(var);
    }
    command.envs(vars.iter().copied());
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start executor");
    // Drained as it comes, so the command never blocks on a full pipe.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    // Waited for on a thread of its own, so the deadline bounds the wait without polling.
    let pid = child.id();
    let (done, exited) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait()));
    let status = match exited.recv_timeout(DEADLINE) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("{command:?} still ran after {DEADLINE:?}: {}", stderr.join().unwrap());
        }
    };
    Ran { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

fn executor(args: &[&str]) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_executor"));
    command.args(args);
    bounded(command, &[])
}

fn config(dir: &tempfile::TempDir) -> String {
    dir.path().join("executor.toml").to_str().unwrap().to_owned()
}

/// `executor policy check` of `tool` with `args` by `owner`, and `extra` flags.
fn check(dir: &tempfile::TempDir, owner: &str, tool: &str, args: &Value, extra: &[&str]) -> Ran {
    let (config, args) = (config(dir), args.to_string());
    let flags = ["policy", "check", "--config", &config, "--owner", owner, "--tool", tool, "--args", &args];
    executor(&[&flags[..], extra].concat())
}

/// A check that decides: its `decision:`, `policies:` and `reason:` lines.
fn decided(ran: Ran) -> (String, String, Option<String>) {
    assert!(ran.status.success(), "exit {}: {}", ran.status, ran.stderr);
    let mut lines = ran.stdout.lines();
    let mut line = |key: &str| lines.next().and_then(|l| l.strip_prefix(key)).map(str::to_owned);
    let (decision, policies, reason) = (line("decision: "), line("policies: "), line("reason: "));
    let decided = (decision.expect(&ran.stdout), policies.expect(&ran.stdout), reason);
    assert_eq!(ran.stdout.lines().count(), 2 + usize::from(decided.2.is_some()), "{}", ran.stdout);
    decided
}

/// A command that fails: its stderr.
fn failed(ran: Ran) -> String {
    assert!(!ran.status.success(), "it succeeded: {}", ran.stdout);
    assert!(ran.stdout.is_empty(), "a failure prints no decision: {}", ran.stdout);
    ran.stderr
}

fn comment(owner: &str) -> Value {
    json!({"owner": owner, "repo": "web", "issue_number": 7, "body": {"body": "Looks good"}})
}

#[test]
fn a_call_is_decided_by_the_cedar_policies_and_named_by_them() {
    let dir = github();
    let (decision, policies, reason) = decided(check(&dir, "alice", COMMENT, &comment("acme"), &[]));
    assert_eq!((decision.as_str(), policies.as_str(), reason), ("run", "issue-comments-and-labels-run", None));

    let close = json!({"owner": "acme", "repo": "web", "issue_number": 7, "body": {"state": "closed"}});
    let (decision, policies, reason) = decided(check(&dir, "alice", UPDATE, &close, &[]));
    assert_eq!((decision.as_str(), policies.as_str()), ("approve", "closing-an-issue-asks"));
    let reason = reason.unwrap();
    assert!(
        reason.starts_with(&format!(
            "tools.{UPDATE} (PATCH /repos/{{owner}}/{{repo}}/issues/{{issue_number}}) needs approval"
        )),
        "{reason}"
    );
    assert!(reason.ends_with("Cedar policy `closing-an-issue-asks`"), "{reason}");

    // The fourth write of an execution asks, whatever the tool.
    let (decision, policies, _) = decided(check(&dir, "alice", COMMENT, &comment("acme"), &["--writes", "3"]));
    assert_eq!((decision.as_str(), policies.as_str()), ("approve", "at-most-three-unattended-writes"));
    let (decision, _, _) = decided(check(&dir, "alice", COMMENT, &comment("acme"), &["--calls", "9", "--writes", "2"]));
    assert_eq!(decision, "run");

    let read = json!({"owner": "acme", "repo": "web"});
    let (decision, policies, _) = decided(check(&dir, "alice", &format!("tools.{LIST}"), &read, &[]));
    assert_eq!((decision.as_str(), policies.as_str()), ("run", "reads-run"));

    // No policy lets it run unattended: it asks, and no policy is named.
    let feature = json!({"owner": "acme", "repo": "web", "ref": "heads/feature"});
    let (decision, policies, _) = decided(check(&dir, "alice", DELETE_REF, &feature, &[]));
    assert_eq!((decision.as_str(), policies.as_str()), ("approve", "cedar:default"));
    let tmp = json!({"owner": "acme", "repo": "web", "ref": "heads/tmp/spike"});
    let (decision, policies, _) = decided(check(&dir, "alice", DELETE_REF, &tmp, &[]));
    assert_eq!((decision.as_str(), policies.as_str()), ("run", "tmp-branches-go-unattended"));

    let main = json!({"owner": "acme", "repo": "web", "ref": "heads/main"});
    let (decision, policies, reason) = decided(check(&dir, "alice", DELETE_REF, &main, &[]));
    assert_eq!((decision.as_str(), policies.as_str()), ("block", "never-delete-main"));
    let blocked = format!(
        "tools.{DELETE_REF} (DELETE /repos/{{owner}}/{{repo}}/git/refs/{{ref}}) is blocked by Cedar policy \
         `never-delete-main`"
    );
    assert_eq!(reason.as_deref(), Some(blocked.as_str()));
}

/// A ref that would leave its segments is refused on its arguments, as the
/// call itself would be, before any policy is asked.
#[test]
fn a_ref_that_leaves_its_segments_fails_before_any_policy_is_asked() {
    let dir = github();
    let escape = json!({"owner": "acme", "repo": "web", "ref": "heads/../main"});
    let stderr = failed(check(&dir, "alice", DELETE_REF, &escape, &[]));
    assert!(stderr.contains(&format!("tools.{DELETE_REF} would fail with invalid_arguments")), "{stderr}");
    assert!(stderr.contains("argument `ref` (path parameter of several segments)"), "{stderr}");
}

#[test]
fn a_toolkit_s_own_policies_tighten_its_view() {
    let dir = github();
    let sandbox = ["--toolkit", "sandbox"];
    let (decision, policies, reason) = decided(check(&dir, "alice", COMMENT, &comment("acme"), &sandbox));
    assert_eq!((decision.as_str(), policies.as_str()), ("block", "only-acme-sandbox"));
    let reason = reason.unwrap();
    assert!(reason.contains("toolkit `sandbox`") && reason.contains("`only-acme-sandbox`"), "{reason}");
    let (decision, _, _) = decided(check(&dir, "alice", COMMENT, &comment("acme-sandbox"), &sandbox));
    assert_eq!(decision, "run");
    // Outside the toolkit, its policies do not apply.
    let (decision, _, _) = decided(check(&dir, "alice", COMMENT, &comment("acme"), &[]));
    assert_eq!(decision, "run");

    let stderr = failed(check(&dir, "alice", COMMENT, &comment("acme"), &["--toolkit", "readers"]));
    assert!(stderr.contains(&format!("tools.{COMMENT} is not in toolkit `readers`")), "{stderr}");
    let stderr = failed(check(&dir, "alice", COMMENT, &comment("acme"), &["--toolkit", "writers"]));
    assert!(stderr.contains("no toolkit `writers` in the sources file; its toolkits: sandbox, readers"), "{stderr}");
}

#[test]
fn policy_schema_prints_the_schema_with_the_catalog_s_namespaces() {
    let dir = github();
    let ran = executor(&["policy", "schema", "--config", &config(&dir)]);
    assert!(ran.status.success(), "{}", ran.stderr);
    let schema = ran.stdout;
    assert!(schema.contains("//   github: openapi, 4 tools"), "{schema}");
    for declared in ["namespace Executor {", "entity Owner", "entity Tool", "action call, call_unattended"] {
        assert!(schema.contains(declared), "{declared}: {schema}");
    }
}

/// Line of the first line of `text` holding `needle`, from 1.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|line| line.contains(needle)).expect(needle) + 1
}

#[test]
fn a_mistake_in_the_policies_stops_serve_and_check_naming_its_file_and_line() {
    let typo = example("github.cedar").replacen("resource.kind == \"read\"", "resource.knd == \"read\"", 1);
    assert!(typo.contains("resource.knd"), "the example still has `resource.kind == \"read\"`");
    let dir = sources(&typo);
    let file = dir.path().join("github.cedar");
    let place = format!("{}:{}:", file.display(), line_of(&typo, "resource.knd"));
    let named = |stderr: &str| stderr.contains(&place) && stderr.contains("knd") && stderr.contains("reads-run");

    let data = dir.path().join("data");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_executor"));
    serve.args(["serve", "--addr", "127.0.0.1:0", "--config", &config(&dir), "--data-dir"]).arg(&data);
    let ran = bounded(serve, &[]);
    assert!(!ran.status.success(), "serve started with a broken policy: {}", ran.stdout);
    assert!(!ran.stdout.contains("listening"), "{}", ran.stdout);
    assert!(named(&ran.stderr), "wanted {place} ... knd: {}", ran.stderr);

    let stderr = failed(check(&dir, "alice", COMMENT, &comment("acme"), &[]));
    assert!(named(&stderr), "wanted {place} ... knd: {stderr}");
    let stderr = failed(executor(&["policy", "schema", "--config", &config(&dir)]));
    assert!(named(&stderr), "wanted {place} ... knd: {stderr}");
}

#[test]
fn mistakes_in_the_flags_say_what_to_do() {
    let dir = github();
    let stderr = failed(check(&dir, "alice", "github.git.delete_ref", &json!({}), &[]));
    assert!(
        stderr.contains(&format!("no tool `github.git.delete_ref` in the catalog (did you mean `{DELETE_REF}`?)")),
        "{stderr}"
    );

    let missing = json!({"owner": "acme", "repo": "web", "body": {"body": "hi"}});
    let stderr = failed(check(&dir, "alice", COMMENT, &missing, &[]));
    assert!(stderr.contains("would fail with invalid_arguments") && stderr.contains("issue_number"), "{stderr}");

    let config = config(&dir);
    let base = ["policy", "check", "--config", &config, "--tool", COMMENT];
    let stderr = failed(executor(&[&base[..], &["--owner", "alice", "--args", "{owner: acme}"]].concat()));
    assert!(stderr.contains("invalid --args: ") && stderr.contains("one JSON object"), "{stderr}");
    let stderr = failed(executor(&[&base[..], &["--owner", " ", "--args", "{}"]].concat()));
    assert!(stderr.contains("invalid --owner: owner name is empty"), "{stderr}");
    let stderr = failed(executor(&[&base[..], &["--owner", "a", "--args", "{}", "--toolkit", "Sand Box"]].concat()));
    assert!(stderr.contains("invalid --toolkit: "), "{stderr}");
    let counts = ["--owner", "a", "--args", "{}", "--calls", "1", "--writes", "3"];
    let stderr = failed(executor(&[&base[..], &counts].concat()));
    assert!(stderr.contains("--calls 1 is fewer than --writes 3"), "{stderr}");

    let stderr = failed(executor(&["policy", "check", "--owner", "a", "--tool", COMMENT, "--args", "{}"]));
    assert!(stderr.contains("no sources file: pass --config FILE or set EXECUTOR_CONFIG"), "{stderr}");
}

#[test]
fn the_sources_file_may_come_from_executor_config() {
    let dir = github();
    let mut command = Command::new(env!("CARGO_BIN_EXE_executor"));
    command.args(["policy", "schema"]);
    let ran = bounded(command, &[("EXECUTOR_CONFIG", &config(&dir))]);
    assert!(ran.status.success(), "{}", ran.stderr);
    assert!(ran.stdout.contains("//   github: openapi, 4 tools"), "{}", ran.stdout);
}
