//! Harness for tests against real parts.
//!
//! [`moto`] starts one moto server (PyPI `moto[server]`, through
//! `tests/moto_server.py`, which serialises requests so conditional transactions
//! are atomic as on DynamoDB) per test binary on a free loopback port; it stops
//! when the test process exits. Every DynamoDB test gets a table of its own.
//! [`faults`] wraps the stores, the alarm schedulers and an upstream service
//! in fault injection.

pub mod api_documents;
pub mod big_spec;
pub mod cli;
pub mod counting;
pub mod faults;
pub mod lambda;
pub mod mcp_client;
pub mod oidc_provider;
pub mod raw_mcp;
pub mod stand_in;

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use executor_store::{DynamoStore, EmbeddedStore};

const INSTALL_HINT: &str = "moto (with its server) is needed for the DynamoDB tests and was not found. \
     Install it with `python3 -m pip install 'moto[server]'` (scripts/test does this for you).";

pub struct Moto {
    pub endpoint: String,
    _watchdog: Child,
    _log: tempfile::NamedTempFile,
}

/// The shared moto_server of this test binary, started on first use.
pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(start_moto)
}

/// The command that runs `moto_server.py` (moto's server, serialised).
fn moto_command() -> String {
    let importable = Command::new("python3")
        .args(["-c", "import moto.server, werkzeug"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        panic!("{INSTALL_HINT}");
    }
    format!("python3 '{}/moto_server.py'", env!("CARGO_MANIFEST_DIR"))
}

fn start_moto() -> Moto {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port").port();
    let log = tempfile::NamedTempFile::new().expect("a temp file for moto's log");
    // A shell watchdog owns moto and kills it once this test process is gone, so
    // no server outlives the run even though statics are never dropped.
    let script = format!(
        "{cmd} {port} >{log} 2>&1 & m=$!; \
         while kill -0 {parent} 2>/dev/null && kill -0 $m 2>/dev/null; do sleep 0.5; done; kill $m 2>/dev/null",
        cmd = moto_command(),
        log = log.path().display(),
        parent = std::process::id(),
    );
    let mut watchdog =
        Command::new("bash").args(["-c", &script]).stdin(Stdio::null()).spawn().expect("bash to start moto_server");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        let exited = watchdog.try_wait().ok().flatten().is_some();
        if exited || started.elapsed() > Duration::from_secs(60) {
            let mut output = String::new();
            let _ = std::fs::File::open(log.path()).and_then(|mut f| f.read_to_string(&mut output));
            panic!("moto_server did not start on {addr}: {output}\n{INSTALL_HINT}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Moto { endpoint: format!("http://{addr}"), _watchdog: watchdog, _log: log }
}

/// The SDK configuration for the shared moto_server, in `region`: built by
/// the same code the Lambda functions use ([`executor_aws::from_env`]), so
/// every moto test also goes through it and its HTTP client.
pub fn moto_sdk_config(region: &str) -> executor_aws::SdkConfig {
    sdk_config_at(&moto().endpoint, region)
}

/// The SDK configuration for an endpoint on loopback (moto, or a proxy in front of it).
pub fn sdk_config_at(endpoint: &str, region: &str) -> executor_aws::SdkConfig {
    executor_aws::from_env(|name| match name {
        "AWS_REGION" => Some(region.to_owned()),
        "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" => Some("test".to_owned()),
        "AWS_ENDPOINT_URL" => Some(endpoint.to_owned()),
        _ => None,
    })
    .expect("a complete moto configuration")
}

/// A DynamoDB client for the shared moto_server, in `region`.
pub fn dynamodb_client_in(region: &'static str) -> Client {
    Client::new(&moto_sdk_config(region))
}

/// An EventBridge Scheduler client for the shared moto server.
pub fn scheduler_client() -> aws_sdk_scheduler::Client {
    aws_sdk_scheduler::Client::new(&moto_sdk_config("us-east-1"))
}

/// A number not handed out before in this test process, for naming tables and groups.
pub fn next_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A [`DynamoStore`] on a fresh table of its own.
pub async fn dynamo_store() -> (DynamoStore, Client) {
    let client = dynamodb_client_in("us-east-1");
    let table = format!("executor-test-{}-{}", std::process::id(), next_id());
    let store = DynamoStore::new(client.clone(), table);
    store.create_table().await.expect("create the test table in moto_server");
    (store, client)
}

/// An [`EmbeddedStore`] in a fresh directory, removed when the guard drops.
pub fn embedded_store() -> (EmbeddedStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = EmbeddedStore::open(dir.path()).expect("open the embedded store");
    (store, dir)
}

/// Where a host under test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deployment {
    /// `executor serve`: one process, embedded store, both surfaces on one port.
    Local,
    /// The MCP and approval functions behind API Gateway, DynamoDB, Scheduler.
    Lambda,
}

/// Each `async fn name(deployment: Deployment)` scenario, once per
/// deployment: tests `local::name` and `lambda::name`.
#[macro_export]
macro_rules! on_both_deployments {
    ($($scenario:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario($crate::Deployment::Local).await;
                }
            )*
        }
        mod lambda {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario($crate::Deployment::Lambda).await;
                }
            )*
        }
    };
}

/// Turn `async fn name<S: Store + 'static>(store: Arc<S>)` functions into tests
/// that run on both adapters, named `embedded::name` and `dynamodb::name`.
#[macro_export]
macro_rules! on_both_stores {
    ($($test:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    let (store, _dir) = $crate::embedded_store();
                    super::$test(std::sync::Arc::new(store)).await;
                }
            )*
        }
        mod dynamodb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $test() {
                    let (store, _client) = $crate::dynamo_store().await;
                    super::$test(std::sync::Arc::new(store)).await;
                }
            )*
        }
    };
}
