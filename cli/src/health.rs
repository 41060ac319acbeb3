//! `executor health`: whether a running `executor serve` (or a deployment)
//! is ready, for container health checks and scripts. Exit 0 only when
//! `GET /readyz` answers 200; otherwise the reason, and a failure.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// The server `executor serve` starts by default.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8787";
/// Within a container runtime's usual health-check timeout (Docker's: 30 s),
/// long enough for a busy server.
const TIMEOUT: Duration = Duration::from_secs(5);
/// A readiness answer is a few hundred bytes per source.
const MAX_BODY: usize = 256 * 1024;

/// A healthy answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Healthy {
    /// `/readyz` answered 200: every source is connected.
    Ready { url: String },
    /// The server has no `/readyz` (404), and `/healthz` answered 200.
    Live { url: String },
}

impl fmt::Display for Healthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ready { url } => write!(f, "ready: {url} answered 200"),
            Self::Live { url } => write!(
                f,
                "live: {url} answered 200 (this server has no /readyz, so whether its sources are connected is not known)"
            ),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("--url must be an http:// or https:// URL with a host, e.g. {DEFAULT_URL}, not {0:?}")]
    Url(String),
    #[error(
        "nothing answered at {url} ({detail}); is `executor serve` running and listening there? \
         (--url names another address)"
    )]
    Unreachable { url: String, detail: String },
    #[error("{url} did not answer within {} s; the server may be overloaded or stuck", TIMEOUT.as_secs())]
    Timeout { url: String },
    #[error("not ready: {url} answered {status}{}", if .reason.is_empty() { String::new() } else { format!(": {}", .reason) })]
    NotReady { url: String, status: u16, reason: String },
}

/// Ask the server at `base` (what `serve` printed, with or without `/mcp`).
pub async fn check(base: &str) -> Result<Healthy, HealthError> {
    let base = base_url(base)?;
    let loopback = is_loopback(&base);
    let mut client = executor_http_client::builder().timeout(TIMEOUT);
    // The machine's own server: straight there, whatever proxy the environment names.
    if loopback {
        client = client.no_proxy();
    }
    let client = client.build().map_err(|e| HealthError::Unreachable { url: base.clone(), detail: e.to_string() })?;
    let ready = format!("{base}/readyz");
    let (status, body) = get(&client, &ready).await?;
    match status {
        200 => Ok(Healthy::Ready { url: ready }),
        // A server from before readiness existed (or a deployment that routes
        // only /healthz): its liveness is all there is to know.
        404 => {
            let live = format!("{base}/healthz");
            match get(&client, &live).await? {
                (200, _) => Ok(Healthy::Live { url: live }),
                (status, body) => Err(HealthError::NotReady { url: live, status, reason: reason(&body) }),
            }
        }
        status => Err(HealthError::NotReady { url: ready, status, reason: reason(&body) }),
    }
}

/// `url` without a trailing `/` or `/mcp`, checked to be an HTTP URL.
fn base_url(url: &str) -> Result<String, HealthError> {
    let trimmed = url.trim().trim_end_matches('/');
    let trimmed = trimmed.strip_suffix("/mcp").unwrap_or(trimmed);
    let uri: http::Uri = trimmed.parse().map_err(|_| HealthError::Url(url.to_owned()))?;
    let http = matches!(uri.scheme_str(), Some("http" | "https"));
    if !http || uri.host().is_none_or(str::is_empty) {
        return Err(HealthError::Url(url.to_owned()));
    }
    Ok(trimmed.to_owned())
}

fn is_loopback(base: &str) -> bool {
    let Ok(uri) = base.parse::<http::Uri>() else { return false };
    let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The status and (the start of) the body of `GET url`.
async fn get(client: &reqwest::Client, url: &str) -> Result<(u16, Vec<u8>), HealthError> {
    let failed = |error: reqwest::Error| match error.is_timeout() {
        true => HealthError::Timeout { url: url.to_owned() },
        false => HealthError::Unreachable { url: url.to_owned(), detail: innermost(&error) },
    };
    let mut response = client.get(url).send().await.map_err(failed)?;
    let status = response.status().as_u16();
    let mut body = Vec::new();
    while body.len() < MAX_BODY {
        match response.chunk().await.map_err(failed)? {
            Some(chunk) => body.extend_from_slice(&chunk),
            None => break,
        }
    }
    Ok((status, body))
}

/// The most specific cause (e.g. "Connection refused"), not reqwest's outer "error sending request".
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// What a refusal says: a degraded readiness answer's unavailable sources
/// (`{"status":"degraded","sources":{"<ns>":{"state","reason",...}}}`), a
/// JSON error's message, or the text itself.
fn reason(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_slice::<Value>(body) else { return text.trim().chars().take(500).collect() };
    if let Some(sources) = value.get("sources").and_then(Value::as_object) {
        let down: Vec<String> = sources
            .iter()
            .filter(|(_, s)| s.get("state").and_then(Value::as_str) != Some("connected"))
            .map(|(namespace, s)| {
                let state = s.get("state").and_then(Value::as_str).unwrap_or("unavailable");
                let mut line = format!("source {namespace} is {state}");
                if let Some(why) = s.get("reason").and_then(Value::as_str) {
                    line.push_str(&format!(": {why}"));
                }
                if let Some(next) = s.get("nextRetryAt").and_then(Value::as_str) {
                    line.push_str(&format!(" (next retry {next})"));
                }
                line
            })
            .collect();
        if !down.is_empty() {
            return down.join("; ");
        }
    }
    let message = value.pointer("/error/message").or_else(|| value.get("status")).and_then(Value::as_str);
    message.map_or_else(|| text.trim().chars().take(500).collect(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_where_serve_listens_by_default() {
        assert_eq!(DEFAULT_URL, format!("http://{}", crate::serve::DEFAULT_ADDR));
    }

    #[test]
    fn urls_are_taken_as_serve_prints_them() {
        assert_eq!(base_url("http://127.0.0.1:8787/mcp").unwrap(), "http://127.0.0.1:8787");
        assert_eq!(base_url(" https://exec.example.com/ ").unwrap(), "https://exec.example.com");
        assert_eq!(base_url("http://box:8787/prefix").unwrap(), "http://box:8787/prefix");
        for bad in ["127.0.0.1:8787", "ftp://x", "http://", ""] {
            assert!(matches!(base_url(bad), Err(HealthError::Url(_))), "{bad}");
        }
        assert!(is_loopback("http://localhost:1") && is_loopback("http://[::1]:1") && is_loopback("http://127.0.0.2"));
        assert!(!is_loopback("http://team-box:8787"));
    }

    #[test]
    fn a_degraded_answer_names_each_unavailable_source_and_why() {
        let body = serde_json::json!({"status": "degraded", "sources": {
            "gh": {"state": "unavailable", "reason": "spec URL answered 502", "since": "t0", "nextRetryAt": "t1"},
            "shop": {"state": "connected"},
        }});
        assert_eq!(
            reason(body.to_string().as_bytes()),
            "source gh is unavailable: spec URL answered 502 (next retry t1)"
        );
        assert_eq!(reason(br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"store down"}}"#), "store down");
        assert_eq!(reason(b"not found\n"), "not found");
        let refused = HealthError::NotReady { url: "u".into(), status: 503, reason: String::new() };
        assert_eq!(refused.to_string(), "not ready: u answered 503");
    }
}
