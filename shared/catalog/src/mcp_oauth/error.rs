//! Why an MCP server's authorization could not be set up, at any step.

use executor_core::CALLBACK_PATH;
use executor_store::StoreError;

use crate::outbound::OutboundError;

/// How much of an authorization server's error answer is shown.
pub(super) const EXCERPT_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum McpOAuthError {
    #[error(
        "the server answered 401 without a Bearer challenge naming `resource_metadata`, and no protected resource \
         metadata was found at {tried}; it does not support MCP authorization: give the source an `auth` it accepts"
    )]
    NoMetadata { tried: String },
    #[error("cannot read {what} at {url}: {error}")]
    Unreachable { what: &'static str, url: String, error: OutboundError },
    #[error("{what} at {url} answered HTTP {status}: {excerpt}")]
    Status { what: &'static str, url: String, status: u16, excerpt: String },
    #[error("{what} at {url} is not valid: {problem}")]
    Invalid { what: &'static str, url: String, problem: String },
    #[error(
        "the protected resource metadata at {url} describes the resource {resource}, not this server ({server}); \
         check the source's url"
    )]
    WrongResource { url: String, resource: String, server: String },
    #[error(
        "the authorization server {issuer} does not offer PKCE with S256 (code_challenge_methods_supported: \
         {offered}), which MCP authorization requires; ask its operator to enable it"
    )]
    NoPkce { issuer: String, offered: String },
    #[error(
        "no public URL is configured, so the authorization server cannot send owners back (redirect URI \
         <public URL>{CALLBACK_PATH}): set EXECUTOR_PUBLIC_URL (or `executor serve --public-url`)"
    )]
    NoPublicUrl,
    #[error(
        "the authorization server {issuer} supports neither Client ID Metadata Documents nor dynamic client \
         registration: register a client there yourself and configure the source's `auth` with its client_id"
    )]
    NoRegistration { issuer: String },
    #[error("cannot store the client registration: {0}")]
    Store(#[from] StoreError),
    #[error("cannot seal or open the registered client secret: {0}")]
    Seal(String),
}
