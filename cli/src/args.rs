//! The admin commands' flags as `executor` parses them (clap), and the
//! [`commands::Command`] each becomes: the same whether it then runs here or
//! in the server that holds the store.

use clap::Subcommand;
use executor_core::Timestamp;

use crate::since::{self, SinceError};
use crate::{audit, commands, connections, console, executions, grants, keys};

#[derive(Subcommand)]
pub enum ConnectionsCommand {
    /// List OWNER's connections: source, when connected, the access token's expiry, scopes (never tokens).
    List {
        /// Whose connections: an API key's owner (or an OIDC identity as the server records it).
        #[arg(long)]
        owner: String,
    },
    /// Forget OWNER's connection to SOURCE; their next call to it asks them to connect again.
    Disconnect {
        #[arg(long)]
        owner: String,
        /// The source's namespace.
        source: String,
    },
}

impl From<ConnectionsCommand> for connections::Command {
    fn from(command: ConnectionsCommand) -> Self {
        match command {
            ConnectionsCommand::List { owner } => Self::ConnectionsList { owner },
            ConnectionsCommand::Disconnect { owner, source } => Self::ConnectionsDisconnect { owner, source },
        }
    }
}

#[derive(Subcommand)]
pub enum ConsoleCommand {
    /// Print a one-time link that signs OWNER in to the console (valid 10 minutes, used once).
    Link {
        /// Whose console: an API key's owner (or an OIDC identity as the server records it).
        #[arg(long)]
        owner: String,
        /// Where people reach the server: the link's base [default: EXECUTOR_PUBLIC_URL, else the local address].
        #[arg(long, env = "EXECUTOR_PUBLIC_URL", default_value = crate::health::DEFAULT_URL)]
        url: String,
    },
    /// Sign OWNER out of the console in every browser.
    Revoke {
        #[arg(long)]
        owner: String,
    },
}

impl From<ConsoleCommand> for console::Command {
    fn from(command: ConsoleCommand) -> Self {
        match command {
            ConsoleCommand::Link { owner, url } => Self::ConsoleLink { owner, url },
            ConsoleCommand::Revoke { owner } => Self::ConsoleRevoke { owner },
        }
    }
}

#[derive(Subcommand)]
pub enum GrantsCommand {
    /// List live grants: id, owner (without --owner), tool, creation, expiry and who granted it.
    List {
        /// Only this owner's: an API key's owner (or an OIDC identity as the server records it).
        /// Without it: every owner's.
        #[arg(long)]
        owner: Option<String>,
    },
    /// Revoke the grant with this id (as `grants list` shows it); the tool asks again on its next call.
    Revoke { id: String },
}

impl From<GrantsCommand> for grants::Command {
    fn from(command: GrantsCommand) -> Self {
        match command {
            GrantsCommand::List { owner } => Self::GrantsList { owner },
            GrantsCommand::Revoke { id } => Self::GrantsRevoke { id },
        }
    }
}

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Create a key for OWNER and print its token once; only its hash is stored.
    Create {
        /// The principal the key authenticates, e.g. your name or email.
        #[arg(long)]
        owner: String,
        /// Scope the key to one toolkit: it then works only on /mcp/toolkits/TOOLKIT.
        #[arg(long)]
        toolkit: Option<String>,
    },
    /// List keys: id, owner, scope, creation and last use.
    List,
    /// Revoke the key with this id (as `keys list` shows it, or its first 6 characters or more).
    Revoke { id: String },
}

impl From<KeysCommand> for keys::Command {
    fn from(command: KeysCommand) -> Self {
        match command {
            KeysCommand::Create { owner, toolkit } => Self::Create { owner, toolkit },
            KeysCommand::List => Self::List,
            KeysCommand::Revoke { id } => Self::Revoke { id },
        }
    }
}

#[derive(Subcommand)]
pub enum ExecutionsCommand {
    /// List recorded executions, newest first: id, owner, status, creation, last change, and the tool a
    /// paused one waits on. Every owner's unless --owner says whose.
    List {
        /// Only this owner's.
        #[arg(long, value_name = "NAME")]
        owner: Option<String>,
        /// Only those with this status now (a pause past its window is expired): running, paused,
        /// resuming, completed, failed, declined or expired.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        /// Only those created since T: an RFC 3339 time (2026-12-01T10:00:00Z) or a duration back from
        /// now (30m, 24h, 7d).
        #[arg(long, value_name = "T")]
        since: Option<String>,
        /// At most N (up to 1000), the newest.
        #[arg(long, value_name = "N", default_value_t = executions::DEFAULT_LIMIT)]
        limit: usize,
    },
    /// Show an execution's record and its history, one line per entry (any owner's).
    Show {
        /// As `executions list` shows it.
        id: String,
    },
}

impl ExecutionsCommand {
    /// The command to run, `--since` counted back from `now`.
    pub fn resolve(self, now: Timestamp) -> Result<commands::Command, SinceError> {
        Ok(commands::Command::Executions(match self {
            Self::List { owner, status, since, limit } => {
                let since = since.map(|text| since::parse(&text, now)).transpose()?;
                executions::Command::ExecutionsList { owner, status, since, limit }
            }
            Self::Show { id } => executions::Command::ExecutionsShow { id },
        }))
    }
}

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Write every owner's history to stdout as JSON lines, one per entry:
    /// {"executionId", "owner", "at", "type", ...the entry's fields}.
    Export {
        /// Only entries since T: an RFC 3339 time (2026-12-01T10:00:00Z) or a duration back from now
        /// (30m, 24h, 7d).
        #[arg(long, value_name = "T")]
        since: Option<String>,
    },
}

impl AuditCommand {
    /// The first page's command, `--since` counted back from `now`; the
    /// next pages' are the same with the cursor each page gives.
    pub fn resolve(self, now: Timestamp) -> Result<audit::Command, SinceError> {
        let Self::Export { since } = self;
        let since = since.map(|text| since::parse(&text, now)).transpose()?;
        Ok(audit::Command::AuditExport { since, cursor: None })
    }
}
