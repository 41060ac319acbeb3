//! Every route of both surfaces, parsed once from the method and path.
//!
//! The MCP surface (the MCP function) is `/mcp`, `/mcp/toolkits/{name}`,
//! `/.well-known/...`, `/healthz` and `/readyz`; the approval surface (the
//! approval function) is `/approvals/...`, `/console/...`, `/oauth/...`, `/api/...`, the
//! client metadata document, `/healthz` and `/readyz`. `executor serve`
//! mounts both on one port.

use executor_core::CLIENT_METADATA_PATH;
use http::Method;

use crate::http_edge::connect::{CALLBACK_PATH, CONNECT_PREFIX};
use crate::http_edge::toolkits::TOOLKITS_PATH;

/// Which function's routes a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Surface {
    Mcp,
    Approvals,
}

impl Surface {
    /// The surface `executor serve` hands a path to.
    pub fn of(path: &str) -> Self {
        let console = path == "/console" || path.starts_with("/console/");
        match console || ["/approvals/", "/api/", "/oauth/"].iter().any(|prefix| path.starts_with(prefix)) {
            true => Self::Approvals,
            false => Self::Mcp,
        }
    }
}

/// The JSON API's routes: every one needs the owner's bearer token (the guard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `/api/executions/{id}` and `/api/executions/{id}/resume`.
    Executions,
    /// `/api/executions` (the listing) and `/api/executions/{id}/history`.
    History,
    /// `/api/grants` and `/api/grants/{id}`.
    Grants,
    /// `/api/connections` and `/api/connections/{source}`.
    Connections,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    /// `/healthz`: the process answers (liveness).
    Health,
    /// `/readyz`: every source is connected (readiness).
    Ready,
    /// `/.well-known/oauth-protected-resource` (and `.../mcp`).
    ProtectedResource,
    Mcp,
    /// `/mcp/toolkits/{name}`, with the name as sent.
    Toolkit(&'a str),
    /// `/approvals/{id}`: the link token is the caller's authority.
    ApprovalPage,
    /// `/console` and below: the approver's console (its session cookie is the caller's authority).
    Console,
    /// `/oauth/connect/{executionId}`.
    Connect,
    /// `/oauth/callback`.
    ConnectCallback,
    Api(Api),
    /// The Client ID Metadata Document of OAuth-protected MCP sources.
    ClientMetadata,
    NotFound,
}

impl<'a> Route<'a> {
    pub fn parse(surface: Surface, method: &Method, path: &'a str) -> Self {
        match surface {
            Surface::Mcp => Self::mcp(method, path),
            Surface::Approvals => Self::approvals(method, path),
        }
    }

    fn mcp(method: &Method, path: &'a str) -> Self {
        match (method, path.trim_end_matches('/')) {
            (&Method::GET, "/healthz") => Self::Health,
            (&Method::GET, "/readyz") => Self::Ready,
            (&Method::GET, "/.well-known/oauth-protected-resource" | "/.well-known/oauth-protected-resource/mcp") => {
                Self::ProtectedResource
            }
            (_, "/mcp") => Self::Mcp,
            (_, path) => match path.strip_prefix(TOOLKITS_PATH) {
                Some(name) => Self::Toolkit(name),
                None => Self::NotFound,
            },
        }
    }

    fn approvals(method: &Method, path: &str) -> Self {
        let under = |base: &str| path == base || path.starts_with(&format!("{base}/"));
        if path.starts_with("/approvals/") {
            Self::ApprovalPage
        } else if path == "/console" || path.starts_with("/console/") {
            Self::Console
        } else if path.starts_with(CONNECT_PREFIX) {
            Self::Connect
        } else if path == CALLBACK_PATH {
            Self::ConnectCallback
        } else if under("/api/connections") {
            Self::Api(Api::Connections)
        } else if path.trim_end_matches('/') == "/api/executions"
            || (path.starts_with("/api/executions/") && path.ends_with("/history"))
        {
            Self::Api(Api::History)
        } else if path.starts_with("/api/executions/") {
            Self::Api(Api::Executions)
        } else if under("/api/grants") {
            Self::Api(Api::Grants)
        } else if method == Method::GET && path == "/healthz" {
            Self::Health
        } else if method == Method::GET && path == "/readyz" {
            Self::Ready
        } else if method == Method::GET && path == CLIENT_METADATA_PATH {
            Self::ClientMetadata
        } else {
            Self::NotFound
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_of_both_surfaces() {
        use Surface::{Approvals as A, Mcp as M};
        let cases = [
            (M, Method::GET, "/healthz", Route::Health),
            (M, Method::GET, "/healthz/", Route::Health),
            (M, Method::POST, "/healthz", Route::NotFound),
            (M, Method::GET, "/readyz", Route::Ready),
            (M, Method::GET, "/readyz/", Route::Ready),
            (M, Method::POST, "/readyz", Route::NotFound),
            (M, Method::GET, "/readyzz", Route::NotFound),
            (M, Method::GET, "/.well-known/oauth-protected-resource", Route::ProtectedResource),
            (M, Method::GET, "/.well-known/oauth-protected-resource/mcp", Route::ProtectedResource),
            (M, Method::POST, "/mcp", Route::Mcp),
            (M, Method::DELETE, "/mcp/", Route::Mcp),
            (M, Method::POST, "/mcp/toolkits/triage", Route::Toolkit("triage")),
            (M, Method::POST, "/mcp/toolkits/", Route::NotFound),
            (M, Method::GET, "/api/grants", Route::NotFound),
            (A, Method::GET, "/approvals/e1", Route::ApprovalPage),
            (A, Method::GET, "/oauth/connect/e1", Route::Connect),
            (A, Method::GET, "/console", Route::Console),
            (A, Method::POST, "/console/executions/e1", Route::Console),
            (A, Method::GET, "/consoles", Route::NotFound),
            (M, Method::GET, "/console", Route::NotFound),
            (A, Method::GET, "/oauth/callback", Route::ConnectCallback),
            (A, Method::GET, "/api/connections", Route::Api(Api::Connections)),
            (A, Method::DELETE, "/api/connections/crm", Route::Api(Api::Connections)),
            (A, Method::GET, "/api/connectionsx", Route::NotFound),
            (A, Method::GET, "/api/executions/e1", Route::Api(Api::Executions)),
            (A, Method::GET, "/api/executions", Route::Api(Api::History)),
            (A, Method::GET, "/api/executions/", Route::Api(Api::History)),
            (A, Method::GET, "/api/executions/e1/history", Route::Api(Api::History)),
            (A, Method::GET, "/api/grants/history", Route::Api(Api::Grants)),
            (A, Method::GET, "/history", Route::NotFound),
            (A, Method::GET, "/api/grants", Route::Api(Api::Grants)),
            (A, Method::DELETE, "/api/grants/g1", Route::Api(Api::Grants)),
            (A, Method::GET, "/healthz", Route::Health),
            (A, Method::GET, "/readyz", Route::Ready),
            (A, Method::POST, "/readyz", Route::NotFound),
            (A, Method::GET, CLIENT_METADATA_PATH, Route::ClientMetadata),
            (A, Method::POST, "/mcp", Route::NotFound),
        ];
        for (surface, method, path, route) in cases {
            assert_eq!(Route::parse(surface, &method, path), route, "{surface:?} {method} {path}");
        }
        let surfaces = [
            ("/console", A),
            ("/console/signin", A),
            ("/consolex", M),
            ("/approvals/e1", A),
            ("/api/grants", A),
            ("/oauth/callback", A),
            ("/mcp", M),
            ("/x", M),
        ];
        for (path, surface) in surfaces {
            assert_eq!(Surface::of(path), surface, "{path}");
        }
    }
}
