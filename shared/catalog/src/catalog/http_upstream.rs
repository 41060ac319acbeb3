//! Calling an OpenAPI source: a call's arguments made into its operation's
//! request (`tool/http.rs`), sent with the source's credentials, and the
//! answer read as data and status, or as the error the code sees.

use executor_core::Effect;
use executor_sandbox::{CallContext, ToolError, ToolSuccess};
use serde_json::Value;
use url::Url;

use crate::catalog::endpoint::{ERROR_EXCERPT_CHARS, Endpoint, send_error};
use crate::catalog::tool_errors::invalid;
use crate::outbound::Outbound;
use crate::redact::Redactor;
use crate::tool::http::{ArgumentError, HttpOperation, RequestParts};

pub(super) struct HttpUpstream {
    pub(super) base_url: Url,
    /// Query credentials (an API key `in = "query"`), added to every URL.
    pub(super) query: Vec<(String, String)>,
    pub(super) endpoint: Endpoint,
}

impl HttpUpstream {
    /// What a call would do, for the person approving it: the method and the
    /// URL with the path filled in (without the source's credentials), or the
    /// operation's template when the arguments do not make a request.
    pub(super) fn effect(&self, op: &HttpOperation, args: &Value) -> String {
        match self.request(op, args, false) {
            Ok((_, url)) => format!("{} {url}", op.method),
            Err(_) => format!("{} {}{}", op.method, self.base_url.as_str().trim_end_matches('/'), op.path),
        }
    }

    /// The request a call's arguments make: its parts, and its URL with the
    /// source's query credentials when `with_credentials` (never in what a
    /// person is shown). One function both validates a call before its
    /// policy is asked and builds it when it is made.
    pub(super) fn request(
        &self,
        op: &HttpOperation,
        args: &Value,
        with_credentials: bool,
    ) -> Result<(RequestParts, Url), ArgumentError> {
        let parts = op.request(args)?;
        let credentials = if with_credentials { self.query.as_slice() } else { &[] };
        let url = parts.url(&self.base_url, credentials, &op.path)?;
        Ok((parts, url))
    }

    pub(super) async fn call(
        &self,
        op: &HttpOperation,
        args: Value,
        effect: Effect,
        ctx: &CallContext,
        redactor: &Redactor,
    ) -> Result<ToolSuccess, ToolError> {
        let (parts, url) = self.request(op, &args, true).map_err(|e| invalid(e.to_string()))?;
        let method = reqwest::Method::from_bytes(op.method.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let request = |outbound: &Outbound| {
            let mut request = outbound.request(method.clone(), url.clone());
            // A header the source's credentials set is theirs alone, never also the caller's.
            let credential =
                |name: &str| self.endpoint.headers.iter().any(|(own, _)| own.as_str().eq_ignore_ascii_case(name));
            for (name, value) in parts.headers.iter().filter(|(name, _)| !credential(name)) {
                request = request.header(name, value);
            }
            if effect == Effect::Write {
                // The same for every attempt at this call, for upstreams that honour it.
                request = request.header("Idempotency-Key", ctx.idempotency_key());
            }
            if let Some(body) = &parts.body {
                request = request.header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_string());
            }
            request
        };
        let answer = self.endpoint.send(request, ctx.owner.as_ref()).await.map_err(send_error)?;
        let status = answer.status;
        if (200..300).contains(&status) {
            let text = String::from_utf8_lossy(&answer.body);
            let data = match text.trim().is_empty() {
                true => Value::Null,
                false => serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.into_owned())),
            };
            return Ok(ToolSuccess { data, http_status: Some(status) });
        }
        let excerpt = redactor.excerpt(&answer.body, ERROR_EXCERPT_CHARS);
        let hint = match (status, answer.location) {
            (300..400, location) => {
                let location = location.map_or("none".into(), |l| redactor.excerpt(l.as_bytes(), ERROR_EXCERPT_CHARS));
                let rule = match op.method.as_str() {
                    "GET" | "HEAD" => "redirects to another origin, or more than 5, are not followed",
                    _ => "only GET and HEAD follow redirects: this request was sent once and not re-sent",
                };
                format!(" ({rule}; Location: {location})")
            }
            _ => String::new(),
        };
        Err(ToolError { code: format!("http_{status}"), message: format!("HTTP {status}{hint}: {excerpt}") })
    }
}
