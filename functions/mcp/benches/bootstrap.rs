//! The MCP bootstrap's cold start: from process start to its first answered
//! request, under a local mock of the Lambda Runtime API; and its size.
//! `cargo bench -p executor-mcp-function --bench bootstrap` times the bench
//! profile's binary; `BOOTSTRAP=<path>` times another, e.g. the deployed
//! `--profile lambda` build. Then the same with a generated 10 MB and 30 MB
//! OpenAPI document, parsed at start and loaded from a catalog index, with
//! each start's peak resident memory (`BIG_SPECS=0` skips these).

#[path = "../tests/runtime_http/mod.rs"]
mod runtime_http;

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const RUNS: usize = 20;
/// Starts per big-document case: each parse of 30 MB takes a good part of a second.
const BIG_RUNS: usize = 7;

/// An API Gateway v2 event for `GET /healthz`.
const EVENT: &str = r#"{"version":"2.0","routeKey":"$default","rawPath":"/healthz","rawQueryString":"","headers":{"host":"abc.execute-api.eu-west-1.amazonaws.com"},"requestContext":{"accountId":"1","apiId":"abc","domainName":"abc.execute-api.eu-west-1.amazonaws.com","domainPrefix":"abc","http":{"method":"GET","path":"/healthz","protocol":"HTTP/1.1","sourceIp":"203.0.113.9","userAgent":"bench"},"requestId":"r","routeKey":"$default","stage":"$default","time":"29/Nov/2026:19:46:21 +0000","timeEpoch":0},"isBase64Encoded":false}"#;

/// Serve `next` once with the event, report the answer, then hold further `next`s.
fn mock_runtime(listener: TcpListener, answered: mpsc::Sender<(Instant, String)>) {
    let mut served = false;
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { return };
        while let Some((line, body)) = runtime_http::read_request(&mut stream) {
            if line.starts_with("GET /2018-06-01/runtime/invocation/next") {
                if served {
                    return; // The bench is done with this process.
                }
                served = true;
                let deadline =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 60_000;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLambda-Runtime-Aws-Request-Id: req-1\r\n\
                     Lambda-Runtime-Deadline-Ms: {deadline}\r\n\
                     Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:eu-west-1:1:function:executor-mcp\r\n\
                     Content-Length: {}\r\n\r\n",
                    EVENT.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(EVENT.as_bytes());
            } else {
                let _ = answered.send((Instant::now(), format!("{line} {}", String::from_utf8_lossy(&body))));
                let _ = stream.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
            }
        }
    }
}

/// Start the bootstrap `runs` times with `env` added: start to first answer
/// (sorted) and the largest peak resident memory (kB) of a start.
fn starts(bootstrap: &str, runs: usize, env: &[(&str, &Path)]) -> (Vec<Duration>, u64) {
    let mut times = Vec::new();
    let mut peak = 0;
    for _ in 0..runs {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let api = listener.local_addr().unwrap().to_string();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || mock_runtime(listener, tx));
        let started = Instant::now();
        let mut child = Command::new(bootstrap)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", &api)
            .env("AWS_LAMBDA_FUNCTION_NAME", "executor-mcp")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
            .env("AWS_REGION", "eu-west-1")
            .env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("EXECUTOR_TABLE", "executor")
            .env("EXECUTOR_SCHEDULE_GROUP", "executor")
            .env("EXECUTOR_ALARM_TARGET_ARN", "arn:aws:lambda:eu-west-1:1:function:executor-alarm")
            .env("EXECUTOR_SCHEDULER_ROLE_ARN", "arn:aws:iam::1:role/executor-scheduler")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the bootstrap");
        let (at, answer) = rx.recv_timeout(Duration::from_secs(30)).expect("the bootstrap answers");
        assert!(answer.contains("/invocation/req-1/response") && answer.contains("200"), "{answer}");
        times.push(at - started);
        peak = peak.max(peak_memory_kb(child.id()));
        let _ = child.kill();
        let _ = child.wait();
    }
    times.sort();
    (times, peak)
}

/// `VmHWM` of a live process: the most resident memory it has had.
fn peak_memory_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap_or("0 kB");
    line.trim().trim_end_matches("kB").trim().parse().unwrap_or(0)
}

fn report(what: &str, (times, peak): (Vec<Duration>, u64)) {
    let runs = times.len();
    println!(
        "{what}: start to first answer over {runs} runs: median {:?}, min {:?}, max {:?}; peak memory {:.1} MB",
        times[runs / 2],
        times[0],
        times[runs - 1],
        peak as f64 / 1024.0
    );
}

fn main() {
    // The deployed build (`--profile lambda`) when named, else the bench profile's.
    let bootstrap = std::env::var("BOOTSTRAP").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mcp-function").to_owned());
    let bootstrap = bootstrap.as_str();
    report("bootstrap, no sources", starts(bootstrap, RUNS, &[]));
    let size = std::fs::metadata(bootstrap).unwrap().len();
    let zipped = Command::new("python3")
        .args(["-c", "import sys, zipfile, io\nb = io.BytesIO()\nz = zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED)\nz.write(sys.argv[1], 'bootstrap')\nz.close()\nprint(len(b.getvalue()))", bootstrap])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!("bootstrap size: {size} bytes, zipped {zipped} bytes ({bootstrap})");
    if std::env::var("BIG_SPECS").is_ok_and(|v| v == "0") {
        return;
    }
    for megabytes in [10, 30] {
        let dir = tempfile::tempdir().unwrap();
        let spec = executor_tests::big_spec::openapi_json(megabytes << 20, megabytes as u64);
        std::fs::write(dir.path().join("big.json"), &spec).unwrap();
        let config = dir.path().join("executor.toml");
        std::fs::write(
            &config,
            "[[sources]]\nnamespace = \"big\"\nkind = \"openapi\"\nspec = \"big.json\"\n\
             base_url = \"https://big.example.invalid\"\n",
        )
        .unwrap();
        let index = dir.path().join("catalog.index");
        let sources = executor_catalog::CatalogConfig::load(&config).unwrap();
        let built = executor_catalog::index::build(&sources, &index).unwrap();
        let index_size = std::fs::metadata(&index).unwrap().len();
        println!("generated document: {} bytes, {} tools; index {index_size} bytes", spec.len(), built.indexed[0].1);
        drop((spec, sources));
        let with_config = [("EXECUTOR_CONFIG", config.as_path())];
        report(&format!("{megabytes} MB document, parsed"), starts(bootstrap, BIG_RUNS, &with_config));
        let with_index = [("EXECUTOR_CONFIG", config.as_path()), ("EXECUTOR_CATALOG_INDEX", index.as_path())];
        report(&format!("{megabytes} MB document, from the index"), starts(bootstrap, RUNS, &with_index));
    }
}
