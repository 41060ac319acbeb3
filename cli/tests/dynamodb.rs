//! `executor serve|keys --store dynamodb`, the real binary against a moto
//! server: a missing table is one line naming the table, the operation and
//! the fix (no SDK dump, no instance-metadata warning); `--create-table`
//! creates it; missing credentials are named.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

const REGION: &str = "eu-west-1";

/// A table name no other test of this binary uses.
fn fresh_table() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("cli-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// `executor ARGS` with the moto server's endpoint, a region, credentials in
/// the environment and `table`; the default log level (no RUST_LOG).
fn executor(table: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_executor"));
    command.args(args);
    for (name, _) in std::env::vars().filter(|(n, _)| {
        n.starts_with("EXECUTOR_") || n.starts_with("AWS_") || n.starts_with("OTEL_") || n == "RUST_LOG"
    }) {
        command.env_remove(name);
    }
    command
        .env("EXECUTOR_TABLE", table)
        .env("AWS_ENDPOINT_URL", &executor_tests::moto().endpoint)
        .env("AWS_REGION", REGION)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test");
    command
}

async fn table_exists(table: &str) -> bool {
    let tables = executor_tests::dynamodb_client_in(REGION).list_tables().send().await.unwrap();
    tables.table_names().iter().any(|t| t == table)
}

/// The whole of stderr is one line, the error, and nothing the SDK dumps.
fn one_line_error(output: &Output) -> String {
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr).trim_end().to_owned();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    for noise in ["ServiceError", "DispatchFailure", "raw:", "source:", "metadata", "IMDS", "Response {"] {
        assert!(!stderr.contains(noise), "{noise:?} in: {stderr}");
    }
    stderr
}

#[tokio::test]
async fn a_missing_table_is_one_line_naming_table_operation_and_fix() {
    let table = fresh_table();
    for args in
        [&["keys", "list", "--store", "dynamodb"][..], &["keys", "create", "--owner", "ops", "--store", "dynamodb"]]
    {
        let output = executor(&table, args).output().unwrap();
        let error = one_line_error(&output);
        assert!(error.contains(&format!("table {table} in {REGION} does not exist")), "{error}");
        assert!(error.contains("--create-table") && error.contains("EXECUTOR_TABLE"), "{error}");
        assert!(error.contains("API key"), "names the operation: {error}");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "", "{args:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let served = executor(&table, &["serve", "--store", "dynamodb", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let error = one_line_error(&served);
    assert!(
        error.contains(&format!("table {table} in {REGION} does not exist: create it (`--create-table`")),
        "{error}"
    );
    assert_eq!(String::from_utf8_lossy(&served.stdout), "", "no key printed");
    assert!(!table_exists(&table).await);
}

#[tokio::test]
async fn keys_create_table_makes_the_table_and_the_key() {
    let table = fresh_table();
    let created = executor(&table, &["keys", "create", "--owner", "ops", "--store", "dynamodb", "--create-table"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    assert!(String::from_utf8_lossy(&created.stdout).contains("Created an API key for ops"));
    assert!(table_exists(&table).await);
    // From now on the flag is not needed, and repeating it is harmless.
    for args in
        [&["keys", "list", "--store", "dynamodb"][..], &["keys", "list", "--store", "dynamodb", "--create-table"]]
    {
        let listed = executor(&table, args).output().unwrap();
        assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
        assert!(String::from_utf8_lossy(&listed.stdout).contains("ops"));
    }
}

/// A server that is stopped when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn serve_create_table_makes_the_table_and_a_first_key() {
    let table = fresh_table();
    // The data directory holds the request-state key even with DynamoDB.
    let dir = tempfile::tempdir().unwrap();
    let child = executor(&table, &["serve", "--store", "dynamodb", "--create-table", "--addr", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let stdout = server.0.stdout.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    // Creating the table and starting take a few seconds on moto; the bound only stops a hung test.
    let first = lines.recv_timeout(Duration::from_secs(120)).unwrap_or_else(|_| {
        let _ = server.0.kill();
        let mut stderr = String::new();
        server.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        panic!("serve did not start: {stderr}")
    });
    assert!(first.starts_with("Executor is listening on http://127.0.0.1:"), "{first}");
    let key =
        (0..20).map_while(|_| lines.recv_timeout(Duration::from_secs(10)).ok()).find(|l| l.trim().starts_with("exk_"));
    assert!(key.is_some(), "a first key is printed");
    assert!(table_exists(&table).await);
}

#[test]
fn create_table_needs_the_dynamodb_store() {
    let dir = tempfile::tempdir().unwrap();
    let output =
        executor("unused", &["keys", "list", "--create-table", "--data-dir"]).arg(dir.path()).output().unwrap();
    let error = one_line_error(&output);
    assert!(error.contains("--create-table is for --store dynamodb"), "{error}");
}

#[test]
fn no_credentials_are_named_without_instance_metadata_noise() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = executor("any", &["keys", "list", "--store", "dynamodb"]);
    command
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        // No profile files and no instance-metadata endpoint: nothing to find.
        .env("AWS_CONFIG_FILE", dir.path().join("config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.path().join("credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true");
    let error = one_line_error(&command.output().unwrap());
    assert!(error.contains("no AWS credentials for table any in eu-west-1"), "{error}");
    assert!(error.contains("AWS_PROFILE") && error.contains("AWS_ACCESS_KEY_ID"), "{error}");
}
