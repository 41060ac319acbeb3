//! How a host is set up: `HostConfig`, its defaults (they suit `executor
//! serve` on loopback) and the `EXECUTOR_*` settings read over them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use executor_core::{Clock, ElicitationMode, QuotaLimit, QuotaLimits, Quotas, SystemClock, Timeouts, ToolkitName};
use executor_events::{EventSettings, EventSink, SinkError};
use executor_sandbox::Tools;
use rmcp::model::RequestStateCodec;

use crate::application::continuations::Continuations;

/// How the host is set up.
#[derive(Debug, Clone)]
pub struct HostConfig {
    pub timeouts: Timeouts,
    /// Base of links handed to clients; derived from the request's host when unset.
    pub public_url: Option<String>,
    /// Hosts accepted in the `Host` header (DNS-rebinding protection); `None`
    /// accepts any (behind API Gateway, which already routes by host).
    pub allowed_hosts: Option<Vec<String>>,
    pub max_body_bytes: usize,
    /// Activity is written at most this often per session.
    pub activity_interval: Duration,
    /// How long a session record is kept (TTL) after its last write.
    pub session_retention: Duration,
    pub default_mode: ElicitationMode,
    /// Accept OIDC JWTs as well as API keys.
    pub oidc: Option<OidcConfig>,
    /// How long a browser-mode `resume` waits for the human's decision.
    pub approval_wait: Duration,
    /// Seals native-mode request states; without it, native requests are
    /// served in model mode. Every instance must share it.
    pub request_state_key: Option<RequestStateKey>,
    /// The one clock of the host: sessions, executions and approvals read it.
    pub clock: Arc<dyn Clock>,
    /// Sandbox runs at once in this process (`EXECUTOR_MAX_CONCURRENT_EXECUTIONS`);
    /// more wait a second, then get `busy`. Bounds memory: each run may use
    /// the sandbox's heap limit.
    pub max_concurrent_executions: usize,
    /// Served at `/mcp/toolkits/{name}` beside `/mcp`.
    pub toolkits: Vec<ToolkitEndpoint>,
    /// Per-owner limits: `EXECUTOR_QUOTA_*` for everyone, `[quotas]` per owner.
    pub quotas: Quotas,
    /// How long an "always allow" lasts (`EXECUTOR_GRANT_TTL_MS`).
    pub grant_ttl: Duration,
    /// How long executions' history is kept (`EXECUTOR_AUDIT_RETENTION_DAYS`).
    pub audit_retention: Duration,
    /// How long an `execute` or `resume` waits for the outcome before it
    /// answers `running` (`EXECUTOR_RESPONSE_BUDGET_MS`); the run goes on.
    pub response_budget: Duration,
    /// The longest a run may take, tool calls included, time paused for
    /// approval not (`EXECUTOR_MAX_EXECUTION_MS`): the sandbox's wall clock.
    pub max_execution: Duration,
    /// Where runs past the response budget go on when this process cannot
    /// keep them (the MCP Lambda function); `None`: in a background task.
    pub continuations: Option<Arc<dyn Continuations>>,
    /// Where lifecycle events go (`EXECUTOR_EVENT_BUS`, `EXECUTOR_EVENT_WEBHOOK`).
    pub events: EventSettings,
    /// The sink `events` names, once [`HostConfig::connect_events`] has
    /// connected it; without one no event is stored.
    pub event_sink: Option<Arc<dyn EventSink>>,
    /// Where this host is reached when `public_url` is unset (`executor
    /// serve`: its listening address): the base of the approval links in events.
    pub local_url: Option<String>,
    /// Per-owner OAuth connections (the catalog's `oauth2` sources): their
    /// calls wait for the owner to connect, `/oauth/...` and `/api/connections`.
    pub connections: Option<Arc<dyn executor_sandbox::Connections>>,
    /// How long a console sign-in lasts (`EXECUTOR_CONSOLE_SESSION_MS`).
    pub console_session: Duration,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            timeouts: Timeouts::default(),
            public_url: None,
            allowed_hosts: Some(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]),
            max_body_bytes: 1 << 20,
            activity_interval: Duration::from_secs(30),
            session_retention: Duration::from_secs(24 * 3600),
            default_mode: ElicitationMode::Model,
            oidc: None,
            approval_wait: Duration::from_secs(20),
            request_state_key: None,
            clock: Arc::new(SystemClock),
            max_concurrent_executions: crate::application::executions::DEFAULT_MAX_CONCURRENT,
            toolkits: Vec::new(),
            quotas: Quotas::default(),
            grant_ttl: executor_core::DEFAULT_GRANT_TTL,
            audit_retention: executor_core::DEFAULT_AUDIT_RETENTION,
            response_budget: crate::application::executions::DEFAULT_RESPONSE_BUDGET,
            max_execution: Duration::from_secs(300),
            continuations: None,
            events: EventSettings::default(),
            event_sink: None,
            local_url: None,
            connections: None,
            console_session: executor_core::DEFAULT_CONSOLE_SESSION,
        }
    }
}

/// Why the event sinks could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EventsSetupError {
    #[error(
        "EXECUTOR_EVENT_BUS or EXECUTOR_EVENT_WEBHOOK is set, but not EXECUTOR_PUBLIC_URL: events carry approval \
         links, so set it to the address people reach this server at"
    )]
    NoLinkBase,
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// A setting from the environment (or its command-line twin) that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} must be {expected}, not {value:?}")]
pub struct ConfigError {
    pub name: &'static str,
    pub expected: &'static str,
    pub value: String,
}

const OIDC_ISSUER_EXPECTED: &str = "an http:// or https:// URL with a host: the issuer (the `iss` of its tokens)";
const JWKS_URL_EXPECTED: &str = "an http:// or https:// URL with a host: where the issuer publishes its keys";

/// `value` when it is an http(s) URL with a host; else the error naming `name`.
fn http_url(name: &'static str, expected: &'static str, value: String) -> Result<String, ConfigError> {
    let uri: Option<http::Uri> = value.trim().parse().ok();
    match uri.as_ref().map(|u| (u.scheme_str(), u.authority())) {
        Some((Some("http" | "https"), Some(authority))) if !authority.host().is_empty() => Ok(value.trim().to_owned()),
        _ => Err(ConfigError { name, expected, value }),
    }
}

/// Ten years: DynamoDB's TTL takes any time, but a longer retention is a typo.
const MAX_AUDIT_RETENTION_DAYS: u64 = 3650;

const PUBLIC_URL_EXPECTED: &str =
    "an http:// or https:// URL with a host: the address clients reach this server at, e.g. http://host:8787";

impl HostConfig {
    /// The defaults, with `EXECUTOR_SESSION_TIMEOUT_MS`, `EXECUTOR_PAUSED_LEASE_MS`,
    /// `EXECUTOR_APPROVAL_WINDOW_MS`, `EXECUTOR_APPROVAL_WAIT_MS`, `EXECUTOR_GRANT_TTL_MS`,
    /// `EXECUTOR_AUDIT_RETENTION_DAYS`,
    /// `EXECUTOR_RESPONSE_BUDGET_MS`, `EXECUTOR_MAX_EXECUTION_MS`, `EXECUTOR_ELICITATION_MODE`,
    /// `EXECUTOR_REQUEST_STATE_KEY`, `EXECUTOR_PUBLIC_URL`, `EXECUTOR_EVENT_BUS`, `EXECUTOR_EVENT_WEBHOOK`, the
    /// `EXECUTOR_QUOTA_*` and the `EXECUTOR_OIDC_*` settings
    /// applied from `lookup`
    /// (`|name| std::env::var(name).ok()` in the hosts).
    pub fn with_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let millis = |name: &'static str, current: Duration| -> Result<Duration, ConfigError> {
            match lookup(name) {
                None => Ok(current),
                Some(value) => match value.trim().parse::<u64>() {
                    Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
                    _ => Err(ConfigError { name, expected: "a whole number of milliseconds greater than zero", value }),
                },
            }
        };
        let t = &mut self.timeouts;
        t.session_timeout = millis("EXECUTOR_SESSION_TIMEOUT_MS", t.session_timeout)?;
        t.paused_lease = millis("EXECUTOR_PAUSED_LEASE_MS", t.paused_lease)?;
        t.approval_window = millis("EXECUTOR_APPROVAL_WINDOW_MS", t.approval_window)?;
        self.approval_wait = millis("EXECUTOR_APPROVAL_WAIT_MS", self.approval_wait)?;
        self.grant_ttl = millis("EXECUTOR_GRANT_TTL_MS", self.grant_ttl)?;
        self.console_session = millis("EXECUTOR_CONSOLE_SESSION_MS", self.console_session)?;
        if let Some(value) = lookup("EXECUTOR_AUDIT_RETENTION_DAYS") {
            self.audit_retention = match value.trim().parse::<u64>() {
                Ok(days @ 1..=MAX_AUDIT_RETENTION_DAYS) => Duration::from_secs(days * 24 * 3600),
                _ => {
                    let expected = "a whole number of days from 1 to 3650";
                    return Err(ConfigError { name: "EXECUTOR_AUDIT_RETENTION_DAYS", expected, value });
                }
            };
        }
        self.response_budget = millis("EXECUTOR_RESPONSE_BUDGET_MS", self.response_budget)?;
        self.max_execution = millis("EXECUTOR_MAX_EXECUTION_MS", self.max_execution)?;
        if let Some(value) = lookup("EXECUTOR_MAX_CONCURRENT_EXECUTIONS") {
            self.max_concurrent_executions = match value.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    let expected = "a whole number greater than zero";
                    return Err(ConfigError { name: "EXECUTOR_MAX_CONCURRENT_EXECUTIONS", expected, value });
                }
            };
        }
        if let Some(key) = lookup("EXECUTOR_REQUEST_STATE_KEY").filter(|k| !k.is_empty()) {
            let short = || ConfigError {
                name: "EXECUTOR_REQUEST_STATE_KEY",
                expected: "at least 32 bytes, the same on every instance",
                value: "(hidden)".into(),
            };
            self.request_state_key = Some(RequestStateKey::new(key.into_bytes()).ok_or_else(short)?);
        }
        if let Some(mode) = lookup("EXECUTOR_ELICITATION_MODE").filter(|m| !m.trim().is_empty()) {
            self.default_mode = parse_mode(mode.trim()).map_err(|_| ConfigError {
                name: "EXECUTOR_ELICITATION_MODE",
                expected: "model, browser or native",
                value: mode,
            })?;
        }
        if let Some(url) = lookup("EXECUTOR_PUBLIC_URL").filter(|u| !u.trim().is_empty()) {
            self = self.with_public_url(&url)?;
        }
        self.quotas.defaults = quota_defaults(&lookup, self.quotas.defaults)?;
        if let Some(value) = lookup("EXECUTOR_EVENT_BUS").filter(|v| !v.trim().is_empty()) {
            let bus = executor_events::parse_bus(&value);
            let expected = executor_events::BUS_EXPECTED;
            self.events.bus = Some(bus.ok_or(ConfigError { name: "EXECUTOR_EVENT_BUS", expected, value })?);
        }
        if let Some(value) = lookup("EXECUTOR_EVENT_WEBHOOK").filter(|v| !v.trim().is_empty()) {
            let url = executor_events::parse_webhook(&value);
            let expected = executor_events::WEBHOOK_EXPECTED;
            self.events.webhook = Some(url.ok_or(ConfigError { name: "EXECUTOR_EVENT_WEBHOOK", expected, value })?);
        }
        if let Some(oidc) = oidc_from(&lookup)? {
            self.oidc = Some(oidc);
        }
        if let Some(client_id) = lookup("EXECUTOR_CONSOLE_CLIENT_ID").filter(|c| !c.trim().is_empty()) {
            let expected = "set only with EXECUTOR_OIDC_ISSUER (the console signs in with that issuer)";
            let oidc = self.oidc.as_mut().ok_or(ConfigError {
                name: "EXECUTOR_CONSOLE_CLIENT_ID",
                expected,
                value: client_id.clone(),
            })?;
            oidc.console_client_id = Some(client_id.trim().to_owned());
        }
        Ok(self)
    }

    /// Connect the sinks `events` names (unless a sink is set already).
    pub async fn connect_events(mut self) -> Result<Self, EventsSetupError> {
        if self.event_sink.is_none() {
            self.event_sink = self.events.connect().await?;
        }
        Ok(self)
    }

    /// For hosts that open approval links (the HTTP functions): events, when
    /// on, need a base for the links they carry.
    pub fn require_event_links(&self) -> Result<(), EventsSetupError> {
        match (self.events.is_enabled(), self.event_links()) {
            (true, None) => Err(EventsSetupError::NoLinkBase),
            _ => Ok(()),
        }
    }

    /// The base of the approval links events carry.
    pub(crate) fn event_links(&self) -> Option<&str> {
        self.public_url.as_deref().or(self.local_url.as_deref())
    }

    /// Serve at `url`, the address clients use (`EXECUTOR_PUBLIC_URL`): links
    /// are based on it, and its host joins the hosts accepted in the `Host`
    /// header, so a server on `0.0.0.0` answers other machines by that name.
    pub fn with_public_url(mut self, url: &str) -> Result<Self, ConfigError> {
        let url = url.trim();
        let invalid = || ConfigError { name: "EXECUTOR_PUBLIC_URL", expected: PUBLIC_URL_EXPECTED, value: url.into() };
        let uri: http::Uri = url.parse().map_err(|_| invalid())?;
        let authority = match (uri.scheme_str(), uri.authority()) {
            (Some("http" | "https"), Some(authority)) if !authority.host().is_empty() => authority,
            _ => return Err(invalid()),
        };
        // Credentials in a URL handed to every client would leak them.
        if authority.as_str().contains('@') || uri.query().is_some() {
            return Err(invalid());
        }
        if let Some(hosts) = &mut self.allowed_hosts {
            // With its port when it names one: host and port must then match.
            hosts.push(authority.as_str().to_owned());
        }
        self.public_url = Some(url.trim_end_matches('/').to_owned());
        Ok(self)
    }
}

/// `model`, `browser` or `native` (`?elicitation_mode=`, `EXECUTOR_ELICITATION_MODE`).
pub(crate) fn parse_mode(value: &str) -> Result<ElicitationMode, String> {
    match value {
        "model" => Ok(ElicitationMode::Model),
        "browser" => Ok(ElicitationMode::Browser),
        "native" => Ok(ElicitationMode::Native),
        other => Err(format!("elicitation_mode must be model, browser or native, not {other:?}")),
    }
}

/// The `EXECUTOR_QUOTA_*` defaults from `lookup`, over `defaults`.
fn quota_defaults(
    lookup: &impl Fn(&str) -> Option<String>,
    mut defaults: QuotaLimits,
) -> Result<QuotaLimits, ConfigError> {
    let d = &mut defaults;
    for (limit, slot) in [
        (QuotaLimit::ExecutionsPerHour, &mut d.executions_per_hour),
        (QuotaLimit::ConcurrentExecutions, &mut d.concurrent_executions),
        (QuotaLimit::ResumesPerExecution, &mut d.resumes_per_execution),
        (QuotaLimit::ToolCallsPerExecution, &mut d.tool_calls_per_execution),
    ] {
        let name = limit.variable();
        match lookup(name).as_deref().map(str::trim) {
            None | Some("") => {}
            Some(value) => match value.parse::<u32>() {
                Ok(n) if n > 0 => *slot = Some(n),
                _ => {
                    let expected = "a whole number greater than zero (unset it for no limit)";
                    return Err(ConfigError { name, expected, value: value.to_owned() });
                }
            },
        }
    }
    Ok(defaults)
}

/// The `EXECUTOR_OIDC_*` settings from `lookup`, when an issuer is set.
fn oidc_from(lookup: &impl Fn(&str) -> Option<String>) -> Result<Option<OidcConfig>, ConfigError> {
    let Some(issuer) = lookup("EXECUTOR_OIDC_ISSUER").filter(|u| !u.trim().is_empty()) else { return Ok(None) };
    let issuer = http_url("EXECUTOR_OIDC_ISSUER", OIDC_ISSUER_EXPECTED, issuer)?;
    let jwks_url = lookup("EXECUTOR_OIDC_JWKS_URL")
        .filter(|u| !u.trim().is_empty())
        .map(|url| http_url("EXECUTOR_OIDC_JWKS_URL", JWKS_URL_EXPECTED, url))
        .transpose()?;
    let audience = lookup("EXECUTOR_OIDC_AUDIENCE").filter(|a| !a.trim().is_empty()).ok_or(ConfigError {
        name: "EXECUTOR_OIDC_AUDIENCE",
        expected: "set with EXECUTOR_OIDC_ISSUER (the audience the tokens are for)",
        value: String::new(),
    })?;
    Ok(Some(OidcConfig {
        issuer,
        audience,
        jwks_url,
        owner_claim: lookup("EXECUTOR_OIDC_OWNER_CLAIM").unwrap_or_else(|| "sub".into()),
        share_key_owners: match lookup("EXECUTOR_OIDC_SHARE_KEY_OWNERS").as_deref().map(str::trim) {
            None | Some("" | "false" | "0") => false,
            Some("true" | "1") => true,
            Some(other) => {
                let (name, expected) = ("EXECUTOR_OIDC_SHARE_KEY_OWNERS", "true or false");
                return Err(ConfigError { name, expected, value: other.to_owned() });
            }
        },
        console_client_id: None,
    }))
}

/// `EXECUTOR_OIDC_ISSUER`, `EXECUTOR_OIDC_AUDIENCE`, `EXECUTOR_OIDC_JWKS_URL`,
/// `EXECUTOR_OIDC_OWNER_CLAIM`, `EXECUTOR_OIDC_SHARE_KEY_OWNERS`, `EXECUTOR_CONSOLE_CLIENT_ID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    pub issuer: String,
    pub audience: String,
    /// Default: `jwks_uri` from `<issuer>/.well-known/openid-configuration`.
    pub jwks_url: Option<String>,
    pub owner_claim: String,
    /// The claim names an API-key owner (it must be a plain owner name)
    /// instead of an identity of the issuer's own.
    pub share_key_owners: bool,
    /// The console's public client at the issuer (`EXECUTOR_CONSOLE_CLIENT_ID`):
    /// with it, the console signs people in with the issuer.
    pub console_client_id: Option<String>,
}

/// The HMAC key for request states: at least 32 bytes, the same on every
/// instance (`EXECUTOR_REQUEST_STATE_KEY`). Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct RequestStateKey(Vec<u8>);

impl RequestStateKey {
    pub const MIN_BYTES: usize = RequestStateCodec::MIN_KEY_LENGTH;

    /// The key's bytes, for the codec that seals request states.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// `None` when shorter than [`Self::MIN_BYTES`].
    pub fn new(bytes: impl Into<Vec<u8>>) -> Option<Self> {
        let bytes = bytes.into();
        (bytes.len() >= Self::MIN_BYTES).then_some(Self(bytes))
    }
}

impl fmt::Debug for RequestStateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestStateKey(..)")
    }
}

/// One toolkit as the host serves it.
#[derive(Clone)]
pub struct ToolkitEndpoint {
    pub name: ToolkitName,
    /// The toolkit's view: only its tools, its stricter policy.
    pub tools: Arc<dyn Tools>,
    /// What `execute`'s description lists on the endpoint.
    pub namespaces: Vec<String>,
}

impl fmt::Debug for ToolkitEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolkitEndpoint").field("name", &self.name).field("namespaces", &self.namespaces).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_need_a_base_for_their_links_where_links_are_opened() {
        let lookup = |pairs: [(&'static str, &'static str); 2]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
        };
        let on = [("EXECUTOR_EVENT_BUS", "executor-events"), ("EXECUTOR_EVENT_WEBHOOK", "https://hooks.example/x")];
        let config = HostConfig::default().with_env(lookup(on)).unwrap();
        assert_eq!(config.events.bus.as_deref(), Some("executor-events"));
        assert_eq!(config.events.webhook.as_deref(), Some("https://hooks.example/x"));
        assert!(matches!(config.require_event_links(), Err(EventsSetupError::NoLinkBase)));
        let local = HostConfig { local_url: Some("http://127.0.0.1:8787".into()), ..config.clone() };
        assert_eq!(local.event_links(), Some("http://127.0.0.1:8787"));
        let public = config.with_public_url("https://exec.example.com").unwrap();
        assert!(public.require_event_links().is_ok());
        assert_eq!(public.event_links(), Some("https://exec.example.com"));
        assert!(HostConfig::default().require_event_links().is_ok(), "events off: nothing to check");
    }

    #[test]
    fn settings_from_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
        };
        let config = HostConfig::default()
            .with_env(env(&[
                ("EXECUTOR_SESSION_TIMEOUT_MS", "60000"),
                ("EXECUTOR_APPROVAL_WINDOW_MS", " 1500 "),
                ("EXECUTOR_PUBLIC_URL", "https://exec.example.com"),
                ("EXECUTOR_ELICITATION_MODE", "browser"),
                ("EXECUTOR_APPROVAL_WAIT_MS", "5000"),
                ("EXECUTOR_GRANT_TTL_MS", "86400000"),
                ("EXECUTOR_AUDIT_RETENTION_DAYS", "90"),
                ("EXECUTOR_RESPONSE_BUDGET_MS", "2000"),
                ("EXECUTOR_MAX_EXECUTION_MS", "60000"),
                ("EXECUTOR_REQUEST_STATE_KEY", "0123456789abcdef0123456789abcdef"),
            ]))
            .unwrap();
        assert_eq!(config.default_mode, ElicitationMode::Browser);
        assert_eq!(config.approval_wait, Duration::from_secs(5));
        assert_eq!(config.grant_ttl, Duration::from_secs(86_400));
        assert_eq!(config.audit_retention, Duration::from_secs(90 * 24 * 3600));
        assert_eq!(HostConfig::default().audit_retention, Duration::from_secs(30 * 24 * 3600));
        for bad in ["0", "-1", "3651", "30d", ""] {
            let refused =
                HostConfig::default().with_env(|name| (name == "EXECUTOR_AUDIT_RETENTION_DAYS").then(|| bad.into()));
            assert!(refused.is_err(), "{bad:?} is no retention");
        }
        assert_eq!((config.response_budget, config.max_execution), (Duration::from_secs(2), Duration::from_secs(60)));
        let defaults = HostConfig::default();
        assert_eq!(defaults.grant_ttl, Duration::from_secs(30 * 24 * 3600));
        assert_eq!(
            (defaults.response_budget, defaults.max_execution),
            (Duration::from_secs(20), Duration::from_secs(300))
        );
        assert!(config.request_state_key.is_some());
        assert_eq!(config.timeouts.session_timeout, Duration::from_secs(60));
        assert_eq!(config.timeouts.paused_lease, Timeouts::default().paused_lease);
        assert_eq!(config.timeouts.approval_window, Duration::from_millis(1500));
        assert_eq!(config.public_url.as_deref(), Some("https://exec.example.com"));
        assert_eq!(config.oidc, None);
        let with_oidc = HostConfig::default()
            .with_env(env(&[("EXECUTOR_OIDC_ISSUER", "https://idp.example"), ("EXECUTOR_OIDC_AUDIENCE", "executor")]))
            .unwrap();
        let oidc = with_oidc.oidc.unwrap();
        assert_eq!(
            (oidc.issuer.as_str(), oidc.audience.as_str(), oidc.owner_claim.as_str()),
            ("https://idp.example", "executor", "sub")
        );
        let not_a_url = HostConfig::default()
            .with_env(env(&[("EXECUTOR_OIDC_ISSUER", "idp.example"), ("EXECUTOR_OIDC_AUDIENCE", "executor")]));
        assert_eq!(
            not_a_url.unwrap_err().to_string(),
            format!("EXECUTOR_OIDC_ISSUER must be {OIDC_ISSUER_EXPECTED}, not \"idp.example\"")
        );
        let jwks = HostConfig::default().with_env(env(&[
            ("EXECUTOR_OIDC_ISSUER", "https://idp.example"),
            ("EXECUTOR_OIDC_AUDIENCE", "executor"),
            ("EXECUTOR_OIDC_JWKS_URL", "keys.json"),
        ]));
        assert_eq!(jwks.unwrap_err().name, "EXECUTOR_OIDC_JWKS_URL");
        let missing = HostConfig::default().with_env(env(&[("EXECUTOR_OIDC_ISSUER", "https://idp.example")]));
        assert_eq!(missing.unwrap_err().name, "EXECUTOR_OIDC_AUDIENCE");
        let short = HostConfig::default().with_env(env(&[("EXECUTOR_REQUEST_STATE_KEY", "too short")]));
        assert_eq!(short.unwrap_err().name, "EXECUTOR_REQUEST_STATE_KEY");
        let mode = HostConfig::default().with_env(env(&[("EXECUTOR_ELICITATION_MODE", "pigeon")]));
        assert_eq!(
            mode.unwrap_err().to_string(),
            "EXECUTOR_ELICITATION_MODE must be model, browser or native, not \"pigeon\""
        );
        for bad in ["0", "-5", "5m", ""] {
            let pairs: &'static [(&'static str, &'static str)] =
                Box::leak(Box::new([("EXECUTOR_PAUSED_LEASE_MS", bad)]));
            let error = HostConfig::default().with_env(env(pairs)).unwrap_err();
            assert_eq!(error.name, "EXECUTOR_PAUSED_LEASE_MS", "{bad:?}");
        }
    }

    #[test]
    fn the_public_url_is_checked_and_its_host_allowed() {
        let config = HostConfig::default().with_public_url("http://team-box:8787/").unwrap();
        assert_eq!(config.public_url.as_deref(), Some("http://team-box:8787"));
        assert_eq!(config.allowed_hosts.unwrap(), ["localhost", "127.0.0.1", "::1", "team-box:8787"]);
        let behind_a_proxy = HostConfig::default().with_public_url("https://exec.example.com/team").unwrap();
        assert_eq!(behind_a_proxy.allowed_hosts.unwrap().last().unwrap(), "exec.example.com");
        let any_host = HostConfig { allowed_hosts: None, ..HostConfig::default() };
        assert_eq!(any_host.with_public_url("https://exec.example.com").unwrap().allowed_hosts, None);
        for bad in ["notaurl", "ftp://host", "host:8787", "http://", "http://user:pw@host", "/mcp", "http://h?x=1"] {
            let error = HostConfig::default().with_env(|n| (n == "EXECUTOR_PUBLIC_URL").then(|| bad.to_owned()));
            let message = error.unwrap_err().to_string();
            assert!(
                message.starts_with("EXECUTOR_PUBLIC_URL must be an http:// or https:// URL with a host"),
                "{bad}: {message}"
            );
            assert!(message.ends_with(&format!("not {bad:?}")), "{message}");
        }
    }
}
