//! `executor serve` against hostile clients, over real sockets on 127.0.0.1:
//! a thousand slow or idle connections do not stop it answering, the server
//! closes each of them, and connections past the cap get a clear 503.
//!
//! The server runs in this process with short timeouts (2 s) so that it
//! closes the slow connections soon; nothing here asserts how soon, only that
//! it happens within a generous bound.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use executor_catalog::Catalog;
use executor_cli::serve::{self, ConnectionLimits};
use executor_service::HostConfig;
use executor_store::EmbeddedStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Each kind of slow client, this many times.
const PER_KIND: usize = 250;
/// The interval between two trickled bytes.
const TRICKLE: Duration = Duration::from_millis(300);
/// A slow client gives up (and the test fails) after this many trickled bytes: 60 s.
const MAX_TRICKLES: usize = 200;

struct Server {
    addr: std::net::SocketAddr,
    _dir: tempfile::TempDir,
}

async fn start(limits: ConnectionLimits) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let catalog = Arc::new(Catalog::load(None).await.unwrap());
    let host = serve::host(store, catalog, &[], HostConfig::default()).await.unwrap();
    // Room in the accept queue for every client at once: a client whose
    // handshake the kernel dropped from a full queue (with SYN cookies) would
    // believe itself connected to a server that never saw it.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(4096).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve::serve_with_limits(listener, host, limits, std::future::pending()));
    Server { addr, _dir: dir }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Connects and sends nothing.
    Silent,
    /// Sends half a header line, then a byte every few hundred ms.
    SlowHead,
    /// Sends whole headers announcing a body, then trickles the body.
    SlowBody,
    /// Makes one request, reads the answer, then keeps the connection open.
    Idle,
}

/// What a slow client saw by the time the server closed its connection.
#[derive(Debug)]
struct Closed {
    kind: Kind,
    received: String,
}

/// Play `kind` until the server closes the connection (EOF or reset), or give
/// up after `MAX_TRICKLES` intervals (`Err`: the server never closed it).
async fn slow_client(
    addr: std::net::SocketAddr,
    kind: Kind,
    connected: Arc<tokio::sync::Barrier>,
) -> Result<Closed, Kind> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let opening: &[u8] = match kind {
        Kind::Silent => b"",
        Kind::SlowHead => b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
        Kind::SlowBody => {
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        }
        Kind::Idle => b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    };
    stream.write_all(opening).await.expect("send the opening bytes");
    connected.wait().await;
    let (mut reader, mut writer) = stream.into_split();
    let mut received = Vec::new();
    let read = async {
        let mut buffer = [0u8; 1024];
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    };
    let trickle = async {
        for _ in 0..MAX_TRICKLES {
            tokio::time::sleep(TRICKLE).await;
            if matches!(kind, Kind::SlowHead | Kind::SlowBody) && writer.write_all(b"a").await.is_err() {
                // The server is gone; the read side sees it too.
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = read => Ok(Closed { kind, received: String::from_utf8_lossy(&received).into_owned() }),
        () = trickle => Err(kind),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_slow_clients_neither_block_the_server_nor_stay_open() {
    // Both ends of every connection are in this process.
    let files = serve::raise_open_files_limit();
    assert!(files >= 2 * 4 * PER_KIND as u64 + 200, "this test needs 2,200 open files; `ulimit -n` allows {files}");
    let limits = ConnectionLimits {
        header_timeout: Duration::from_secs(2),
        body_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(2),
        max_connections: 1100,
        ..ConnectionLimits::default()
    };
    let server = start(limits).await;
    let kinds = [Kind::Silent, Kind::SlowHead, Kind::SlowBody, Kind::Idle];
    let connected = Arc::new(tokio::sync::Barrier::new(4 * PER_KIND + 1));
    let clients: Vec<_> =
        (0..4 * PER_KIND).map(|i| tokio::spawn(slow_client(server.addr, kinds[i % 4], connected.clone()))).collect();
    let all_connected = tokio::time::timeout(Duration::from_secs(60), connected.wait()).await;
    all_connected.expect("every slow client connects and sends its opening bytes within 60 s");

    // Every slow client is connected and has sent its opening bytes: a fresh
    // client is still answered.
    let http = executor_http_client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let health = http.get(format!("http://{}/healthz", server.addr)).send().await.expect("/healthz answers");
    assert_eq!(health.status(), 200);

    let (mut closed_by_kind, mut open_by_kind) = (BTreeMap::<String, usize>::new(), BTreeMap::<String, usize>::new());
    for client in clients {
        let closed = match client.await.unwrap() {
            Ok(closed) => closed,
            Err(kind) => {
                *open_by_kind.entry(format!("{kind:?}")).or_default() += 1;
                continue;
            }
        };
        // What each saw before the close says which timeout closed it.
        match closed.kind {
            Kind::Silent | Kind::SlowHead => assert_eq!(closed.received, "", "{closed:?}"),
            Kind::SlowBody => {
                assert!(closed.received.starts_with("HTTP/1.1 408 "), "{closed:?}");
                assert!(closed.received.contains("send the whole body at once"), "{closed:?}");
            }
            Kind::Idle => assert!(closed.received.starts_with("HTTP/1.1 200 OK"), "{closed:?}"),
        }
        *closed_by_kind.entry(format!("{:?}", closed.kind)).or_default() += 1;
    }
    assert!(open_by_kind.is_empty(), "still open: {open_by_kind:?}; closed: {closed_by_kind:?}");

    let health = http.get(format!("http://{}/healthz", server.addr)).send().await.expect("/healthz answers");
    assert_eq!(health.status(), 200);
}

/// One request on a kept-alive connection; the connection stays open.
async fn keep_alive_client(addr: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    while !answer.ends_with(b"\r\n\r\nok") {
        let n = stream.read(&mut buffer).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buffer[..n]);
    }
    stream
}

/// The whole answer on a fresh connection, read until the server closes it.
async fn answer_on_new_connection(addr: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    tokio::time::timeout(Duration::from_secs(10), read).await.expect("an answer, then the close").unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn connections_past_the_cap_are_told_to_retry() {
    let limits = ConnectionLimits { max_connections: 3, ..ConnectionLimits::default() };
    let server = start(limits).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(keep_alive_client(server.addr).await);
    }

    let refused = answer_on_new_connection(server.addr).await;
    assert!(refused.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{refused}");
    assert!(refused.contains("retry-after: 1\r\n"), "{refused}");
    let body = refused.split("\r\n\r\n").nth(1).unwrap();
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        body["error"]["message"], "the server is at its limit of 3 open connections; retry in a few seconds",
        "{refused}"
    );

    // Once a held connection closes, its place is free again (the server
    // notices the close on its own time: a bounded number of tries).
    drop(held.pop());
    let mut answer = String::new();
    for _ in 0..100 {
        answer = answer_on_new_connection(server.addr).await;
        if !answer.starts_with("HTTP/1.1 503 ") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
}

/// Bytes until the server closes the connection (EOF or reset), within a bound.
async fn rest_of(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    let read = async {
        while let Ok(n @ 1..) = stream.read(&mut buffer).await {
            answer.extend_from_slice(&buffer[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read).await.expect("the server closes the connection");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn shutdown_finishes_requests_in_flight_and_closes_the_rest_at_once() {
    // Timeouts far longer than the test's bounds: shutting down must not wait for them.
    let hour = Duration::from_secs(3600);
    let limits = ConnectionLimits {
        header_timeout: hour,
        body_timeout: hour,
        idle_timeout: hour,
        max_connections: 16,
        drain_timeout: hour,
        ..ConnectionLimits::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let catalog = Arc::new(Catalog::load(None).await.unwrap());
    let host = serve::host(store, catalog, &[], HostConfig::default()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(serve::serve_with_limits(listener, host, limits, async {
        let _ = stopped.await;
    }));

    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut idle = keep_alive_client(addr).await;
    // A request in flight: the server has its head and is reading its body
    // (it asked for the body: 100 Continue) when the shutdown begins.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let mut busy = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    busy.write_all(head.as_bytes()).await.unwrap();
    let mut buffer = [0u8; 64];
    let n = busy.read(&mut buffer).await.unwrap();
    assert!(buffer[..n].starts_with(b"HTTP/1.1 100 Continue"), "{}", String::from_utf8_lossy(&buffer[..n]));
    stop.send(()).unwrap();

    assert_eq!(rest_of(&mut silent).await, "", "a connection without a request is closed");
    assert_eq!(rest_of(&mut idle).await, "", "an idle connection is closed");
    busy.write_all(body.as_bytes()).await.unwrap();
    let answer = rest_of(&mut busy).await;
    assert!(answer.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "the request in flight is answered: {answer}");
    assert!(answer.contains("connection: close\r\n"), "{answer}");
    tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .expect("serve returns once the request in flight is answered")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_stop_waits_for_requests_in_flight_only_until_the_drain_bound() {
    // The request in flight never finishes its body (the body timeout is an
    // hour): past the drain bound the stop closes it and serve returns.
    let hour = Duration::from_secs(3600);
    let limits = ConnectionLimits {
        header_timeout: hour,
        body_timeout: hour,
        idle_timeout: hour,
        max_connections: 16,
        drain_timeout: Duration::from_millis(500),
        ..ConnectionLimits::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let catalog = Arc::new(Catalog::load(None).await.unwrap());
    let host = serve::host(store, catalog, &[], HostConfig::default()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(serve::serve_with_limits(listener, host, limits, async {
        let _ = stopped.await;
    }));

    let mut stuck = TcpStream::connect(addr).await.unwrap();
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n\
                Content-Length: 100\r\n\r\n";
    stuck.write_all(head.as_bytes()).await.unwrap();
    let mut buffer = [0u8; 64];
    let n = stuck.read(&mut buffer).await.unwrap();
    assert!(buffer[..n].starts_with(b"HTTP/1.1 100 Continue"), "{}", String::from_utf8_lossy(&buffer[..n]));
    stop.send(()).unwrap();

    tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .expect("serve returns at the drain bound, without the stuck request")
        .unwrap()
        .unwrap();
    assert_eq!(rest_of(&mut stuck).await, "", "the stuck request's connection is closed without an answer");
}
