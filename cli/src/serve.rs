//! `executor serve`: every route in one process on one port, over HTTP/1.1.
//! The host itself is framework-neutral (`executor_service::Host`); this is
//! the glue between it and a socket: hyper's HTTP/1.1, with the timeouts and
//! the connection cap that keep slow or idle clients from holding the server
//! ([`ConnectionLimits`]), the shedding of slow clients at the cap, and the
//! graceful stop on SIGINT or SIGTERM ([`StopSignals`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use executor_catalog::{CatalogConfig, TokenKey};
use executor_core::Principal;
use executor_sandbox::{Limits, Sandbox, Tools};
use executor_scheduler::{AlarmScheduler, InProcessScheduler};
use executor_service::{Host, HostConfig, RequestStateKey};
use executor_store::{Store, StoreError};
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

use threads::ConnectionThreads;

pub mod busy_poll;
mod threads;

/// How long a client may take at each step, and how many connections may be
/// open at once. Each bound frees what a slow or idle client holds (a task,
/// buffers, a file descriptor) instead of letting it wait forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From a connection's start, or the first byte of a later request, until
    /// its request line and headers are complete.
    pub header_timeout: Duration,
    /// From the end of the headers until the whole body has arrived.
    pub body_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Connections open at once. At the cap, a new connection takes the
    /// place of the one that has been sending its request head longest; with
    /// none sending a head, it is answered 503 and closed.
    pub max_connections: usize,
    /// How long a stop waits for the requests in flight before it closes
    /// their connections: what a request may take anyway, its body plus the
    /// host's answer (`executor serve` sets it from the body timeout and the
    /// response budget), so a stop cuts no request that keeps to the bounds.
    pub drain_timeout: Duration,
    /// How long a connection thread about to sleep first polls its
    /// connections' sockets for the next request (zero: never), so that a
    /// client sending requests back to back does not wait for it to wake.
    pub busy_poll: Duration,
}

impl Default for ConnectionLimits {
    /// Headers are a few hundred bytes: 10 s is ample even on a poor mobile
    /// link. A body is at most 1 MiB (the host's limit): 30 s allows about
    /// 35 KB/s. An agent pauses between tool calls while its model thinks, so
    /// a minute of idleness keeps its connection warm without hoarding it.
    /// 1,024 connections are far more than the agents and approvers of one
    /// `executor serve`, and fit the usual file limit once it is raised (see
    /// [`raise_open_files_limit`]). The drain is the body timeout plus the
    /// default response budget (20 s). A thread polls its sockets for 0.1 ms
    /// before it sleeps: the next request of a client sending them back to
    /// back comes within that, and it is at most 0.1 ms of a core each time
    /// the thread runs out of work ([`busy_poll`]).
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            drain_timeout: Duration::from_secs(50),
            busy_poll: busy_poll::DEFAULT,
        }
    }
}

/// Where `executor serve` listens unless told otherwise (`--addr`), and so
/// where `executor health` looks.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8787";

/// Refused connections being answered at once, past the cap. Each keeps its
/// socket until the client has read the 503 (at most [`REFUSAL_LINGER`]);
/// beyond this many a refused connection is closed without an answer, so a
/// flood cannot turn refusals into a second unbounded pool of open files.
const LINGERING_REFUSALS: usize = 64;
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// The signals that stop `executor serve` gracefully: SIGINT (Ctrl-C) and
/// SIGTERM (`docker stop`, systemd, Kubernetes) alike.
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// From now on these signals no longer end the process: [`StopSignals::next`] hears them.
    pub fn listen() -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next stop signal to arrive, by name.
    pub async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// What every connection watches to learn of a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Serving,
    /// Finish the requests in flight, close the rest.
    Draining,
    /// The drain bound has passed: close everything.
    Cut,
}

/// Serve `host` on `listener` until `shutdown` completes; requests in flight
/// finish (within [`ConnectionLimits::drain_timeout`]). With the default [`ConnectionLimits`].
pub async fn serve(
    listener: TcpListener,
    host: Host,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_with_limits(listener, host, ConnectionLimits::default(), shutdown).await
}

/// [`serve`] with the given limits.
pub async fn serve_with_limits(
    listener: TcpListener,
    host: Host,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(LINGERING_REFUSALS));
    let registry = Arc::new(Registry::default());
    let threads = ConnectionThreads::start(limits.busy_poll)?;
    let (stopping, stop) = watch::channel(Stop::Serving);
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let start = Start { host: host.clone(), limits, stop: stop.clone(), registry: registry.clone() };
        match open.clone().try_acquire_owned() {
            Ok(place) => start.spawn(&threads, stream, place),
            Err(_) => make_room(&threads, stream, start, &refusals),
        }
    }
    drop(listener);
    stopping.send_replace(Stop::Draining);
    // Each connection holds a place (a permit) until it closes: all places
    // back means every request in flight has been answered.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain_timeout, open.acquire_many(all)).await.is_err() {
        let open = limits.max_connections.saturating_sub(open.available_permits());
        tracing::warn!(
            connections = open,
            "requests still in flight {} s after the stop began; closing their connections",
            limits.drain_timeout.as_secs()
        );
        stopping.send_replace(Stop::Cut);
    }
    Ok(())
}

/// What a connection needs besides its socket and its place.
struct Start {
    host: Host,
    limits: ConnectionLimits,
    stop: watch::Receiver<Stop>,
    registry: Arc<Registry>,
}

impl Start {
    /// Serve `stream` in its own task on one of `threads`, holding `place`
    /// while it is open. Registered here, in the order connections arrive, for [`make_room`].
    fn spawn(self, threads: &ConnectionThreads, stream: TcpStream, place: OwnedSemaphorePermit) {
        let watch = Arc::new(Watch::new());
        let registered = Registered { id: self.registry.add(watch.clone(), place), registry: self.registry };
        // Taken off the accepting runtime's I/O driver and put on the thread's
        // own, or every read and write would be woken from the accepting thread.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => return tracing::warn!(%error, "cannot hand a connection to its thread; closing it"),
        };
        threads.spawn(busy_poll::fd_of(&stream), async move {
            match TcpStream::from_std(stream) {
                Ok(stream) => connection(stream, self.host, self.limits, self.stop, watch).await,
                Err(error) => tracing::warn!(%error, "cannot serve a connection on its thread; closing it"),
            }
            // Leaves the registry and gives the place back.
            drop(registered);
        });
    }
}

/// At the cap: close the connection that has been sending its request head
/// longest and give its place to this one. A flood of slow clients (each
/// trickling its head to stay just inside the header timeout) would otherwise
/// hold every place, and keep every new client out, for as long as it lasts.
/// The oldest goes first: it has had the most time, and a client that has
/// just connected and is about to send its head goes last. A connection
/// being answered, or kept alive after an answer, is never closed for
/// another: with none sending a head, the new one is refused (503).
fn make_room(threads: &ConnectionThreads, stream: TcpStream, start: Start, refusals: &Arc<Semaphore>) {
    match start.registry.shed_oldest_head() {
        Some(place) => start.spawn(threads, stream, place),
        None => refuse(stream, refusals, start.limits.max_connections),
    }
}

/// The open connections and the places they hold, for [`make_room`].
#[derive(Default)]
struct Registry {
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next: u64,
    connections: HashMap<u64, (Arc<Watch>, OwnedSemaphorePermit)>,
}

impl Registry {
    fn add(&self, watch: Arc<Watch>, place: OwnedSemaphorePermit) -> u64 {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let id = open.next;
        open.next += 1;
        open.connections.insert(id, (watch, place));
        id
    }

    fn remove(&self, id: u64) {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).connections.remove(&id);
    }

    /// Tell the connection that has been sending its request head longest to
    /// close, and take its place (handed over here, not through the
    /// semaphore, so no other arrival can take it in between); `None` if no
    /// connection is sending a head. Its socket stays open until its task
    /// sees the word, a moment later: the cap is exceeded by that much.
    fn shed_oldest_head(&self) -> Option<OwnedSemaphorePermit> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = open.connections.iter().filter_map(|(id, (watch, _))| Some((watch.head_since()?, *id))).min();
        let (watch, place) = open.connections.remove(&oldest?.1)?;
        watch.shed();
        Some(place)
    }
}

/// A connection's entry in the [`Registry`], removed when the connection ends.
struct Registered {
    id: u64,
    registry: Arc<Registry>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.remove(self.id);
    }
}

/// A failed `accept` is the listener's problem, not a client's: a client that
/// gave up in the backlog is skipped; anything else (typically no file
/// descriptors left) pauses accepting briefly instead of spinning.
async fn accept_failed(error: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::warn!(%error, "cannot accept a connection; retrying in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Past the cap, answer `503` at once and close, rather than leaving the
/// client in the listen backlog where it cannot tell a full server from a
/// dead one. The answer is written without waiting (a new socket's send
/// buffer always has room for it) and without reading the request; the
/// socket then lingers, draining what the client sends, so that closing it
/// does not reset the connection before the client has read the answer.
fn refuse(mut stream: TcpStream, lingering: &Arc<Semaphore>, max_connections: usize) {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "error": {
            "code": -32000,
            "message": format!("the server is at its limit of {max_connections} open connections; retry in a few seconds"),
        },
        "id": null,
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
    let Ok(permit) = lingering.clone().try_acquire_owned() else { return };
    tokio::spawn(async move {
        let _permit = permit;
        let _ = stream.shutdown().await;
        let drain = async {
            let mut buffer = [0u8; 4096];
            while let Ok(1..) = tokio::io::AsyncReadExt::read(&mut stream, &mut buffer).await {}
        };
        let _ = tokio::time::timeout(REFUSAL_LINGER, drain).await;
    });
}

/// One connection: HTTP/1.1 with keep-alive, watched by the header and idle
/// timeouts (the body timeout is the request's, in [`respond`]).
async fn connection(
    stream: TcpStream,
    host: Host,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<Stop>,
    watch: Arc<Watch>,
) {
    let service = service_fn({
        let watch = watch.clone();
        move |request: Request<Incoming>| {
            let (host, watch) = (host.clone(), watch.clone());
            async move {
                watch.set(Phase::Busy);
                let response = respond(&host, request, limits.body_timeout).await;
                Ok::<_, Infallible>(response.map(|bytes| Answer { bytes: Some(bytes), watch }))
            }
        }
    });
    let io = TokioIo::new(Watched { stream, watch: watch.clone() });
    // Our own header timeout, not hyper's: hyper's also runs while a
    // kept-alive connection waits for its next request, which is the idle
    // timeout's job here.
    let mut served = pin!(http1::Builder::new().header_read_timeout(None).serve_connection(io, service));
    let mut draining = false;
    loop {
        // Closed for a new client while its head was still coming (`make_room`),
        // which has its place now.
        if watch.is_shed() {
            return;
        }
        let changed = watch.changed.notified();
        let deadline = watch.deadline(&limits);
        // Serving: wait for any stop. Draining: only for the cut.
        let awaited = if draining { Stop::Cut } else { Stop::Draining };
        tokio::select! {
            _ = served.as_mut() => return,
            () = changed => {}
            () = until(deadline) => {
                // Past its deadline in the phase it is still in: drop it (and so close the socket).
                if watch.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                    return;
                }
            }
            stopped = stop.wait_for(move |stop| *stop == awaited || *stop == Stop::Cut) => {
                // Cut: past the drain bound (or the server is gone).
                let cut = match stopped {
                    Ok(now) => *now == Stop::Cut,
                    Err(_) => true,
                };
                // No request begun: nothing to finish (hyper would wait for
                // a fresh connection's first request).
                if cut || watch.waiting() {
                    return;
                }
                served.as_mut().graceful_shutdown();
                draining = true;
            }
        }
    }
}

async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Read the body (within the body timeout and the size limit) and let the host answer.
async fn respond(host: &Host, request: Request<Incoming>, body_timeout: Duration) -> Response<Bytes> {
    let (parts, body) = request.into_parts();
    // One byte over the limit is enough for the host to answer 413.
    let read = Limited::new(body, host.max_body_bytes() + 1).collect();
    let body = match tokio::time::timeout(body_timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            // The rest of the body is still on the socket: the connection ends with this answer,
            // and says so, so a client does not send its next request down it.
            let mut response = host.body_too_large();
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
        Ok(Err(_)) => return closing(StatusCode::BAD_REQUEST, "the request body could not be read".into()),
        Err(_) => {
            let message = format!(
                "the request body did not arrive within {} ms; send the whole body at once",
                body_timeout.as_millis()
            );
            return closing(StatusCode::REQUEST_TIMEOUT, message);
        }
    };
    host.handle(Request::from_parts(parts, body)).await
}

/// A JSON-RPC error that also ends the connection: what is left of the
/// request on the socket cannot be read as the next one.
fn closing(status: StatusCode, message: String) -> Response<Bytes> {
    let body = serde_json::json!({ "jsonrpc": "2.0", "error": { "code": -32600, "message": message }, "id": null });
    let mut response = Response::new(Bytes::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Where a connection is between requests, which decides the timeout that runs.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No byte of a request yet, since `since`: the connection's start (the
    /// header timeout runs from there) or the last answer (the idle timeout).
    Waiting { since: Instant, first: bool },
    /// A request head has begun; the header timeout runs from this instant.
    Head(Instant),
    /// A request is being read (under the body timeout) or answered.
    Busy,
}

struct Watch {
    phase: Mutex<Phase>,
    changed: Notify,
    /// Chosen to make room for a new connection ([`Registry::shed_oldest_head`]).
    shed: AtomicBool,
}

impl Watch {
    fn new() -> Self {
        Self {
            phase: Mutex::new(Phase::Waiting { since: Instant::now(), first: true }),
            changed: Notify::new(),
            shed: AtomicBool::new(false),
        }
    }

    fn shed(&self) {
        self.shed.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    fn is_shed(&self) -> bool {
        self.shed.load(Ordering::Acquire)
    }

    /// Since when the connection has been sending a request head: from its
    /// start until its first head is complete, or from the first byte of a
    /// later one. `None` while a request is answered or between requests.
    fn head_since(&self) -> Option<Instant> {
        match *self.phase.lock().unwrap_or_else(|e| e.into_inner()) {
            Phase::Waiting { since, first: true } | Phase::Head(since) => Some(since),
            Phase::Waiting { first: false, .. } | Phase::Busy => None,
        }
    }

    fn set(&self, phase: Phase) {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner()) = phase;
        self.changed.notify_one();
    }

    /// Bytes arrived: while waiting they begin a request's head. (Bytes of a
    /// next request that arrive while one is answered, pipelined, leave the
    /// connection waiting after the answer: the idle timeout still bounds it.)
    fn received(&self) {
        let mut phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        if let Phase::Waiting { since, first } = *phase {
            *phase = Phase::Head(if first { since } else { Instant::now() });
            self.changed.notify_one();
        }
    }

    fn waiting(&self) -> bool {
        matches!(*self.phase.lock().unwrap_or_else(|e| e.into_inner()), Phase::Waiting { .. })
    }

    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        match *self.phase.lock().unwrap_or_else(|e| e.into_inner()) {
            Phase::Waiting { since, first: true } | Phase::Head(since) => Some(since + limits.header_timeout),
            Phase::Waiting { since, first: false } => Some(since + limits.idle_timeout),
            Phase::Busy => None,
        }
    }
}

/// The socket, telling the watch when bytes arrive.
struct Watched {
    stream: TcpStream,
    watch: Arc<Watch>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.watch.received();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A response body that marks the connection waiting once hyper has taken it
/// (dropped after its last frame is written, or when the connection ends).
/// A client that does not read the answer is then bounded by the idle timeout.
struct Answer {
    bytes: Option<Bytes>,
    watch: Arc<Watch>,
}

impl Body for Answer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.bytes.take().map(|bytes| Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.bytes.as_ref().map_or(0, |b| b.len() as u64))
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.watch.set(Phase::Waiting { since: Instant::now(), first: false });
    }
}

/// Raise this process's soft limit on open files to its hard limit and
/// return the limit in force. Every connection is an open file, and the usual
/// soft limit (1,024) would be reached before the default connection cap;
/// `accept` would then fail and new clients wait in the backlog unanswered.
#[cfg(unix)]
pub fn raise_open_files_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    // `None` is unlimited.
    let Some(current) = limit.current else { return u64::MAX };
    let target = limit.maximum.unwrap_or(u64::MAX);
    if current < target && setrlimit(Resource::Nofile, Rlimit { current: Some(target), maximum: limit.maximum }).is_ok()
    {
        return target;
    }
    current
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
    let sandbox = Sandbox::with_clock(Limits { wall_clock: config.max_execution, ..Limits::default() }, clock.clone());
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
    key_file(data_dir, "request-state.key", RequestStateKey::new)
}

/// The key that seals owners' OAuth tokens, when a source connects per
/// owner: `EXECUTOR_TOKEN_KEY_SECRET_ARN`'s secret when set, else
/// `token.key` in `data_dir` (created on first use, readable by the owner only).
pub async fn token_key(data_dir: &Path, sources: &CatalogConfig) -> Result<Option<TokenKey>, String> {
    // An MCP server without credentials of its own may turn out to be OAuth-protected: its owners connect too.
    let per_owner = sources.sources.iter().any(|s| {
        matches!(
            (&s.kind, &s.auth),
            (_, Some(executor_catalog::config::Auth::OAuth2(_)))
                | (executor_catalog::config::SourceKind::Mcp { .. }, None)
        )
    });
    if !per_owner {
        return Ok(None);
    }
    if let Some(key) = TokenKey::from_env().await? {
        return Ok(Some(key));
    }
    let key = key_file(data_dir, "token.key", |bytes| TokenKey::from_bytes(&bytes)).map_err(|e| e.to_string())?;
    Ok(Some(key))
}

/// 32 random bytes kept hex-encoded in `data_dir/name`, made on first use
/// (mode 0600), then read back as `K` by `make`.
fn key_file<K>(data_dir: &Path, name: &str, make: impl Fn(Vec<u8>) -> Option<K>) -> std::io::Result<K> {
    let path = data_dir.join(name);
    let invalid =
        || std::io::Error::other(format!("{} is not a valid key; delete it to make a new one", path.display()));
    match std::fs::read_to_string(&path) {
        Ok(text) => hex::decode(text.trim()).ok().and_then(&make).ok_or_else(invalid),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(std::io::Error::other)?;
            executor_store::create_data_dir(data_dir)?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            std::io::Write::write_all(&mut options.open(&path)?, hex::encode(key).as_bytes())?;
            make(key.to_vec()).ok_or_else(invalid)
        }
        Err(e) => Err(e),
    }
}

/// Where this machine reaches a server listening on `addr` (an unspecified
/// address through loopback): the base of links when no public URL is set.
pub fn local_url(addr: SocketAddr) -> String {
    let addr = match addr.ip().is_unspecified() {
        true => SocketAddr::new(
            if addr.is_ipv4() { Ipv4Addr::LOCALHOST.into() } else { Ipv6Addr::LOCALHOST.into() },
            addr.port(),
        ),
        false => addr,
    };
    format!("http://{addr}")
}

/// What to tell the person who just started a server on `addr`: the URL to
/// give clients (the public URL when set; on an unspecified address, this
/// machine's loopback, with a word about other machines).
pub fn welcome(addr: SocketAddr, public_url: Option<&str>, first_key: Option<(&Principal, &str)>) -> String {
    let (url, note) = match public_url {
        Some(base) => (format!("{}/mcp", base.trim_end_matches('/')), String::new()),
        None if addr.ip().is_unspecified() => {
            let note = format!(
                "It listens on every interface ({addr}). For other machines, start it with --public-url \
                 (or EXECUTOR_PUBLIC_URL) set to the address they use, e.g. http://<this machine's name>:{}.\n",
                addr.port()
            );
            (format!("{}/mcp", local_url(addr)), note)
        }
        None => (format!("{}/mcp", local_url(addr)), String::new()),
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
