//! How the application is reached over HTTP: [`Host`](host::Host) parses each
//! request into a [`Route`](routes::Route), checks who calls (one guard for the
//! authenticated API routes) and hands it to the room that answers it.

pub(crate) mod allowed_hosts;
pub(crate) mod approval_page;
pub(crate) mod approvals;
pub(crate) mod auth;
#[cfg(feature = "conformance")]
pub(crate) mod conformance;
pub(crate) mod connect;
pub(crate) mod console;
pub(crate) mod console_oidc;
pub(crate) mod console_page;
pub(crate) mod direct_call;
pub(crate) mod grants_api;
pub(crate) mod history_api;
pub(crate) mod host;
pub(crate) mod jsonrpc;
pub(crate) mod jwt_crypto;
pub(crate) mod mcp;
pub(crate) mod mcp_tools;
pub(crate) mod native;
pub(crate) mod oidc;
pub(crate) mod responses;
pub(crate) mod results;
pub(crate) mod routes;
pub(crate) mod sessions;
pub(crate) mod spans;
pub(crate) mod toolkits;
pub(crate) mod visible;
