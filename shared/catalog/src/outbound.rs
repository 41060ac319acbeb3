//! Every request the catalog makes goes through here: the destination's
//! addresses are checked after DNS resolution and before connecting, and
//! responses are cut at a size and a deadline.
//!
//! Redirects: GET and HEAD follow them within the same origin, at most 5;
//! any other method gets the 3xx back and nothing is re-sent, since a
//! redirected write would repeat its body (and idempotency key) wherever the
//! upstream points.
//!
//! Always refused: the cloud metadata endpoints (169.254.169.254,
//! fd00:ec2::254), link-local (169.254.0.0/16, fe80::/10), unspecified
//! (0.0.0.0, ::), broadcast and multicast. Loopback (127.0.0.0/8, ::1) is
//! refused unless `outbound.allow_loopback = true`, the switch for local
//! development and tests. Private networks are allowed: services in the same
//! VPC are legitimate sources.
//!
//! Errors never carry a URL's query or userinfo ([`display_url`]), where
//! credentials travel.

use std::error::Error as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Method, StatusCode};
use url::{Host, Url};

use crate::config::OutboundConfig;
use crate::redact::display_url;

/// Same-origin redirects a read follows before the 3xx is handed back.
const MAX_REDIRECTS: usize = 5;

/// Which destination addresses are acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRules {
    pub allow_loopback: bool,
}

const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

impl AddressRules {
    /// Why `ip` may not be contacted, if it may not.
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(v4) if v4 == Ipv4Addr::new(169, 254, 169, 254) => Some("the cloud metadata endpoint"),
            IpAddr::V6(v6) if v6 == METADATA_V6 => Some("the cloud metadata endpoint"),
            IpAddr::V4(v4) if v4.is_link_local() => Some("a link-local address"),
            IpAddr::V6(v6) if v6.is_unicast_link_local() => Some("a link-local address"),
            _ if ip.is_unspecified() => Some("the unspecified address"),
            IpAddr::V4(v4) if v4.is_broadcast() => Some("the broadcast address"),
            _ if ip.is_multicast() => Some("a multicast address"),
            _ if ip.is_loopback() && !self.allow_loopback => {
                Some("loopback (set `allow_loopback = true` under [outbound] for local services)")
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum OutboundError {
    #[error("refused to connect to {host} ({ip}): {reason}")]
    Refused { host: String, ip: IpAddr, reason: &'static str },
    #[error("{url} is not an http(s) URL with a host")]
    BadUrl { url: String },
    #[error("no answer within {seconds} s (outbound timeout)")]
    Timeout { seconds: u64 },
    #[error("the response is larger than the {limit}-byte limit (outbound max_response_bytes)")]
    TooLarge { limit: usize },
    #[error("the request failed: {detail}")]
    Failed { detail: String },
}

/// Resolves names, then refuses the lot if any address is forbidden (a name
/// with one good and one bad address could otherwise be steered to the bad one).
struct CheckedResolver {
    rules: AddressRules,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let rules = self.rules;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some((ip, reason)) = addrs.iter().find_map(|a| rules.refusal(a.ip()).map(|r| (a.ip(), r))) {
                return Err(Box::new(OutboundError::Refused { host, ip, reason }) as Box<_>);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// A response read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// The `Location` header, as text, when there is one.
    pub location: Option<String>,
    pub body: Vec<u8>,
}

/// The one HTTP client of the catalog, with its limits.
#[derive(Clone)]
pub struct Outbound {
    client: reqwest::Client,
    rules: AddressRules,
    config: OutboundConfig,
}

impl Outbound {
    pub fn new(config: &OutboundConfig) -> Result<Self, OutboundError> {
        let rules = AddressRules { allow_loopback: config.allow_loopback };
        let client = executor_http_client::builder()
            .dns_resolver(Arc::new(CheckedResolver { rules }))
            // Followed in `open`, which knows the method.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would resolve names itself, past the address check.
            .no_proxy()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .build()
            .map_err(|e| OutboundError::Failed { detail: e.to_string() })?;
        Ok(Self { client, rules, config: config.clone() })
    }

    /// Literal IP hosts never reach the resolver, so they are checked here.
    pub fn check_url(&self, url: &Url) -> Result<(), OutboundError> {
        let ip = match url.host() {
            Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
            Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
            Some(Host::Domain(_)) if matches!(url.scheme(), "http" | "https") => return Ok(()),
            _ => return Err(OutboundError::BadUrl { url: display_url(url) }),
        };
        match self.rules.refusal(ip) {
            Some(reason) => Err(OutboundError::Refused { host: ip.to_string(), ip, reason }),
            None => Ok(()),
        }
    }

    /// Send and read the whole body, within the size cap.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, OutboundError> {
        let mut response = self.open(request).await?;
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        let body = self.read_body(&mut response).await?;
        Ok(Answer { status: response.status().as_u16(), location, body })
    }

    /// The rest of `response`'s body, within the size cap.
    pub async fn read_body(&self, response: &mut reqwest::Response) -> Result<Vec<u8>, OutboundError> {
        let mut body = Vec::new();
        while let Some(chunk) = self.next_chunk(response, body.len()).await? {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Send, and hand back the response with its body unread (for streams,
    /// read with [`Outbound::next_chunk`]). When spans are exported, the
    /// request carries the current span's W3C `traceparent`, so an upstream
    /// that traces joins the same trace.
    pub async fn open(&self, mut request: reqwest::RequestBuilder) -> Result<reqwest::Response, OutboundError> {
        if let Some(traceparent) = executor_telemetry::traceparent(&tracing::Span::current()) {
            request = request.header("traceparent", traceparent);
        }
        let mut request = request.build().map_err(|e| self.error(e))?;
        let reads = matches!(*request.method(), Method::GET | Method::HEAD);
        let origin = request.url().origin();
        let mut redirects = 0;
        let response = loop {
            self.check_url(request.url())?;
            // A read is sent again as it was; a write never is.
            let again = if reads && redirects < MAX_REDIRECTS { request.try_clone() } else { None };
            let response = self.client.execute(request).await.map_err(|e| self.error(e))?;
            match again.zip(redirect_target(&response)) {
                Some((mut again, target)) if target.origin() == origin => {
                    let (from, to) = (display_url(response.url()), display_url(&target));
                    tracing::debug!(%from, %to, "following a redirect");
                    *again.url_mut() = target;
                    request = again;
                    redirects += 1;
                }
                _ => break response,
            }
        };
        let limit = self.config.max_response_bytes;
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(OutboundError::TooLarge { limit });
        }
        Ok(response)
    }

    /// The next piece of `response`'s body, refused once the body would pass
    /// the size cap (`read` bytes of it were read before).
    pub async fn next_chunk(
        &self,
        response: &mut reqwest::Response,
        read: usize,
    ) -> Result<Option<bytes::Bytes>, OutboundError> {
        let limit = self.config.max_response_bytes;
        match response.chunk().await.map_err(|e| self.error(e))? {
            Some(chunk) if read + chunk.len() > limit => Err(OutboundError::TooLarge { limit }),
            chunk => Ok(chunk),
        }
    }

    pub fn request(&self, method: reqwest::Method, url: Url) -> reqwest::RequestBuilder {
        self.client.request(method, url)
    }

    /// The resolver's refusal is buried in reqwest's error chain; bring it up.
    /// reqwest names the URL in its errors: it is left out, query and all,
    /// and only its host and port are named (what an operator needs to see
    /// which service did not answer), with the most specific cause.
    pub fn error(&self, error: reqwest::Error) -> OutboundError {
        let host = error.url().and_then(host_and_port);
        let error = error.without_url();
        if error.is_timeout() {
            return OutboundError::Timeout { seconds: self.config.timeout.as_secs() };
        }
        let mut cause: Option<&(dyn std::error::Error + 'static)> = error.source();
        let mut innermost = None;
        while let Some(inner) = cause {
            if let Some(refused) = inner.downcast_ref::<OutboundError>() {
                return refused.clone();
            }
            innermost = Some(inner);
            cause = inner.source();
        }
        let to = host.map(|host| format!(" to {host}")).unwrap_or_default();
        let detail = match innermost {
            // e.g. "error sending request to 127.0.0.1:8080: Connection refused (os error 111)"
            Some(cause) => format!("{error}{to}: {cause}"),
            None => format!("{error}{to}"),
        };
        OutboundError::Failed { detail }
    }
}

/// `host` or `host:port` of `url`: never its user, path or query, which may hold credentials.
fn host_and_port(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    Some(match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// Where a redirect points, resolved against the URL that answered.
fn redirect_target(response: &reqwest::Response) -> Option<Url> {
    let redirects = [
        StatusCode::MOVED_PERMANENTLY,
        StatusCode::FOUND,
        StatusCode::SEE_OTHER,
        StatusCode::TEMPORARY_REDIRECT,
        StatusCode::PERMANENT_REDIRECT,
    ];
    if !redirects.contains(&response.status()) {
        return None;
    }
    let location = response.headers().get(reqwest::header::LOCATION)?.to_str().ok()?;
    response.url().join(location).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_rules() {
        let strict = AddressRules { allow_loopback: false };
        let local = AddressRules { allow_loopback: true };
        let cases: [(&str, bool, bool); 12] = [
            // (address, refused when strict, refused with loopback allowed)
            ("169.254.169.254", true, true),
            ("169.254.1.1", true, true),
            ("fd00:ec2::254", true, true),
            ("fe80::1", true, true),
            ("0.0.0.0", true, true),
            ("::", true, true),
            ("::ffff:169.254.169.254", true, true),
            ("224.0.0.1", true, true),
            ("127.0.0.1", true, false),
            ("::1", true, false),
            ("10.0.0.5", false, false),
            ("93.184.216.34", false, false),
        ];
        for (ip, refused_strict, refused_local) in cases {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(strict.refusal(ip).is_some(), refused_strict, "{ip} strict");
            assert_eq!(local.refusal(ip).is_some(), refused_local, "{ip} local");
        }
        assert_eq!(strict.refusal("169.254.169.254".parse().unwrap()), Some("the cloud metadata endpoint"));
    }
}
