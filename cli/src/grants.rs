//! Remembered approvals from the command line: `executor grants list --owner
//! NAME` and `executor grants revoke ID`. A command runs on a store here, or in
//! the `executor serve` that holds the embedded store (`crate::admin`).

use std::fmt;

use executor_core::{GrantId, IdError, Principal, PrincipalError};
use executor_store::{Access, GrantStore, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum GrantsError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("invalid grant id: {0}; `executor grants list --owner NAME` shows the ids")]
    Id(#[from] IdError),
    #[error("no live grant has the id {0:?}; `executor grants list --owner NAME` shows the ids")]
    UnknownId(String),
    #[error(transparent)]
    Store(StoreError),
}

/// What a `grants` command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    GrantsList { owner: String },
    GrantsRevoke { id: String },
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Reply {
    GrantsListed { owner: String, grants: Vec<GrantRow> },
    GrantRevoked { id: String, owner: String, tool: String },
}

/// One grant as `grants list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRow {
    pub id: String,
    pub tool: String,
    pub created: String,
    pub expires: String,
}

/// Run `command` on `store`.
pub async fn run(store: &impl GrantStore, command: Command) -> Result<Reply, GrantsError> {
    match command {
        Command::GrantsList { owner } => {
            let principal = Principal::parse(owner.as_str())?;
            let mut grants = store.list_grants(&principal).await.map_err(GrantsError::Store)?;
            grants.sort_by_key(|g| g.created_at);
            let grants = grants
                .into_iter()
                .map(|g| GrantRow {
                    id: g.id.to_string(),
                    tool: g.tool,
                    created: g.created_at.to_rfc3339(),
                    expires: g.expires_at.to_rfc3339(),
                })
                .collect();
            Ok(Reply::GrantsListed { owner, grants })
        }
        Command::GrantsRevoke { id } => {
            let parsed = GrantId::parse(id.as_str())?;
            match store.revoke_grant(Access::Internal, &parsed).await {
                Ok(grant) => Ok(Reply::GrantRevoked { id, owner: grant.owner.to_string(), tool: grant.tool }),
                Err(StoreError::NotFound { .. }) => Err(GrantsError::UnknownId(id)),
                Err(e) => Err(GrantsError::Store(e)),
            }
        }
    }
}

/// What the command prints.
impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::GrantsListed { owner, grants } if grants.is_empty() => {
                write!(f, "No grants for {owner}. A person creates one with \"Always allow\" on an approval page.")
            }
            Self::GrantsListed { grants, .. } => {
                let id = grants.iter().map(|g| g.id.len()).chain(["ID".len()]).max().unwrap_or_default();
                let tool = grants.iter().map(|g| g.tool.len() + 6).chain(["TOOL".len()]).max().unwrap_or_default();
                write!(f, "{:id$}  {:tool$}  {:24}  EXPIRES", "ID", "TOOL", "CREATED")?;
                for g in grants {
                    write!(
                        f,
                        "\n{:id$}  {:tool$}  {:24}  {}",
                        g.id,
                        format!("tools.{}", g.tool),
                        g.created,
                        g.expires
                    )?;
                }
                Ok(())
            }
            Self::GrantRevoked { id, owner, tool } => {
                write!(f, "Revoked grant {id} (tools.{tool} for {owner}); its next call asks for approval again.")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_have_a_header_and_aligned_columns() {
        let row = |id: &str, tool: &str| GrantRow {
            id: id.into(),
            tool: tool.into(),
            created: "2026-01-01T00:00:00.000Z".into(),
            expires: "2026-01-31T00:00:00.000Z".into(),
        };
        let listed = Reply::GrantsListed {
            owner: "alice".into(),
            grants: vec![row("g1", "gh.issues.create"), row("g22", "gh.x")],
        };
        assert_eq!(
            listed.to_string(),
            "ID   TOOL                    CREATED                   EXPIRES\n\
             g1   tools.gh.issues.create  2026-01-01T00:00:00.000Z  2026-01-31T00:00:00.000Z\n\
             g22  tools.gh.x              2026-01-01T00:00:00.000Z  2026-01-31T00:00:00.000Z"
        );
        assert!(
            Reply::GrantsListed { owner: "bob".into(), grants: vec![] }.to_string().starts_with("No grants for bob.")
        );
        let revoked = Reply::GrantRevoked { id: "g1".into(), owner: "bob".into(), tool: "gh.x".into() };
        assert_eq!(
            revoked.to_string(),
            "Revoked grant g1 (tools.gh.x for bob); its next call asks for approval again."
        );
    }

    #[test]
    fn keys_and_grants_commands_do_not_collide_on_the_admin_socket() {
        let grants = serde_json::to_string(&Command::GrantsList { owner: "a".into() }).unwrap();
        assert!(serde_json::from_str::<crate::keys::Command>(&grants).is_err(), "{grants}");
        let keys = serde_json::to_string(&crate::keys::Command::List).unwrap();
        assert!(serde_json::from_str::<Command>(&keys).is_err(), "{keys}");
    }
}
