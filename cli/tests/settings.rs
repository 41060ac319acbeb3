//! `executor serve` with a bad setting, the real binary: it stops with one
//! line naming the variable, what it must be and the value it got, before
//! anything is created or printed (no data directory, no store, no key).
//! `serve --help` lists every variable it reads.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `serve` is expected to refuse its settings at once; one that were accepted
/// would serve forever, so it is stopped (and the test fails) after this.
const REFUSAL_BOUND: Duration = Duration::from_secs(60);

/// Settings, the variable the error must name, what it must say is expected, the value it must show.
type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, &'a str, &'a str);

struct Refused {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Run `executor serve` on a fresh `data_dir` with `env` and only that
/// (no `EXECUTOR_*` of the caller's), until it exits.
fn serve(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Refused {
    let mut command = Command::new(env!("CARGO_BIN_EXE_executor"));
    command.arg("serve").args(["--addr", "127.0.0.1:0", "--data-dir"]).arg(data_dir).args(args);
    for (name, _) in std::env::vars().filter(|(n, _)| n.starts_with("EXECUTOR_") || n.starts_with("OTEL_")) {
        command.env_remove(name);
    }
    let mut child = command.envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > REFUSAL_BOUND {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("serve accepted {env:?} and kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    Refused { success: status.success(), stdout, stderr }
}

#[test]
fn each_bad_setting_is_refused_before_anything_is_created_or_printed() {
    let ms = "a whole number of milliseconds greater than zero";
    let url = "an http:// or https:// URL with a host";
    let oidc = [("EXECUTOR_OIDC_ISSUER", "https://idp.example"), ("EXECUTOR_OIDC_AUDIENCE", "executor")];
    let cases: Vec<Case> = vec![
        (vec![("EXECUTOR_SESSION_TIMEOUT_MS", "30m")], "EXECUTOR_SESSION_TIMEOUT_MS", ms, "\"30m\""),
        (vec![("EXECUTOR_PAUSED_LEASE_MS", "0")], "EXECUTOR_PAUSED_LEASE_MS", ms, "\"0\""),
        (vec![("EXECUTOR_APPROVAL_WINDOW_MS", "-5")], "EXECUTOR_APPROVAL_WINDOW_MS", ms, "\"-5\""),
        (vec![("EXECUTOR_APPROVAL_WAIT_MS", "1.5")], "EXECUTOR_APPROVAL_WAIT_MS", ms, "\"1.5\""),
        (
            vec![("EXECUTOR_MAX_CONCURRENT_EXECUTIONS", "lots")],
            "EXECUTOR_MAX_CONCURRENT_EXECUTIONS",
            "a whole number greater than zero",
            "\"lots\"",
        ),
        (
            vec![("EXECUTOR_ELICITATION_MODE", "foo")],
            "EXECUTOR_ELICITATION_MODE",
            "model, browser or native",
            "\"foo\"",
        ),
        (vec![("EXECUTOR_PUBLIC_URL", "notaurl")], "EXECUTOR_PUBLIC_URL", url, "\"notaurl\""),
        (
            vec![("EXECUTOR_REQUEST_STATE_KEY", "too short")],
            "EXECUTOR_REQUEST_STATE_KEY",
            "at least 32 bytes",
            // A key is never echoed.
            "\"(hidden)\"",
        ),
        (vec![oidc[0]], "EXECUTOR_OIDC_AUDIENCE", "set with EXECUTOR_OIDC_ISSUER", "\"\""),
        (vec![("EXECUTOR_OIDC_ISSUER", "idp.example"), oidc[1]], "EXECUTOR_OIDC_ISSUER", url, "\"idp.example\""),
        (
            vec![oidc[0], oidc[1], ("EXECUTOR_OIDC_JWKS_URL", "jwks.json")],
            "EXECUTOR_OIDC_JWKS_URL",
            url,
            "\"jwks.json\"",
        ),
        (
            vec![oidc[0], oidc[1], ("EXECUTOR_OIDC_SHARE_KEY_OWNERS", "maybe")],
            "EXECUTOR_OIDC_SHARE_KEY_OWNERS",
            "true or false",
            "\"maybe\"",
        ),
        (
            vec![("EXECUTOR_TELEMETRY_FLUSH_MS", "soon")],
            "EXECUTOR_TELEMETRY_FLUSH_MS",
            "a whole number of milliseconds",
            "\"soon\"",
        ),
        (vec![("EXECUTOR_HEADER_TIMEOUT_MS", "0")], "EXECUTOR_HEADER_TIMEOUT_MS", ms, "'0'"),
        (
            vec![("EXECUTOR_MAX_CONNECTIONS", "many")],
            "EXECUTOR_MAX_CONNECTIONS",
            "a whole number greater than zero",
            "'many'",
        ),
        (
            vec![("EXECUTOR_BUSY_POLL_US", "20000")],
            "EXECUTOR_BUSY_POLL_US",
            "a whole number of microseconds from 0 to 10000",
            "'20000'",
        ),
        (
            vec![("EXECUTOR_EVENT_WEBHOOK", "http://hooks.example.com/executor")],
            "EXECUTOR_EVENT_WEBHOOK",
            "an https:// URL, or http:// on a loopback address",
            "\"http://hooks.example.com/executor\"",
        ),
        (vec![("EXECUTOR_EVENT_BUS", "my bus")], "EXECUTOR_EVENT_BUS", "an EventBridge event bus name", "\"my bus\""),
        (vec![("EXECUTOR_CONFIG", "/nonexistent/executor.toml")], "EXECUTOR_CONFIG", "", "/nonexistent/executor.toml"),
    ];
    for (env, name, expected, value) in cases {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("fresh");
        let refused = serve(&data, &[], &env);
        assert!(!refused.success, "{env:?} was accepted");
        assert_eq!(refused.stdout, "", "{env:?}: nothing is printed before the error (no key)");
        assert!(!data.exists(), "{env:?}: the data directory was created");
        // One line; the command-line parser adds its usual pointer to --help.
        let (error, rest) = refused.stderr.split_once('\n').unwrap_or((&refused.stderr, ""));
        assert!(
            matches!(rest.trim(), "" | "For more information, try '--help'."),
            "{env:?}: one line: {}",
            refused.stderr
        );
        assert!(error.starts_with("executor: ") || error.starts_with("error: invalid value"), "{error}");
        for part in [name, expected, value] {
            assert!(error.contains(part), "{env:?}: {part:?} missing from: {error}");
        }
        // The mode is not a number: the message must not say it is.
        if name == "EXECUTOR_ELICITATION_MODE" {
            assert!(!error.contains("milliseconds"), "{error}");
        }
    }
}

#[test]
fn a_bad_setting_with_dynamodb_touches_no_table() {
    // No table, no region, no credentials needed: the setting fails first.
    let dir = tempfile::tempdir().unwrap();
    let refused = serve(dir.path(), &["--store", "dynamodb"], &[("EXECUTOR_ELICITATION_MODE", "foo")]);
    assert!(!refused.success);
    assert_eq!(refused.stdout, "");
    assert!(
        refused.stderr.contains("EXECUTOR_ELICITATION_MODE must be model, browser or native"),
        "{}",
        refused.stderr
    );
}

#[test]
fn serve_help_lists_every_variable_serve_reads() {
    let help = Command::new(env!("CARGO_BIN_EXE_executor")).args(["serve", "--help"]).output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    // Every `EXECUTOR_*` name in the code `serve` runs, except the Lambda
    // functions' own (their telemetry, their Scheduler wiring).
    let lambda_only = ["EXECUTOR_METRICS_NAMESPACE", "EXECUTOR_SCHEDULE_GROUP"];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut names = Vec::new();
    for file in [
        "cli/src/main.rs",
        "shared/service/src/config.rs",
        "shared/telemetry/src/lib.rs",
        "shared/catalog/src/config.rs",
        "shared/core/src/quota.rs",
        "shared/store/src/dynamodb/mod.rs",
    ] {
        let source = std::fs::read_to_string(root.join(file)).unwrap();
        for (at, _) in source.match_indices("\"EXECUTOR_") {
            let name: String = source[at + 1..].chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
            if !lambda_only.contains(&name.as_str()) && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    assert!(names.len() >= 18, "the scan found the variables: {names:?}");
    let missing: Vec<_> = names.iter().filter(|n| !help.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "serve --help does not mention {missing:?}:\n{help}");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let missing: Vec<_> = names.iter().filter(|n| !readme.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "README.md does not mention {missing:?}");
}
