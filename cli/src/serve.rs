//! `executor serve`: every route in one process on one port, over HTTP/1.1.
//! The host itself is framework-neutral (`executor_service::Host`); this is
//! the thin glue between it and a socket.

use std::future::Future;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use executor_core::Principal;
use executor_sandbox::{Limits, Sandbox, Tools};
use executor_service::{Host, HostConfig, RequestStateKey};

use executor_store::{AlarmScheduler, InProcessScheduler, Store, StoreError};
use http_body_util::{BodyExt, Limited};
use tokio::net::TcpListener;

/// Serve `host` on `listener` until `shutdown` completes; requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    host: Host,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new().fallback(move |request: Request| {
        let host = host.clone();
        async move { handle(&host, request).await }
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

async fn handle(host: &Host, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    // One byte over the limit is enough for the host to answer 413.
    let body = match Limited::new(body, host.max_body_bytes() + 1).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return host.body_too_large().map(Body::from),
    };
    host.handle(http::Request::from_parts(parts, body)).await.map(Body::from)
}

/// The host `executor serve` runs: the store, the tools, default limits, and
/// in-process alarms re-armed from the store (so none is lost to a restart).
pub async fn host<S: Store + 'static>(
    store: Arc<S>,
    tools: Arc<dyn Tools>,
    namespaces: &[String],
    config: HostConfig,
) -> Result<Host, StoreError> {
    let clock = config.clock.clone();
    let scheduler = Arc::new(InProcessScheduler::new().with_clock(clock.clone()));
    let sandbox = Sandbox::with_clock(Limits::default(), clock.clone());
    let host = Host::new(store.clone(), tools, namespaces, sandbox, scheduler.clone(), config);
    // Weak: the scheduler's timers must not keep the host (and its store) alive.
    let alarms = Arc::downgrade(&host.alarms());
    scheduler.on_fire(move |session, generation| {
        let (alarms, now) = (alarms.upgrade(), clock.now());
        async move {
            let Some(alarms) = alarms else { return };
            // A failure is logged by `fire`; a restart re-arms the alarm from the store.
            let _ = alarms.fire(&session, Some(generation), now).await;
        }
    });
    for (session, at) in store.armed_sessions().await? {
        scheduler.schedule(&session, at).await?;
    }
    Ok(host)
}

/// The key that seals native-mode request states, kept in `data_dir` so that
/// they stay valid across restarts (created on first use, readable by the owner only).
pub fn request_state_key(data_dir: &Path) -> std::io::Result<RequestStateKey> {
    let path = data_dir.join("request-state.key");
    let invalid =
        || std::io::Error::other(format!("{} is not a valid key; delete it to make a new one", path.display()));
    match std::fs::read_to_string(&path) {
        Ok(text) => hex::decode(text.trim()).ok().and_then(RequestStateKey::new).ok_or_else(invalid),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(std::io::Error::other)?;
            std::fs::create_dir_all(data_dir)?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            std::io::Write::write_all(&mut options.open(&path)?, hex::encode(key).as_bytes())?;
            RequestStateKey::new(key.to_vec()).ok_or_else(invalid)
        }
        Err(e) => Err(e),
    }
}

/// What to tell the person who just started a server on `addr`: the URL to
/// give clients (the public URL when set; on an unspecified address, this
/// machine's loopback, with a word about other machines).
pub fn welcome(addr: SocketAddr, public_url: Option<&str>, first_key: Option<(&Principal, &str)>) -> String {
    let (url, note) = match public_url {
        Some(base) => (format!("{}/mcp", base.trim_end_matches('/')), String::new()),
        None if addr.ip().is_unspecified() => {
            let loopback = SocketAddr::new(
                if addr.is_ipv4() { Ipv4Addr::LOCALHOST.into() } else { Ipv6Addr::LOCALHOST.into() },
                addr.port(),
            );
            let note = format!(
                "It listens on every interface ({addr}). For other machines, start it with --public-url \
                 (or EXECUTOR_PUBLIC_URL) set to the address they use, e.g. http://<this machine's name>:{}.\n",
                addr.port()
            );
            (format!("http://{loopback}/mcp"), note)
        }
        None => (format!("http://{addr}/mcp"), String::new()),
    };
    let Some((owner, token)) = first_key else {
        return format!(
            "Executor is listening on {url}\n{note}Use an API key from `executor keys create --owner NAME`.\n"
        );
    };
    format!(
        "Executor is listening on {url}\n{note}\n\
         Created an API key for {owner} (shown only this once):\n\n  {token}\n\n\
         Connect Claude Code:\n\n  claude mcp add --transport http executor {url} --header \"Authorization: Bearer {token}\"\n\n\
         Other MCP clients:\n\n{}\n",
        serde_json::to_string_pretty(&serde_json::json!({
            "mcpServers": { "executor": { "type": "http", "url": url, "headers": { "Authorization": format!("Bearer {token}") } } }
        }))
        .unwrap_or_default()
    )
}
