//! The catalog: tool sources (OpenAPI documents, upstream MCP servers, GraphQL services) turned
//! into `tools.<namespace>.<...>` for the sandbox, with search, TypeScript
//! descriptions, the approval policy of `executor_core::policy`, secrets by
//! reference and checked outbound requests.
//!
//! Pure parts (config validation, naming, OpenAPI and GraphQL mapping, search
//! ranking, TypeScript rendering, address rules, redaction, token answers) are
//! table-tested in their modules; `catalog.rs` (and `catalog/`),
//! `mcp_source.rs`, `mcp_client.rs`, `oauth.rs`, `outbound.rs` and
//! `secrets.rs` are the adapters.
//!
//! Imports run one way. The tool model (`tool.rs`, and `tool/`: what a call
//! of each kind needs, schemas kept in the index) imports only `typescript`;
//! the sources' mappings (`openapi`, `graphql`, `mcp_source`), `search` and
//! the `index` build on it; `config` imports none of them; `catalog` uses
//! them all, and no other module imports `catalog`.

mod approval_text;
mod catalog;
pub mod cedar;
pub mod config;
mod connections;
mod graphql;
pub mod index;
mod mcp_client;
pub mod mcp_oauth;
mod mcp_source;
mod naming;
mod oauth;
pub mod openapi;
mod outbound;
mod redact;
mod search;
mod secrets;
mod tool;
mod toolkit;
mod typescript;
mod vocabulary;

pub use catalog::{Catalog, CatalogError, Healing, McpAuth, NamespaceInfo, OAuthBacking, Vault};
pub use config::{CONFIG_ENV, CatalogConfig, ConfigError, OAuth2Config};
pub use connections::{REFRESH_LEASE, TOKEN_KEY_ENV, TokenKey};
pub use index::{INDEX_ENV, IndexError};
pub use outbound::{AddressRules, OutboundError};
pub use redact::REDACTED;
pub use secrets::{SecretError, SecretRef};
pub use toolkit::ToolkitView;
