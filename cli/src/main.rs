//! `executor`: `serve` runs the local host (the default: `cargo run`); `keys`
//! manages API keys, `grants` remembered approvals and `connections` owners'
//! OAuth connections of the store; `executions` and `audit export` read the
//! audit trail (each through the running server when it holds the embedded
//! store: `executor_cli::admin`); `catalog build` writes the catalog index of
//! the sources' OpenAPI documents; `policy` prints the Cedar schema or checks
//! what the policies decide for a call; `health` asks a running server
//! whether it is ready.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use executor_catalog::Catalog;
#[cfg(unix)]
use executor_cli::admin;
use executor_cli::args::{
    AuditCommand, ConnectionsCommand, ConsoleCommand, ExecutionsCommand, GrantsCommand, KeysCommand,
};
use executor_cli::{audit, commands, data_dir, health, keys, policy, serve};
use executor_core::{Clock, SystemClock};
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
    /// With --store dynamodb: create the table `EXECUTOR_TABLE` (on demand,
    /// TTL on expires_at) when it does not exist. Deployed stacks have theirs.
    #[arg(long, global = true)]
    create_table: bool,
}

#[derive(Parser)]
struct ServeArgs {
    #[arg(long, default_value = serve::DEFAULT_ADDR)]
    addr: SocketAddr,
    /// The URL clients reach this server at, e.g. http://host:8787 (default:
    /// `EXECUTOR_PUBLIC_URL`): approval links point there, and its host is
    /// accepted in requests (needed to serve other machines from 0.0.0.0).
    #[arg(long)]
    public_url: Option<String>,
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
          value_parser = positive::<u64>("EXECUTOR_HEADER_TIMEOUT_MS", "a whole number of milliseconds"))]
    header_timeout_ms: u64,
    /// Milliseconds a client has to send a whole request body once its headers are in.
    #[arg(long, env = "EXECUTOR_BODY_TIMEOUT_MS", default_value_t = 30_000, value_name = "MS",
          value_parser = positive::<u64>("EXECUTOR_BODY_TIMEOUT_MS", "a whole number of milliseconds"))]
    body_timeout_ms: u64,
    /// Milliseconds a kept-alive connection may wait for its next request before it is closed.
    #[arg(long, env = "EXECUTOR_IDLE_TIMEOUT_MS", default_value_t = 60_000, value_name = "MS",
          value_parser = positive::<u64>("EXECUTOR_IDLE_TIMEOUT_MS", "a whole number of milliseconds"))]
    idle_timeout_ms: u64,
    /// Connections open at once; past it a new connection takes the place of the one longest in its
    /// request head, or with none is answered 503 (retry later) and closed.
    #[arg(long, env = "EXECUTOR_MAX_CONNECTIONS", default_value_t = 1024, value_name = "N",
          value_parser = positive::<u32>("EXECUTOR_MAX_CONNECTIONS", "a whole number"))]
    max_connections: u32,
    /// Microseconds a connection thread polls its sockets for the next request before it sleeps
    /// (0: never): a client sending requests back to back is answered sooner, for at most this
    /// much of a core each time a thread runs out of work.
    #[arg(long, env = "EXECUTOR_BUSY_POLL_US", default_value_t = serve::busy_poll::DEFAULT.as_micros() as u64,
          value_name = "US", value_parser = busy_poll_us)]
    busy_poll_us: u64,
}

/// `--busy-poll-us`: zero (off) up to [`serve::busy_poll::MAX`].
fn busy_poll_us(value: &str) -> Result<u64, String> {
    let max = serve::busy_poll::MAX.as_micros() as u64;
    match value.trim().parse::<u64>() {
        Ok(us) if us <= max => Ok(us),
        _ => Err(format!("EXECUTOR_BUSY_POLL_US (or the flag) must be a whole number of microseconds from 0 to {max}")),
    }
}

/// A whole number above zero for a flag that `variable` may set: clap's own
/// message names only the flag, and the value may have come from the variable.
fn positive<T>(variable: &'static str, what: &'static str) -> impl Fn(&str) -> Result<T, String> + Clone
where
    T: std::str::FromStr + Default + PartialEq,
{
    move |value| match value.trim().parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err(format!("{variable} (or the flag) must be {what} greater than zero")),
    }
}

impl LimitArgs {
    /// `answer`: the longest the host takes to answer a request it has read
    /// (its response budget, or a browser-mode resume's wait).
    fn limits(&self, answer: Duration) -> serve::ConnectionLimits {
        let body_timeout = Duration::from_millis(self.body_timeout_ms);
        serve::ConnectionLimits {
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            body_timeout,
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_connections: self.max_connections as usize,
            // A stop waits as long as a request in flight may take anyway: no new setting.
            drain_timeout: body_timeout + answer,
            busy_poll: Duration::from_micros(self.busy_poll_us),
        }
    }
}

/// Every variable `serve` reads; each is checked before anything starts.
const SERVE_ENVIRONMENT: &str = "\
Environment (checked before anything is created; a bad value names the variable):
  EXECUTOR_CONFIG                     the sources file (as --config)
  EXECUTOR_CATALOG_INDEX              the catalog index (`executor catalog build`) [default: the sources file's index]
  EXECUTOR_PUBLIC_URL                 the URL clients reach this server at (as --public-url)
  EXECUTOR_SESSION_TIMEOUT_MS         idle time before a session ends [default: 1800000]
  EXECUTOR_PAUSED_LEASE_MS            extra idle time for a session with paused work [default: 600000]
  EXECUTOR_APPROVAL_WINDOW_MS         how long a pause waits for a decision [default: 600000]
  EXECUTOR_APPROVAL_WAIT_MS           how long a browser-mode resume waits [default: 20000]
  EXECUTOR_GRANT_TTL_MS               how long an Always-allow grant lasts [default: 2592000000, 30 days]
  EXECUTOR_AUDIT_RETENTION_DAYS       how long executions' history is kept, 1 to 3650 [default: 30]
  EXECUTOR_ELICITATION_MODE           model, browser or native, without ?elicitation_mode= [default: model]
  EXECUTOR_REQUEST_STATE_KEY          native-mode HMAC key, 32 bytes or more [default: <data dir>/request-state.key]
  EXECUTOR_TOKEN_KEY_SECRET_ARN       secret sealing owners' OAuth tokens (ARN or env:NAME) [default: <data dir>/token.key]
  EXECUTOR_RESPONSE_BUDGET_MS         how long execute/resume wait before answering running [default: 20000]
  EXECUTOR_MAX_EXECUTION_MS           the longest a run may take, tool calls included [default: 300000]
  EXECUTOR_MAX_CONCURRENT_EXECUTIONS  sandbox runs at once; more get `busy` [default: 16]
  EXECUTOR_QUOTA_EXECUTIONS_PER_HOUR, EXECUTOR_QUOTA_CONCURRENT_EXECUTIONS,
  EXECUTOR_QUOTA_TOOL_CALLS_PER_EXECUTION
                                      per-owner limits; [quotas] in the sources file per owner [default: none]
  EXECUTOR_QUOTA_RESUMES_PER_EXECUTION
                                      resumes of one execution [default: 100]
  EXECUTOR_OIDC_ISSUER                accept this issuer's JWTs too (an http(s) URL; needs EXECUTOR_OIDC_AUDIENCE)
  EXECUTOR_OIDC_AUDIENCE              the audience those tokens are for
  EXECUTOR_OIDC_JWKS_URL              the issuer's keys [default: from its discovery document]
  EXECUTOR_OIDC_OWNER_CLAIM           the claim naming the owner [default: sub]
  EXECUTOR_OIDC_SHARE_KEY_OWNERS      true: the claim's value is a key owner's name [default: false]
  EXECUTOR_CONSOLE_CLIENT_ID          the console signs in with the OIDC issuer as this public client [default: links only]
  EXECUTOR_CONSOLE_SESSION_MS         how long a console sign-in lasts [default: 28800000, 8 hours]
  EXECUTOR_HEADER_TIMEOUT_MS, EXECUTOR_BODY_TIMEOUT_MS, EXECUTOR_IDLE_TIMEOUT_MS, EXECUTOR_MAX_CONNECTIONS,
  EXECUTOR_BUSY_POLL_US               as their options above
  EXECUTOR_EVENT_WEBHOOK              POST lifecycle events here (https, or http on loopback) [default: none]
  EXECUTOR_EVENT_BUS                  put lifecycle events on this EventBridge bus (name or ARN) [default: none]
  EXECUTOR_TELEMETRY_FLUSH_MS         how long a stop (SIGINT, SIGTERM) waits for span export [default: 500]
  EXECUTOR_TABLE                      the table, with --store dynamodb (AWS_REGION, AWS_PROFILE, ... apply)
  RUST_LOG, NO_COLOR, OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables: logs and spans

SIGINT (Ctrl-C) or SIGTERM stops it: no new connections, the requests in flight finish (within the body
timeout plus the response budget), spans are flushed, exit 0. A second signal stops it at once.";

#[derive(Subcommand)]
enum Command {
    /// Serve MCP, approvals and health on one port (the default command).
    #[command(after_help = SERVE_ENVIRONMENT)]
    Serve(ServeArgs),
    /// Manage API keys (bearer tokens).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List and revoke remembered approvals ("Always allow" on an approval page).
    Grants {
        #[command(subcommand)]
        command: GrantsCommand,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The catalog index: what a start needs of big OpenAPI documents, loaded instead of parsing them.
    Catalog {
        #[command(subcommand)]
        command: CatalogCommand,
    },
    /// List and remove owners' OAuth connections (sources with auth type `oauth2`).
    Connections {
        #[command(subcommand)]
        command: ConnectionsCommand,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The audit trail's executions: list them, show one's history (docs/audit.md).
    Executions {
        #[command(subcommand)]
        command: ExecutionsCommand,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// The approver's console (/console): a one-time sign-in link, or signing an owner out everywhere.
    Console {
        #[command(subcommand)]
        command: ConsoleCommand,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Export the audit trail: every owner's history as JSON lines (docs/audit.md).
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Cedar policies (`[policy] cedar` in the sources file): print their schema, or check what they decide
    /// for a call. The policy alone; the owner's grants are not read, and no tool is called.
    Policy {
        #[command(subcommand)]
        command: policy::PolicyCommand,
    },
    /// Whether a running server is ready: exit 0 when GET /readyz answers 200, else 1 with the reason
    /// (a server without /readyz is asked /healthz). For container health checks.
    Health {
        /// The server's URL, as `executor serve` printed it (with or without /mcp).
        #[arg(long, default_value = health::DEFAULT_URL)]
        url: String,
    },
}

#[derive(Subcommand)]
enum CatalogCommand {
    /// Parse the OpenAPI documents on file that the sources file names and write
    /// their index; point `index` in the sources file (or EXECUTOR_CATALOG_INDEX) at it.
    Build {
        /// The sources file (TOML, see executor.example.toml).
        #[arg(long)]
        config: PathBuf,
        /// Where to write the index.
        #[arg(long)]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    // No command is `serve` with its defaults (and its environment variables).
    // SAFETY: first in `main`, before any thread starts.
    unsafe { executor_sandbox::pin_time_zone() };
    let command = Cli::parse().command.unwrap_or_else(|| Command::Serve(ServeArgs::parse_from(["executor"])));
    let result = match executor_sandbox::tokio_runtime() {
        Ok(runtime) => runtime.block_on(run(command)),
        Err(error) => Err(format!("could not start the async runtime: {error}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("executor: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Serve(args) => serve_command(args).await,
        Command::Keys { command, store } => run_admin(commands::Command::Keys(command.into()), &store).await,
        Command::Grants { command, store } => run_admin(commands::Command::Grants(command.into()), &store).await,
        Command::Console { command, store } => run_admin(commands::Command::Console(command.into()), &store).await,
        Command::Catalog { command: CatalogCommand::Build { config, out } } => build_index(&config, &out),
        Command::Connections { command, store } => {
            run_admin(commands::Command::Connections(command.into()), &store).await
        }
        Command::Executions { command, store } => {
            run_admin(command.resolve(SystemClock.now()).map_err(|e| e.to_string())?, &store).await
        }
        Command::Audit { command, store } => {
            export(command.resolve(SystemClock.now()).map_err(|e| e.to_string())?, &store).await
        }
        Command::Policy { command } => policy::run(command).await.map_err(|e| e.to_string()),
        Command::Health { url } => {
            let healthy = health::check(&url).await.map_err(|e| e.to_string())?;
            println!("{healthy}");
            Ok(())
        }
    }
}

/// `executor catalog build`: the index, and what it holds.
fn build_index(config: &Path, out: &Path) -> Result<(), String> {
    let sources = executor_catalog::CatalogConfig::load(config).map_err(|e| e.to_string())?;
    let built = executor_catalog::index::build(&sources, out).map_err(|e| e.to_string())?;
    for (namespace, tools) in &built.indexed {
        println!("{namespace}: {tools} tools indexed");
    }
    for namespace in &built.connected_at_start {
        println!("{namespace}: not an OpenAPI document on file, connected at start");
    }
    println!("wrote {}", out.display());
    Ok(())
}

enum Opened {
    Embedded(Arc<EmbeddedStore>),
    Dynamo(Arc<DynamoStore>),
}

/// `creates`: the command may make the embedded store when there is none.
async fn open(args: &StoreArgs, creates: bool) -> Result<Opened, String> {
    match args.store {
        StoreKind::Embedded if args.create_table => {
            Err("--create-table is for --store dynamodb; the embedded store makes its file itself".into())
        }
        StoreKind::Embedded => {
            if !creates {
                data_dir::require_store(&args.data_dir).map_err(|e| e.to_string())?;
            }
            open_embedded(&args.data_dir).map(Opened::Embedded)
        }
        StoreKind::Dynamodb => {
            let store = DynamoStore::from_env().await.map_err(|e| e.to_string())?;
            if args.create_table {
                store.create_table().await.map_err(|e| e.to_string())?;
            }
            Ok(Opened::Dynamo(Arc::new(store)))
        }
    }
}

/// The store in `dir`, after a warning for each part of it other users may open.
fn open_embedded(dir: &Path) -> Result<Arc<EmbeddedStore>, String> {
    let store = EmbeddedStore::open(dir).map(Arc::new).map_err(|e| e.to_string())?;
    for exposed in EmbeddedStore::exposed(dir) {
        eprintln!("executor: warning: {exposed}");
    }
    Ok(store)
}

async fn run_admin(command: commands::Command, args: &StoreArgs) -> Result<(), String> {
    let reply = Admin { args, opened: None }.run(command).await?;
    println!("{reply}");
    Ok(())
}

/// Where admin commands run: in the server that holds the embedded store, or
/// on a store opened here (once, for every command that follows).
struct Admin<'a> {
    args: &'a StoreArgs,
    opened: Option<Opened>,
}

impl Admin<'_> {
    async fn run(&mut self, command: commands::Command) -> Result<commands::Reply, String> {
        let opened = match self.opened.take() {
            Some(opened) => opened,
            None => {
                // A server running on the embedded store holds it: that server runs the command.
                #[cfg(unix)]
                if matches!(self.args.store, StoreKind::Embedded)
                    && let Some(answer) = admin::send(&self.args.data_dir, &command).await.map_err(|e| e.to_string())?
                {
                    return answer;
                }
                // No server has it open: the store is opened here, and made only by a command that may make it.
                open(self.args, command.creates_store()).await?
            }
        };
        let reply = match &opened {
            Opened::Embedded(store) => commands::run(&**store, command).await,
            Opened::Dynamo(store) => commands::run(&**store, command).await,
        };
        self.opened = Some(opened);
        reply
    }
}

/// `executor audit export`: page after page (`executor_cli::audit`), each
/// written out before the next is asked for. A reader that stops reading
/// (`| head`) ends the export, quietly.
async fn export(first: audit::Command, args: &StoreArgs) -> Result<(), String> {
    let mut admin = Admin { args, opened: None };
    let mut command = first;
    loop {
        let reply = admin.run(commands::Command::Audit(command.clone())).await?;
        let commands::Reply::Audit(audit::Reply::AuditExported { lines, next }) = reply else {
            return Err("the server answered the export with another reply; use an `executor` of the same \
                        version as the server"
                .into());
        };
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let written = lines.iter().try_for_each(|line| writeln!(out, "{line}")).and_then(|()| out.flush());
        match written {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(format!("could not write the export to stdout: {e}")),
            Ok(()) => {}
        }
        let audit::Command::AuditExport { since, .. } = command;
        match next {
            Some(cursor) => command = audit::Command::AuditExport { since, cursor: Some(cursor) },
            None => return Ok(()),
        }
    }
}

/// The host's settings: the environment's, then `--public-url` in place of
/// `EXECUTOR_PUBLIC_URL`.
fn host_config(public_url: Option<&str>) -> Result<executor_service::HostConfig, executor_service::ConfigError> {
    let env = |name: &str| std::env::var(name).ok().filter(|_| public_url.is_none() || name != "EXECUTOR_PUBLIC_URL");
    let config = executor_service::HostConfig::default().with_env(env)?;
    match public_url {
        Some(url) => {
            config.with_public_url(url).map_err(|e| executor_service::ConfigError { name: "--public-url", ..e })
        }
        None => Ok(config),
    }
}

/// Every setting (the environment's, the sources file) is read and checked
/// before anything is created or printed: a mistake in one leaves no data
/// directory, no store and no key behind.
async fn serve_command(args: ServeArgs) -> Result<(), String> {
    // The conformance build serves requests without a token (the suite cannot
    // send one; see executor-service's `conformance` feature): loopback only.
    #[cfg(feature = "conformance")]
    if !args.addr.ip().is_loopback() {
        return Err(format!("this is a conformance build: it serves only loopback addresses, not {}", args.addr));
    }
    let config = host_config(args.public_url.as_deref()).map_err(|e| e.to_string())?;
    let config = config.connect_events().await.map_err(|e| e.to_string())?;
    let telemetry = executor_telemetry::Telemetry::local().map_err(|e| e.to_string())?;
    let sources = executor_catalog::CatalogConfig::load_located(args.config.clone()).map_err(|e| e.to_string())?;
    let settings = Settings { config, telemetry, sources };
    if matches!(args.store.store, StoreKind::Embedded) {
        data_dir::check_writable(&args.store.data_dir).map_err(|e| e.to_string())?;
    }
    match open(&args.store, true).await? {
        Opened::Embedded(store) => run_serve(args, store, true, settings).await,
        Opened::Dynamo(store) => run_serve(args, store, false, settings).await,
    }
}

/// What `serve` read before opening the store.
struct Settings {
    config: executor_service::HostConfig,
    telemetry: executor_telemetry::Telemetry,
    /// The sources file: its sources, toolkits and quotas.
    sources: executor_catalog::CatalogConfig,
}

/// `embedded`: `store` is the embedded store, which `executor keys` can then
/// reach only through this process (the admin socket).
async fn run_serve<S: Store + 'static>(
    args: ServeArgs,
    store: Arc<S>,
    embedded: bool,
    settings: Settings,
) -> Result<(), String> {
    let ServeArgs { addr, store: StoreArgs { data_dir, .. }, limits, .. } = args;
    let Settings { mut config, telemetry, sources } = settings;
    let limits = limits.limits(config.response_budget.max(config.approval_wait));
    #[cfg(feature = "conformance")]
    eprintln!("executor: conformance build: requests without a token are served as owner `conformance`");
    #[cfg(unix)]
    make_room_for_connections(limits.max_connections);
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    config.local_url = Some(serve::local_url(bound));
    // Connected once the store is open and the address known: per-owner OAuth
    // sources keep their owners' tokens in the store, and OAuth-protected MCP
    // sources register this server, reached at its public (else local) URL.
    let vault =
        serve::token_key(&data_dir, &sources).await?.map(|key| executor_catalog::Vault { store: store.clone(), key });
    let site = config.public_url.as_deref().or(config.local_url.as_deref()).map(executor_core::ClientSite::new);
    let mcp = Some(executor_catalog::McpAuth { registrations: store.clone(), site });
    let backing = executor_catalog::OAuthBacking { vault, mcp };
    let catalog = Catalog::connect_with(&sources, config.clock.clone(), backing).await.map_err(|e| e.to_string())?;
    config.connections = catalog.connections();
    let mut namespaces = Vec::new();
    for source in catalog.namespaces() {
        match (&source.error, &source.needs_connection) {
            // Not fatal: the other sources serve, code that calls this one is told why it
            // cannot, and it is retried in the background (`heal_in_background` below).
            (Some(error), _) => eprintln!(
                "executor: warning: source {} is unavailable, serving without its tools until it connects \
                 (retried in the background): {error}",
                source.namespace
            ),
            (None, Some(why)) => eprintln!("executor: source {} ({}): {why}", source.namespace, source.kind),
            (None, None) => {
                eprintln!("executor: source {} ({}): {} tools", source.namespace, source.kind, source.tools)
            }
        }
        namespaces.push(catalog.label(&source.namespace));
    }
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
    if config.request_state_key.is_none() {
        config.request_state_key = Some(serve::request_state_key(&data_dir).map_err(|e| e.to_string())?);
    }
    let key = owner.as_ref().zip(first.as_ref().map(|(_, t)| t.as_str()));
    let welcome = serve::welcome(bound, config.public_url.as_deref(), key);
    let catalog = Arc::new(catalog);
    // Sources that failed to connect are retried until they do, for as long as this serves.
    let _healing = catalog.heal_in_background();
    config.quotas.owners = sources.quotas;
    for view in Catalog::toolkit_views(&catalog, &sources.toolkits) {
        eprintln!("executor: toolkit {0} at /mcp/toolkits/{0}", view.name());
        config.toolkits.push(executor_service::ToolkitEndpoint {
            name: view.name().clone(),
            namespaces: view.namespaces().iter().map(|n| catalog.label(n)).collect(),
            tools: Arc::new(view),
        });
    }
    let host = serve::host(store.clone(), catalog, &namespaces, config).await.map_err(|e| e.to_string())?;
    // After the host, so that a key revoked through it is forgotten by the host at once.
    #[cfg(unix)]
    let _admin = embedded.then(|| admin_socket(&data_dir, store, &host)).flatten();
    #[cfg(not(unix))]
    let _ = embedded;
    // From here on SIGINT and SIGTERM stop the server gracefully (before,
    // with nothing in flight, they simply end the process).
    let mut signals = serve::StopSignals::listen().map_err(|e| format!("cannot listen for SIGINT and SIGTERM: {e}"))?;
    // Once everything listens: the admin socket too. Written, not `println!`: a
    // reader that closed stdout after the first line must not end the server.
    let _ = writeln!(std::io::stdout().lock(), "{welcome}");
    let (begin, begun) = tokio::sync::oneshot::channel::<()>();
    let drain = limits.drain_timeout.as_secs();
    let signalled = async move {
        let name = signals.next().await;
        eprintln!(
            "executor: {name}: shutting down; requests in flight have up to {drain} s to finish ({name} again stops at once)"
        );
        let _ = begin.send(());
        signals.next().await
    };
    let shutdown = async {
        let _ = begun.await;
    };
    let served = tokio::select! {
        served = serve::serve_with_limits(listener, host, limits, shutdown) => served.map_err(|e| e.to_string()),
        name = signalled => Err(format!("{name} again: stopped without waiting for the requests in flight")),
    };
    telemetry.shutdown().await;
    if served.is_ok() {
        eprintln!("executor: stopped");
    }
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

/// Listen for `executor keys` in the data directory; without the socket the
/// server still serves, and says what that means.
#[cfg(unix)]
fn admin_socket<S: commands::AdminStore + 'static>(
    data_dir: &Path,
    store: Arc<S>,
    host: &executor_service::Host,
) -> Option<admin::AdminSocket> {
    let host = host.clone();
    admin::listen(data_dir, store, move || host.forget_keys())
        .inspect_err(|e| {
            eprintln!(
                "executor: no admin socket in {} ({e}): `executor keys`, `executor grants` and the other admin \
                 commands cannot reach this server; stop it to run them",
                data_dir.display()
            )
        })
        .ok()
}
