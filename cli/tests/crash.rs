//! The real `executor serve`, killed with SIGKILL at random moments (a seeded
//! RNG) while clients run pause/approve cycles against a real upstream: some
//! kills land while an approved POST is in flight (the upstream holds those
//! POSTs). The server restarts on the same data dir and port; clients retry.
//!
//! Counted: pauses lost (a paused result the client got whose execution then
//! reads as not found or expired before its deadline) and double writes (an
//! `Idempotency-Key` the upstream saw twice, or two POSTs for one decided
//! pause). Both must be 0. A continuation a kill stranded reads as `running`
//! until its heartbeat is 30 s old; the test reads those through the service
//! with a clock past that point, where each must be `interrupted` (the
//! approved call made at most once, never retried).
//!
//! Figures are printed; docs/reliability.md records them with the command.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_core::{ExecutionId, ManualClock, Principal, Timeouts};
use executor_sandbox::{Limits, Sandbox};
use executor_service::{ExecutionResult, Executions};
use executor_store::EmbeddedStore;
use executor_tests::cli::create_key;
use executor_tests::faults::Upstream;
use serde_json::{Value, json};

const SEED: u64 = 0x5eed_c4a5_4e11;
/// Pause/approve cycles the clients complete between them.
const CYCLES: usize = 500;
const CLIENTS: usize = 4;
/// A POST held this long by the upstream is a window for a kill to land in.
const HOLD: Duration = Duration::from_millis(1500);
/// The whole workload must finish within this (it takes well under a minute).
const BUDGET: Duration = Duration::from_secs(240);
const OWNER: &str = "crash";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_approvals_loses_no_pause_and_doubles_no_write() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = Arc::new(Upstream::start().await);
    let config = upstream.write_config(dir.path(), Duration::from_secs(30));
    let data = dir.path().join("data");
    let token = create_key(env!("CARGO_BIN_EXE_executor"), &data, OWNER);
    let addr = free_port();
    let server = Arc::new(Server {
        addr,
        data: data.clone(),
        config,
        log: dir.path().join("serve.log"),
        child: Mutex::default(),
    });
    server.start().await;

    let tally = Arc::new(Tally::default());
    let work = async {
        let killer = tokio::spawn(kill_repeatedly(server.clone(), upstream.clone(), tally.clone()));
        let mut clients = tokio::task::JoinSet::new();
        for n in 0..CLIENTS {
            let client = Client::new(addr, &token);
            clients.spawn(run_cycles(client, tally.clone(), SEED ^ (n as u64 + 1)));
        }
        clients.join_all().await;
        killer.await.unwrap();
    };
    tokio::time::timeout(BUDGET, work)
        .await
        .unwrap_or_else(|_| panic!("the workload outlasted {BUDGET:?}; server log: {}", server.log.display()));
    server.kill();

    // The same data, read by a service whose clock is past every heartbeat's staleness.
    let store = Arc::new(EmbeddedStore::open(&data).unwrap());
    let later_clock = ManualClock::starting_now();
    later_clock.advance(executor_core::HEARTBEAT_STALE + Duration::from_secs(1));
    let later = Executions::new(store, Sandbox::new(Limits::default()), Timeouts::default(), Arc::new(later_clock));
    let owner = Principal::parse(OWNER).unwrap();
    let told = tally.told.lock().unwrap().clone();

    // Every write once, and only for a pause a client accepted.
    let posts = upstream.posts();
    let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_execution: BTreeMap<String, usize> = BTreeMap::new();
    for post in &posts {
        let key = post.idempotency_key.clone().expect("every write carries an Idempotency-Key");
        let execution = key.split(':').next().unwrap().to_owned();
        assert!(told.contains(&execution), "a write for {execution}, which no client accepted");
        *by_key.entry(key).or_default() += 1;
        *by_execution.entry(execution).or_default() += 1;
    }
    let doubles = by_key.values().filter(|n| **n > 1).count() + by_execution.values().filter(|n| **n > 1).count();

    let (mut completed, mut interrupted, mut lost) = (0, 0, Vec::new());
    for id in &told {
        match later.view(&owner, &ExecutionId::parse(id.as_str()).unwrap()).await {
            Ok(ExecutionResult::Completed { .. }) => {
                assert_eq!(by_execution.get(id), Some(&1), "{id} completed: its approved POST was made once");
                completed += 1;
            }
            Ok(ExecutionResult::Failed { error, .. }) if error.code == "interrupted" => interrupted += 1,
            other => lost.push(format!("{id}: {other:?}")),
        }
    }

    let figures = format!(
        "cycles {} | kills {} ({} during an in-flight POST) | completed {completed} | interrupted {interrupted} \
         | lost {} | double POSTs {doubles} | POSTs {} (seed {SEED:#x})",
        told.len(),
        tally.kills.load(Ordering::SeqCst),
        tally.kills_in_flight.load(Ordering::SeqCst),
        lost.len(),
        posts.len(),
    );
    println!("{figures}");
    assert!(lost.is_empty(), "LOST pauses: {lost:#?}\n{figures}");
    assert_eq!(doubles, 0, "{figures}");
    assert_eq!(completed + interrupted, told.len(), "{figures}");
    assert!(told.len() >= CYCLES, "{figures}");
    assert!(tally.kills_in_flight.load(Ordering::SeqCst) > 0, "no kill landed during a POST: {figures}");
}

/// What the run saw.
#[derive(Default)]
struct Tally {
    /// Executions whose paused result a client received (and then accepted).
    told: Mutex<Vec<String>>,
    /// Cycles begun (the clients' shared ticket counter).
    started: AtomicUsize,
    kills: AtomicUsize,
    kills_in_flight: AtomicUsize,
}

impl Tally {
    fn all_started(&self) -> bool {
        self.started.load(Ordering::SeqCst) >= CYCLES
    }
}

/// `executor serve` on a fixed address and data dir, restartable.
struct Server {
    addr: SocketAddr,
    data: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: Mutex<Option<Child>>,
}

impl Server {
    async fn start(&self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_executor"))
            .args(["serve", "--addr", &self.addr.to_string()])
            .arg("--data-dir")
            .arg(&self.data)
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start executor serve");
        *self.child.lock().unwrap() = Some(child);
        let http = executor_http_client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        let health = format!("http://{}/healthz", self.addr);
        for _ in 0..400 {
            if http.get(&health).send().await.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("executor serve did not come up on {}; its log: {}", self.addr, self.log.display());
    }

    /// SIGKILL, and wait until the process is gone.
    fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            child.kill().expect("SIGKILL the server");
            child.wait().expect("reap the server");
        }
    }
}

async fn kill_repeatedly(server: Arc<Server>, upstream: Arc<Upstream>, tally: Arc<Tally>) {
    let mut rng = Rng(SEED);
    for round in 0..100 {
        // Let the clients work a while, then kill: every other time while a
        // POST is held, else at a random moment of the clients' cycles.
        tokio::time::sleep(Duration::from_millis(100 + rng.below(400))).await;
        if tally.all_started() {
            return;
        }
        if round % 2 == 0 {
            let waited = tokio::time::timeout(Duration::from_secs(10), upstream.wait_in_flight()).await;
            if waited.is_err() || tally.all_started() {
                continue;
            }
            tokio::time::sleep(Duration::from_millis(rng.below(HOLD.as_millis() as u64 / 2))).await;
        } else {
            tokio::time::sleep(Duration::from_millis(rng.below(400))).await;
        }
        let in_flight = upstream.in_flight() > 0;
        tokio::task::block_in_place(|| server.kill());
        tally.kills.fetch_add(1, Ordering::SeqCst);
        if in_flight {
            tally.kills_in_flight.fetch_add(1, Ordering::SeqCst);
        }
        server.start().await;
    }
}

/// Cycles until the shared target is met: execute (pauses) → resume accept.
async fn run_cycles(client: Client, tally: Arc<Tally>, seed: u64) {
    let mut rng = Rng(seed);
    let mut client = client;
    while tally.started.fetch_add(1, Ordering::SeqCst) < CYCLES {
        let hold = if rng.below(8) == 0 { HOLD.as_millis() as u64 } else { 0 };
        let code = format!(
            "const r = await tools.ledger.entries.addEntry({{ body: {{ seed: {seed}, holdMs: {hold} }} }}); \
             return r.ok ? r.data.id : r.error.code;"
        );
        let id = client.pause(&code).await;
        tally.told.lock().unwrap().push(id.clone());
        client.approve(&id).await;
    }
}

struct Client {
    http: reqwest::Client,
    url: String,
    base: String,
    token: String,
    session: Option<String>,
}

/// What a request got: a JSON body with its status, or no answer (the server died).
enum Reply {
    Json(u16, Value),
    Lost,
}

/// Attempts at one request across restarts (each waits for the server).
const ATTEMPTS: usize = 200;

impl Client {
    fn new(addr: SocketAddr, token: &str) -> Self {
        Self {
            http: executor_http_client::builder().timeout(Duration::from_secs(60)).build().unwrap(),
            url: format!("http://{addr}/mcp"),
            base: format!("http://{addr}"),
            token: token.to_owned(),
            session: None,
        }
    }

    async fn rpc(&self, body: Value) -> (Reply, Option<String>) {
        let mut request = self
            .http
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        let Ok(response) = request.send().await else { return (Reply::Lost, None) };
        let status = response.status().as_u16();
        let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        match response.text().await {
            Ok(text) => (Reply::Json(status, serde_json::from_str(&text).unwrap_or(Value::Null)), session),
            Err(_) => (Reply::Lost, None),
        }
    }

    /// A session, retried until the server answers.
    async fn ensure_session(&mut self) {
        if self.session.is_some() {
            return;
        }
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "crash", "version": "1"}}});
        for _ in 0..ATTEMPTS {
            if let (Reply::Json(200, _), Some(session)) = self.rpc(initialize.clone()).await {
                self.session = Some(session);
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no session after {ATTEMPTS} attempts");
    }

    /// `tools/call`, retried while there is no answer or the server is unavailable.
    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        for _ in 0..ATTEMPTS {
            self.ensure_session().await;
            match self.rpc(body.clone()).await.0 {
                Reply::Json(200, answer) if answer["result"]["structuredContent"].is_object() => {
                    return answer["result"]["structuredContent"].clone();
                }
                Reply::Json(404, _) => self.session = None,
                Reply::Json(status, answer) => {
                    assert!(status == 503, "an unexpected answer: {status} {answer}");
                }
                Reply::Lost => {}
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no answer to {tool} after {ATTEMPTS} attempts");
    }

    /// `execute` until a paused result arrives; its executionId.
    async fn pause(&mut self, code: &str) -> String {
        for _ in 0..ATTEMPTS {
            let answer = self.call("execute", json!({ "code": code })).await;
            match answer["status"].as_str() {
                Some("waiting_for_interaction") => return answer["executionId"].as_str().unwrap().to_owned(),
                // The store was unavailable: nothing was paused that we know of; run it again.
                Some("error") if answer["error"]["code"] == "store_error" => {}
                _ => panic!("execute did not pause: {answer}"),
            }
        }
        panic!("no pause after {ATTEMPTS} attempts");
    }

    /// `resume` with accept until the outcome is known.
    async fn approve(&mut self, id: &str) {
        for _ in 0..ATTEMPTS {
            let answer = self.call("resume", json!({ "executionId": id, "action": "accept" })).await;
            match (answer["status"].as_str(), answer["error"]["code"].as_str()) {
                (Some("completed"), _) => return,
                // An earlier attempt claimed it (its answer died with the server): read where it stands.
                (_, Some("execution_already_settled")) => return self.confirm_decided(id).await,
                (_, Some("store_error")) => {}
                _ => panic!("resume of {id} answered {answer}"),
            }
        }
        panic!("resume of {id} found no outcome after {ATTEMPTS} attempts");
    }

    /// The owner's view of a decided execution: completed, or claimed by a
    /// process that died (`running` until the run limit passes). Never gone.
    async fn confirm_decided(&self, id: &str) {
        let url = format!("{}/api/executions/{id}", self.base);
        for _ in 0..ATTEMPTS {
            let sent = self.http.get(&url).header("authorization", format!("Bearer {}", self.token)).send().await;
            if let Ok(response) = sent {
                let status = response.status().as_u16();
                let body: Value = response.json().await.unwrap_or(Value::Null);
                match body["status"].as_str() {
                    Some("completed" | "running") => return,
                    _ if status == 503 => {}
                    _ => panic!("a decided execution {id} reads as {status} {body}"),
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no view of {id} after {ATTEMPTS} attempts");
    }
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port")
}

/// SplitMix64: a seeded sequence, so a run's kill pattern can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}
