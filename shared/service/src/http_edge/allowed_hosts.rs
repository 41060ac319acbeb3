//! The MCP endpoints' guard against DNS rebinding: a request's `Host` must
//! name the server (a loopback name, or the public URL's host), or a page a
//! browser loaded from elsewhere could reach a local server under its own
//! name. Checked once, before any message is answered: some are answered
//! before rmcp (MCP tasks, UI resources), so rmcp's own copy of the check,
//! which only saw the rest, is switched off.

use http::uri::Authority;
use http::{HeaderMap, StatusCode, Uri, header};

/// The hosts the MCP endpoints answer to; `None` (behind API Gateway, which
/// routes by host already) answers any.
pub(crate) struct AllowedHosts(Option<Vec<Named<String>>>);

/// A host (lowercase when configured), and its port when the allowed entry
/// names one (any port otherwise).
#[derive(Debug, PartialEq)]
struct Named<H> {
    host: H,
    port: Option<u16>,
}

/// Why a request's `Host` is refused.
#[derive(Debug, PartialEq)]
pub(crate) enum Refused {
    /// No `Host`, or one that is not a host and port.
    Malformed,
    /// A well-formed host the server does not answer to (the header's text).
    Foreign(String),
}

impl AllowedHosts {
    /// `hosts` as configured: `name` (any port) or `name:port`.
    pub fn new(hosts: Option<&[String]>) -> Self {
        Self(hosts.map(|hosts| hosts.iter().filter_map(|h| configured(h.trim())).collect()))
    }

    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refused> {
        let Some(allowed) = &self.0 else { return Ok(()) };
        // HTTP/2 carries the host in `:authority`, which hyper puts in the URI.
        let text = match headers.get(header::HOST) {
            Some(value) => value.to_str().map_err(|_| Refused::Malformed)?,
            None => uri.authority().map(Authority::as_str).ok_or(Refused::Malformed)?,
        };
        // A `Host` is a host and a port: never user information (`user@host`),
        // an IPv6 address in brackets.
        let authority = Authority::try_from(text).ok().filter(|_| !text.contains('@'));
        let asked = authority.as_ref().and_then(named).ok_or(Refused::Malformed)?;
        let answers = |a: &Named<String>| {
            a.host.eq_ignore_ascii_case(asked.host) && a.port.is_none_or(|port| asked.port == Some(port))
        };
        match allowed.iter().any(answers) {
            true => Ok(()),
            false => Err(Refused::Foreign(text.to_owned())),
        }
    }
}

impl Refused {
    /// The HTTP status and what to tell the client.
    pub fn answer(&self) -> (StatusCode, String) {
        match self {
            Self::Malformed => (StatusCode::BAD_REQUEST, "Bad Request: the Host header is missing or malformed".into()),
            Self::Foreign(host) => {
                let shown: String = host.chars().take(100).collect();
                let message = format!(
                    "Forbidden: this server does not answer to the Host `{shown}` (it guards against DNS rebinding); \
                     if clients reach it at that address, start it with --public-url <the URL they use> \
                     (EXECUTOR_PUBLIC_URL)"
                );
                (StatusCode::FORBIDDEN, message)
            }
        }
    }
}

/// An authority's host, an IPv6 address without its brackets, and port.
fn named(authority: &Authority) -> Option<Named<&str>> {
    let port = authority.port_u16();
    // Without a port the authority is its host alone (`host:port` with a
    // port that is no number parses, with no port).
    if port.is_none() && authority.as_str() != authority.host() {
        return None;
    }
    Some(Named { host: authority.host().trim_start_matches('[').trim_end_matches(']'), port })
}

/// An allowed entry, `name` or `name:port`, lowercase. A bare IPv6 address
/// (`::1`, as configured) is a name.
fn configured(text: &str) -> Option<Named<String>> {
    match Authority::try_from(text) {
        Ok(authority) => named(&authority).map(|n| Named { host: n.host.to_ascii_lowercase(), port: n.port }),
        Err(_) if text.parse::<std::net::Ipv6Addr>().is_ok() => Some(Named { host: text.to_owned(), port: None }),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(allowed: Option<&[&str]>, host: Option<&str>) -> Result<(), Refused> {
        let allowed: Option<Vec<String>> = allowed.map(|a| a.iter().map(|h| h.to_string()).collect());
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, host.parse().unwrap());
        }
        AllowedHosts::new(allowed.as_deref()).check(&Uri::from_static("/mcp"), &headers)
    }

    #[test]
    fn hosts_answered_and_refused() {
        let local: &[&str] = &["localhost", "127.0.0.1", "::1", "team-box:8787"];
        let foreign = |h: &str| Err(Refused::Foreign(h.to_owned()));
        let cases = [
            (Some(local), Some("localhost:8787"), Ok(())),
            (Some(local), Some("LOCALHOST"), Ok(())),
            (Some(local), Some("127.0.0.1:1"), Ok(())),
            (Some(local), Some("[::1]:8787"), Ok(())),
            (Some(local), Some("team-box:8787"), Ok(())),
            (Some(local), Some("team-box:9000"), foreign("team-box:9000")),
            (Some(local), Some("team-box"), foreign("team-box")),
            (Some(local), Some("attacker.example:8787"), foreign("attacker.example:8787")),
            (Some(local), Some("localhost.attacker.example"), foreign("localhost.attacker.example")),
            (Some(local), Some("[::2]:8787"), foreign("[::2]:8787")),
            (Some(local), Some("::1"), Err(Refused::Malformed)),
            (Some(local), Some("user@localhost"), Err(Refused::Malformed)),
            (Some(local), Some("localhost:port"), Err(Refused::Malformed)),
            (Some(local), Some(""), Err(Refused::Malformed)),
            (Some(local), None, Err(Refused::Malformed)),
            (Some(&[]), Some("localhost"), foreign("localhost")),
            (None, Some("anything.example"), Ok(())),
            (None, None, Ok(())),
        ];
        for (allowed, host, expected) in cases {
            assert_eq!(check(allowed, host), expected, "{allowed:?} {host:?}");
        }
    }

    #[test]
    fn without_a_host_header_the_uri_authority_is_checked() {
        let allowed = AllowedHosts::new(Some(&["localhost".to_owned()]));
        let uri = |u: &'static str| Uri::from_static(u);
        assert_eq!(allowed.check(&uri("http://localhost:8787/mcp"), &HeaderMap::new()), Ok(()));
        let refused = allowed.check(&uri("http://attacker.example/mcp"), &HeaderMap::new());
        assert_eq!(refused, Err(Refused::Foreign("attacker.example".into())));
    }

    #[test]
    fn a_refusal_says_what_to_do_and_shows_little_of_the_host() {
        let (status, message) = Refused::Foreign(format!("a{}", "b".repeat(500))).answer();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(message.contains("--public-url") && message.len() < 400, "{message}");
        assert_eq!(Refused::Malformed.answer().0, StatusCode::BAD_REQUEST);
    }
}
