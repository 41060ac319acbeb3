//! Upstreams that write down every request they receive, exactly as it
//! arrived (raw path and query, header bytes, body), before answering it.
//! They run on a runtime of their own, so a test that captures its own
//! thread's logs sees the catalog's and not the upstream's.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// The path of the request line, not decoded.
    pub path: String,
    /// The query of the request line, not decoded.
    pub query: Option<String>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    /// The request line's target, path and query, as sent.
    pub fn target(&self) -> String {
        match &self.query {
            Some(query) => format!("{}?{query}", self.path),
            None => self.path.clone(),
        }
    }

    /// A careless upstream's error text: the target and every header, as received.
    pub fn echo(&self) -> String {
        let mut text = format!("{} {}\n", self.method, self.target());
        for (name, value) in &self.headers {
            text.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(value)));
        }
        text + &String::from_utf8_lossy(&self.body)
    }
}

pub struct Recording {
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Recording {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn paths(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.path).collect()
    }
}

/// Serve `router` on the upstreams' runtime, recording every request first.
pub fn start_recording(router: Router) -> Recording {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = serve_apart(router.layer(from_fn_with_state(seen.clone(), record)));
    Recording { base, seen }
}

/// An upstream that answers every request with `reply`.
pub fn start_replying(reply: impl Fn(&Seen) -> Response + Clone + Send + Sync + 'static) -> Recording {
    start_recording(Router::new().fallback(move |Extension(seen): Extension<Seen>| {
        let reply = reply.clone();
        async move { reply(&seen) }
    }))
}

async fn record(State(seen): State<Arc<Mutex<Vec<Seen>>>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 16 * 1024 * 1024).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let now = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect(),
        body: body.to_vec(),
    };
    seen.lock().unwrap().push(now.clone());
    let mut request = Request::from_parts(parts, Body::from(body));
    request.extensions_mut().insert(now);
    next.run(request).await
}

/// An upstream that drops every connection mid-response: the status line
/// and headers of a 200 arrive, then half the promised body, then the end.
pub fn start_truncating() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { continue };
            std::thread::spawn(move || {
                // The whole request is read first: closing with bytes unread would reset the connection.
                let mut request = Vec::new();
                let mut buffer = [0; 4096];
                while !request_complete(&request) {
                    match socket.read(&mut buffer) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n";
                let _ = socket.write_all(format!("{head}{{\"partial\": ").as_bytes());
                let _ = socket.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    format!("http://{address}")
}

/// Whether `bytes` hold a whole request: its head and as much body as `content-length` says.
fn request_complete(bytes: &[u8]) -> bool {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    bytes.len() >= end + 4 + length
}

/// The address of a port nothing listens on: connections are refused.
pub fn refused_base() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}")
}

/// Serve `router` on a runtime of its own (two threads, for the whole test binary).
pub fn serve_apart(router: Router) -> String {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME
        .get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        axum::serve(listener, router).await.unwrap()
    });
    format!("http://{address}")
}
