//! The approver's console from the command line: `executor console link
//! --owner NAME` prints a one-time sign-in link (10 minutes, used once; only
//! its hash is stored), `executor console revoke --owner NAME` signs that
//! owner out of every browser. Each runs on a store here, or in the
//! `executor serve` that holds the embedded store (`crate::admin`).

use std::fmt;

use executor_core::{Principal, PrincipalError, Timestamp};
use executor_service::{ConsoleError, ConsoleSignIn};
use executor_store::ConsoleStore;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum ConsoleCommandError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error(transparent)]
    Console(#[from] ConsoleError),
}

/// What a `console` command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    ConsoleLink {
        owner: String,
        /// Where the console is reached: the link's base.
        url: String,
    },
    ConsoleRevoke {
        owner: String,
    },
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Reply {
    ConsoleLinked { owner: String, link: String },
    ConsoleRevoked { owner: String, sessions: usize },
}

/// Run `command` on `store`, a link valid from `now`.
pub async fn run(store: &dyn ConsoleStore, command: Command, now: Timestamp) -> Result<Reply, ConsoleCommandError> {
    match command {
        Command::ConsoleLink { owner, url } => {
            let principal = Principal::parse(owner.as_str())?;
            let token = ConsoleSignIn::create_link_on(store, now, &principal).await?;
            let link = format!("{}/console/signin?token={}", url.trim_end_matches('/'), token.as_str());
            Ok(Reply::ConsoleLinked { owner, link })
        }
        Command::ConsoleRevoke { owner } => {
            let principal = Principal::parse(owner.as_str())?;
            let sessions = store.revoke_console_sessions(&principal).await.map_err(ConsoleError::Store)?;
            Ok(Reply::ConsoleRevoked { owner, sessions })
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ConsoleLinked { owner, link } => write!(
                f,
                "{link}\nOpen it within 10 minutes to sign in to the console as {owner}; it works once. Anyone \
                 with it can sign in as {owner}: send it only to them."
            ),
            Self::ConsoleRevoked { owner, sessions } => {
                write!(f, "Signed {owner} out of the console ({sessions} session(s) ended).")
            }
        }
    }
}
