//! `executor health`, the real binary: 0 when the server is ready, 1 with
//! the reason otherwise; against the real `executor serve` and against
//! stand-in servers that answer what a server with `/readyz` would.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};

/// `executor health --url URL`, off the runtime that serves the stand-ins.
async fn health(url: &str) -> Output {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_executor")).args(["health", "--url", &url]).output().expect("run health")
    })
    .await
    .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A stand-in server: each request gets the answer `route` gives its path.
async fn stand_in(route: fn(&str) -> (&'static str, &'static str)) -> SocketAddr {
    executor_tests::stand_in::json_stand_in(move |path| {
        let (status, body) = route(path);
        (status, body.to_owned())
    })
    .await
}

#[tokio::test]
async fn a_running_server_is_healthy() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("EXECUTOR_PUBLIC_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    std::thread::spawn(move || stdout.lines().for_each(drop));
    // As the server prints it: the MCP URL, which `health` takes as it is.
    let url = first.trim().strip_prefix("Executor is listening on ").expect(&first).to_owned();
    let out = health(&url).await;
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // `live` while the server has no /readyz; `ready` once it has.
    assert!(stdout.starts_with("ready: ") || stdout.starts_with("live: "), "{stdout}");
}

#[tokio::test]
async fn ready_is_0_and_degraded_is_1_with_each_unavailable_source_and_why() {
    let ready = stand_in(|path| match path {
        "/readyz" => ("200 OK", r#"{"status":"ready","sources":{"gh":{"state":"connected"}}}"#),
        _ => ("404 Not Found", "not found"),
    })
    .await;
    let out = health(&format!("http://{ready}")).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), format!("ready: http://{ready}/readyz answered 200"));

    let degraded = stand_in(|path| match path {
        "/readyz" => (
            "503 Service Unavailable",
            r#"{"status":"degraded","sources":{"gh":{"state":"unavailable","reason":"spec download failed: connection refused","since":"2026-12-01T10:00:00.000Z","nextRetryAt":"2026-12-01T10:01:00.000Z"}}}"#,
        ),
        _ => ("200 OK", "ok"),
    })
    .await;
    let out = health(&format!("http://{degraded}/")).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr).trim(),
        format!(
            "executor: not ready: http://{degraded}/readyz answered 503: source gh is unavailable: spec download \
             failed: connection refused (next retry 2026-12-01T10:01:00.000Z)"
        )
    );
    assert_eq!(text(&out.stdout), "", "nothing on stdout when not ready");
}

#[tokio::test]
async fn a_server_without_readyz_is_asked_healthz() {
    let live = stand_in(|path| match path {
        "/healthz" => ("200 OK", "ok"),
        _ => ("404 Not Found", "not found"),
    })
    .await;
    let out = health(&format!("http://{live}")).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(&format!("live: http://{live}/healthz answered 200")), "{out:?}");

    let dead = stand_in(|path| match path {
        "/healthz" => ("500 Internal Server Error", r#"{"error":{"message":"store unreachable"}}"#),
        _ => ("404 Not Found", "not found"),
    })
    .await;
    let out = health(&format!("http://{dead}")).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("http://{dead}/healthz answered 500: store unreachable")), "{stderr}");
}

#[tokio::test]
async fn nothing_listening_or_a_bad_url_says_what_to_do() {
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = health(&format!("http://127.0.0.1:{port}")).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("nothing answered at http://127.0.0.1:{port}/readyz"))
            && stderr.contains("is `executor serve` running and listening there?"),
        "{stderr}"
    );

    let out = health("localhost:8787").await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--url must be an http:// or https:// URL with a host"), "{out:?}");
}
