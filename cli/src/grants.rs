//! Remembered approvals from the command line: `executor grants list [--owner
//! NAME]` (one owner's, or without `--owner` every owner's) and `executor
//! grants revoke ID`. A command runs on a store here, or in the `executor
//! serve` that holds the embedded store (`crate::admin`).

use std::fmt;

use executor_core::{GrantId, IdError, Principal, PrincipalError};
use executor_store::{Access, GrantStore, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum GrantsError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("invalid grant id: {0}; `executor grants list` shows the ids")]
    Id(#[from] IdError),
    #[error("no live grant has the id {0:?}; `executor grants list` shows the ids")]
    UnknownId(String),
    #[error(transparent)]
    Store(StoreError),
}

/// What a `grants` command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    GrantsList {
        /// One owner's; `None`: every owner's. (Always given by `executor`s
        /// older than that: a server of this version reads their command.)
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner: Option<String>,
    },
    GrantsRevoke {
        id: String,
    },
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Reply {
    /// `owner`: the owner asked for; `None`: every owner's grants.
    GrantsListed {
        #[serde(default)]
        owner: Option<String>,
        grants: Vec<GrantRow>,
    },
    GrantRevoked {
        id: String,
        owner: String,
        tool: String,
    },
}

/// One grant as `grants list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRow {
    pub id: String,
    /// Absent from servers older than this field, as `granted_by`.
    #[serde(default)]
    pub owner: String,
    pub tool: String,
    pub created: String,
    pub expires: String,
    /// Who answered "Always allow": `approval_page`, `owner_api` or `client`.
    #[serde(default)]
    pub granted_by: String,
}

/// Run `command` on `store`.
pub async fn run(store: &impl GrantStore, command: Command) -> Result<Reply, GrantsError> {
    match command {
        Command::GrantsList { owner } => {
            let mut grants = match &owner {
                Some(owner) => store.list_grants(&Principal::parse(owner.as_str())?).await,
                None => store.all_grants().await,
            }
            .map_err(GrantsError::Store)?;
            grants.sort_by(|a, b| (a.created_at, a.id.as_str()).cmp(&(b.created_at, b.id.as_str())));
            let grants = grants
                .into_iter()
                .map(|g| GrantRow {
                    id: g.id.to_string(),
                    owner: g.owner.to_string(),
                    tool: g.tool,
                    created: g.created_at.to_rfc3339(),
                    expires: g.expires_at.to_rfc3339(),
                    granted_by: g.granted_by.as_str().to_owned(),
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
            Self::GrantsListed { owner: Some(owner), grants } if grants.is_empty() => {
                write!(f, "No grants for {owner}. A person creates one with \"Always allow\" on an approval page.")
            }
            Self::GrantsListed { owner: None, grants } if grants.is_empty() => {
                write!(f, "No grants. A person creates one with \"Always allow\" on an approval page.")
            }
            Self::GrantsListed { owner, grants } => table(f, grants, owner.is_none()),
            Self::GrantRevoked { id, owner, tool } => {
                write!(f, "Revoked grant {id} (tools.{tool} for {owner}); its next call asks for approval again.")
            }
        }
    }
}

/// `grants list`: the owner's column only when it lists every owner's.
fn table(f: &mut fmt::Formatter<'_>, grants: &[GrantRow], owners: bool) -> fmt::Result {
    let id = grants.iter().map(|g| g.id.len()).chain(["ID".len()]).max().unwrap_or_default();
    let tool = grants.iter().map(|g| g.tool.len() + 6).chain(["TOOL".len()]).max().unwrap_or_default();
    let owner = grants.iter().map(|g| g.owner.len()).chain(["OWNER".len()]).max().unwrap_or_default();
    let owner_cell = |value: &str| if owners { format!("{value:owner$}  ") } else { String::new() };
    write!(f, "{:id$}  {}{:tool$}  {:24}  {:24}  GRANTED BY", "ID", owner_cell("OWNER"), "TOOL", "CREATED", "EXPIRES")?;
    for g in grants {
        // From a server older than the field.
        let by = if g.granted_by.is_empty() { "-" } else { &g.granted_by };
        let (tool_path, owned) = (format!("tools.{}", g.tool), owner_cell(&g.owner));
        write!(f, "\n{:id$}  {owned}{tool_path:tool$}  {:24}  {:24}  {by}", g.id, g.created, g.expires)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, owner: &str, tool: &str, granted_by: &str) -> GrantRow {
        GrantRow {
            id: id.into(),
            owner: owner.into(),
            tool: tool.into(),
            created: "2026-01-01T00:00:00.000Z".into(),
            expires: "2026-01-31T00:00:00.000Z".into(),
            granted_by: granted_by.into(),
        }
    }

    #[test]
    fn listings_have_a_header_and_aligned_columns() {
        let listed = Reply::GrantsListed {
            owner: Some("alice".into()),
            grants: vec![
                row("g1", "alice", "gh.issues.create", "approval_page"),
                row("g22", "alice", "gh.x", "client"),
            ],
        };
        assert_eq!(
            listed.to_string(),
            "ID   TOOL                    CREATED                   EXPIRES                   GRANTED BY\n\
             g1   tools.gh.issues.create  2026-01-01T00:00:00.000Z  2026-01-31T00:00:00.000Z  approval_page\n\
             g22  tools.gh.x              2026-01-01T00:00:00.000Z  2026-01-31T00:00:00.000Z  client"
        );
        let everyone = Reply::GrantsListed {
            owner: None,
            grants: vec![
                row("g1", "alice@example.com", "gh.issues.create", "owner_api"),
                row("g22", "bob", "gh.x", ""),
            ],
        };
        assert_eq!(
            everyone.to_string(),
            "ID   OWNER              TOOL                    CREATED                   EXPIRES                   GRANTED BY\n\
             g1   alice@example.com  tools.gh.issues.create  2026-01-01T00:00:00.000Z  2026-01-31T00:00:00.000Z  owner_api\n\
             g22  bob                tools.gh.x              2026-01-01T00:00:00.000Z  2026-01-31T00:00:00.000Z  -"
        );
        let none = Reply::GrantsListed { owner: Some("bob".into()), grants: vec![] };
        assert!(none.to_string().starts_with("No grants for bob."));
        assert!(Reply::GrantsListed { owner: None, grants: vec![] }.to_string().starts_with("No grants. A person"));
        let revoked = Reply::GrantRevoked { id: "g1".into(), owner: "bob".into(), tool: "gh.x".into() };
        assert_eq!(
            revoked.to_string(),
            "Revoked grant g1 (tools.gh.x for bob); its next call asks for approval again."
        );
    }

    #[test]
    fn a_listing_asks_for_one_owner_only_when_told() {
        let one = serde_json::to_string(&Command::GrantsList { owner: Some("a".into()) }).unwrap();
        assert_eq!(one, r#"{"command":"grants_list","owner":"a"}"#, "as `executor`s before the flag was optional");
        let every = serde_json::to_string(&Command::GrantsList { owner: None }).unwrap();
        assert_eq!(every, r#"{"command":"grants_list"}"#);
        // A server older than the new columns answers without them.
        let old: Reply = serde_json::from_str(
            r#"{"done":"grants_listed","owner":"a","grants":[{"id":"g1","tool":"t","created":"c","expires":"e"}]}"#,
        )
        .unwrap();
        assert!(old.to_string().ends_with("  -"), "{old}");
    }

    #[tokio::test]
    async fn without_an_owner_every_owners_grants_are_listed() {
        use executor_core::{Clock, Grant, GrantedBy, SystemClock};
        let dir = tempfile::tempdir().unwrap();
        let store = executor_store::EmbeddedStore::open(dir.path()).unwrap();
        let now = SystemClock.now();
        let day = std::time::Duration::from_secs(86_400);
        for (id, owner, by, made) in [("g2", "bob", GrantedBy::Client, 2), ("g1", "ana", GrantedBy::ApprovalPage, 1)] {
            let (id, owner) = (GrantId::parse(id).unwrap(), Principal::parse(owner).unwrap());
            let grant = Grant::new(id, owner, "gh.x", by, now.plus(std::time::Duration::from_secs(made)), day);
            store.create_grant(&grant).await.unwrap();
        }
        let listed = |owner: Option<&str>| run(&store, Command::GrantsList { owner: owner.map(Into::into) });
        let Reply::GrantsListed { grants, .. } = listed(None).await.unwrap() else { panic!() };
        let rows: Vec<(&str, &str, &str)> =
            grants.iter().map(|g| (g.id.as_str(), g.owner.as_str(), g.granted_by.as_str())).collect();
        assert_eq!(rows, [("g1", "ana", "approval_page"), ("g2", "bob", "client")], "every owner's, oldest first");
        let Reply::GrantsListed { grants, .. } = listed(Some("bob")).await.unwrap() else { panic!() };
        assert_eq!(grants.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(), ["g2"]);
    }

    #[test]
    fn keys_and_grants_commands_do_not_collide_on_the_admin_socket() {
        let grants = serde_json::to_string(&Command::GrantsList { owner: Some("a".into()) }).unwrap();
        assert!(serde_json::from_str::<crate::keys::Command>(&grants).is_err(), "{grants}");
        let keys = serde_json::to_string(&crate::keys::Command::List).unwrap();
        assert!(serde_json::from_str::<Command>(&keys).is_err(), "{keys}");
    }
}
