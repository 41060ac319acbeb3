//! `executor`: `serve` runs the local host (the default: `cargo run`); `keys`
//! manages API keys of the store.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use executor_catalog::Catalog;
use executor_cli::{keys, serve};
use executor_store::{DynamoStore, EmbeddedStore, Store};

#[derive(Parser)]
#[command(
    name = "executor",
    version,
    about = "Code-mode MCP gateway: runs agent code against your tools, pausing sensitive calls for approval."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Clone, Copy, Default, ValueEnum)]
enum StoreKind {
    /// A redb file under --data-dir.
    #[default]
    Embedded,
    /// The DynamoDB table `EXECUTOR_TABLE` (standard AWS_* variables apply).
    Dynamodb,
}

#[derive(clap::Args)]
struct StoreArgs {
    /// Where the embedded store lives.
    #[arg(long, default_value = ".executor", global = true)]
    data_dir: PathBuf,
    #[arg(long, value_enum, default_value_t = StoreKind::Embedded, global = true)]
    store: StoreKind,
}

#[derive(Parser)]
struct ServeArgs {
    #[arg(long, default_value = "127.0.0.1:8787")]
    addr: SocketAddr,
    /// Sources file (TOML, see executor.example.toml); default: `EXECUTOR_CONFIG`.
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

/// What slow, idle or too many clients may hold (`serve::ConnectionLimits`).
#[derive(clap::Args)]
struct LimitArgs {
    /// Milliseconds a client has to send a request line and headers, from
    /// connecting or from the first byte of a later request.
    #[arg(long, env = "EXECUTOR_HEADER_TIMEOUT_MS", default_value_t = 10_000, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_ms: u64,
    /// Milliseconds a client has to send a whole request body once its headers are in.
    #[arg(long, env = "EXECUTOR_BODY_TIMEOUT_MS", default_value_t = 30_000, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    body_timeout_ms: u64,
    /// Milliseconds a kept-alive connection may wait for its next request before it is closed.
    #[arg(long, env = "EXECUTOR_IDLE_TIMEOUT_MS", default_value_t = 60_000, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout_ms: u64,
    /// Connections open at once; past it a new connection is answered 503 (retry later) and closed.
    #[arg(long, env = "EXECUTOR_MAX_CONNECTIONS", default_value_t = 1024, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
}

impl LimitArgs {
    fn limits(&self) -> serve::ConnectionLimits {
        serve::ConnectionLimits {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_connections: self.max_connections as usize,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP, approvals and health on one port (the default command).
    Serve(ServeArgs),
    /// Manage API keys (bearer tokens).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
        #[command(flatten)]
        store: StoreArgs,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a key for OWNER and print its token once; only its hash is stored.
    Create {
        /// The principal the key authenticates, e.g. your name or email.
        #[arg(long)]
        owner: String,
    },
    /// List keys: id, owner, creation time.
    List,
    /// Revoke the key with this id (as `keys list` shows it).
    Revoke { id: String },
}

#[tokio::main]
async fn main() -> ExitCode {
    // No command is `serve` with its defaults (and its environment variables).
    let command = Cli::parse().command.unwrap_or_else(|| Command::Serve(ServeArgs::parse_from(["executor"])));
    let result = match command {
        Command::Serve(args) => match open(&args.store).await {
            Ok(Opened::Embedded(s)) => run_serve(args, s).await,
            Ok(Opened::Dynamo(s)) => run_serve(args, s).await,
            Err(e) => Err(e),
        },
        Command::Keys { command, store } => match open(&store).await {
            Ok(Opened::Embedded(s)) => run_keys(command, &*s).await,
            Ok(Opened::Dynamo(s)) => run_keys(command, &*s).await,
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("executor: {error}");
            ExitCode::FAILURE
        }
    }
}

enum Opened {
    Embedded(Arc<EmbeddedStore>),
    Dynamo(Arc<DynamoStore>),
}

async fn open(args: &StoreArgs) -> Result<Opened, String> {
    match args.store {
        StoreKind::Embedded => open_embedded(&args.data_dir).map(Opened::Embedded),
        StoreKind::Dynamodb => {
            let store = DynamoStore::from_env().await.map_err(|e| e.to_string())?;
            Ok(Opened::Dynamo(Arc::new(store)))
        }
    }
}

fn open_embedded(dir: &Path) -> Result<Arc<EmbeddedStore>, String> {
    EmbeddedStore::open(dir).map(Arc::new).map_err(|e| e.to_string())
}

async fn run_keys(command: KeysCommand, store: &impl executor_store::KeyStore) -> Result<(), String> {
    match command {
        KeysCommand::Create { owner } => {
            let token = keys::create(store, &owner).await.map_err(|e| e.to_string())?;
            println!("Created an API key for {owner}. This is the only time the token is shown:\n\n{token}\n");
        }
        KeysCommand::List => {
            let lines = keys::list(store).await.map_err(|e| e.to_string())?;
            if lines.is_empty() {
                println!("No keys. Create one with `executor keys create --owner NAME`.");
            }
            lines.iter().for_each(|line| println!("{line}"));
        }
        KeysCommand::Revoke { id } => {
            keys::revoke(store, &id).await.map_err(|e| e.to_string())?;
            println!("Revoked {id}.");
        }
    }
    Ok(())
}

async fn run_serve<S: Store + 'static>(args: ServeArgs, store: Arc<S>) -> Result<(), String> {
    let ServeArgs { addr, config: sources, store: StoreArgs { data_dir, .. }, limits } = args;
    let limits = limits.limits();
    // The conformance build serves requests without a token (the suite cannot
    // send one; see executor-service's `conformance` feature): loopback only.
    #[cfg(feature = "conformance")]
    {
        if !addr.ip().is_loopback() {
            return Err(format!("this is a conformance build: it serves only loopback addresses, not {addr}"));
        }
        eprintln!("executor: conformance build: requests without a token are served as owner `conformance`");
    }
    let telemetry = executor_telemetry::Telemetry::local().map_err(|e| e.to_string())?;
    let catalog = Catalog::load(sources).await.map_err(|e| e.to_string())?;
    let mut namespaces = Vec::new();
    for source in catalog.namespaces() {
        match &source.error {
            Some(error) => eprintln!("executor: source {} is unavailable: {error}", source.namespace),
            None => eprintln!("executor: source {} ({}): {} tools", source.namespace, source.kind, source.tools),
        }
        namespaces.push(source.namespace);
    }
    #[cfg(unix)]
    make_room_for_connections(limits.max_connections);
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    // First start: no key yet, so make one for whoever runs it.
    let first = if store.list_keys().await.map_err(|e| e.to_string())?.is_empty() {
        let owner = std::env::var("USER")
            .ok()
            .filter(|u| executor_core::Principal::key_owner(u).is_ok())
            .unwrap_or_else(|| "local".into());
        Some((owner.clone(), keys::create(&*store, &owner).await.map_err(|e| e.to_string())?))
    } else {
        None
    };
    let owner =
        first.as_ref().map(|(o, _)| executor_core::Principal::key_owner(o)).transpose().map_err(|e| e.to_string())?;
    let greeting = serve::welcome(bound, owner.as_ref().zip(first.as_ref().map(|(_, t)| t.as_str())));
    println!("{greeting}");
    let mut config =
        executor_service::HostConfig::default().with_env(|n| std::env::var(n).ok()).map_err(|e| e.to_string())?;
    if config.request_state_key.is_none() {
        config.request_state_key = Some(serve::request_state_key(&data_dir).map_err(|e| e.to_string())?);
    }
    let host = serve::host(store, Arc::new(catalog), &namespaces, config).await.map_err(|e| e.to_string())?;
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("executor: shutting down");
    };
    let served = serve::serve_with_limits(listener, host, limits, shutdown).await.map_err(|e| e.to_string());
    telemetry.shutdown().await;
    served
}

/// Files besides connections: the store, sources, outbound requests, logs.
#[cfg(unix)]
const OTHER_OPEN_FILES: u64 = 64;

/// Raise the open-files limit, and say so when it still cannot hold the
/// connection cap: `accept` would fail before the cap's 503 could be sent.
#[cfg(unix)]
fn make_room_for_connections(max_connections: usize) {
    let limit = serve::raise_open_files_limit();
    if limit < max_connections as u64 + OTHER_OPEN_FILES {
        eprintln!(
            "executor: this process may open {limit} files, too few for --max-connections {max_connections}; \
             raise `ulimit -n` or lower --max-connections"
        );
    }
}
