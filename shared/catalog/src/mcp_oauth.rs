//! OAuth-protected upstream MCP servers: from the server's 401 to a client
//! registration with its authorization server.
//!
//! 1. [`challenges`] reads `WWW-Authenticate` (several challenges, quoted or
//!    bare parameters); the `Bearer` challenge's `resource_metadata` names the
//!    protected resource metadata (RFC 9728), else its well-known URL is tried.
//! 2. [`discover`] reads that metadata (its `resource` must be the server's
//!    URL or a path above it), then the first authorization server's metadata
//!    (RFC 8414 `/.well-known/oauth-authorization-server`, else OpenID
//!    `/.well-known/openid-configuration`), which must offer PKCE with S256.
//! 3. [`register`] picks the client: a Client ID Metadata Document (our URL
//!    serving [`ClientSite::client_metadata`](executor_core::ClientSite::client_metadata))
//!    when the server accepts them, else dynamic
//!    registration (RFC 7591), stored per source so every instance reuses it,
//!    and done again when the scopes asked for are not all registered.
//!
//! Every request goes through the catalog's [`Outbound`](crate::outbound::Outbound)
//! (address rules, size cap, timeout). The result, [`OAuthClientConfig`], is
//! what the per-owner authorization code flow needs: the catalog registers
//! it with the owners' tokens (`connections.rs`), and the source becomes an
//! `OwnerMcp` (`mcp_source.rs`) whose owners connect before their calls.
//!
//! One file a step: `challenge.rs`, `discovery.rs`, `registration.rs`; the
//! error they share is `error.rs`.

mod challenge;
mod discovery;
mod error;
mod registration;

pub use crate::mcp_oauth::challenge::{BearerChallenge, Challenge, challenges};
pub use crate::mcp_oauth::discovery::{Discovered, discover};
pub use crate::mcp_oauth::error::McpOAuthError;
pub use crate::mcp_oauth::registration::{OAuthClientConfig, register};
