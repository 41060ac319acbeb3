//! API keys: 256-bit random bearer tokens, stored only as their SHA-256.
//!
//! A `keys` command is a [`Command`] run on a store by [`run`]: here, or in
//! the `executor serve` that holds the embedded store (`crate::admin`).

use std::fmt;

use executor_core::{ApiKey, Clock, Principal, PrincipalError, SystemClock, TokenHash, ToolkitName, ToolkitNameError};
use executor_store::{KeyStore, KeyUse, StoreError};
use serde::{Deserialize, Serialize};

/// Prefix that makes a leaked token recognisable to secret scanners.
const TOKEN_PREFIX: &str = "exk_";
/// How much of a key's hash `keys list` shows.
pub const ID_LEN: usize = executor_core::KEY_ID_LEN;
/// The shortest start of an id `keys revoke` takes: long enough that a typo
/// or a stray word rarely names a key (16^6 = 16.7 million ids), short enough to type.
pub const MIN_ID_LEN: usize = 6;

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("invalid --toolkit: {0}")]
    Toolkit(#[from] ToolkitNameError),
    #[error("the system random source failed ({0}); try again")]
    Random(String),
    #[error(
        "the key id {0:?} is too short to revoke by: give at least {MIN_ID_LEN} characters of an ID that \
         `executor keys list` shows (or the whole ID)"
    )]
    IdTooShort(String),
    #[error("no key has the id {0:?}; `executor keys list` shows the ids")]
    UnknownId(String),
    #[error(
        "the id {id:?} is the start of {} keys ({}); give more of the ID of the one to revoke",
        .matches.len(),
        .matches.join(", ")
    )]
    AmbiguousId {
        id: String,
        /// Each key it matches, as `<id> (<owner>)`.
        matches: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a `keys` command asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    Create {
        owner: String,
        /// The toolkit the key is scoped to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        toolkit: Option<String>,
    },
    List,
    Revoke {
        id: String,
    },
}

/// What it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "done", rename_all = "snake_case")]
pub enum Reply {
    Created {
        owner: String,
        token: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        toolkit: Option<String>,
    },
    Listed {
        keys: Vec<KeyRow>,
    },
    Revoked {
        id: String,
        owner: String,
        /// As in [`KeyRow`] (absent from servers older than these fields).
        #[serde(default)]
        scope: String,
        #[serde(default)]
        created: String,
    },
}

/// One key as `keys list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRow {
    pub id: String,
    pub owner: String,
    /// `all`, or `toolkit <name>` for a scoped key.
    pub scope: String,
    pub created: String,
    /// When it last authenticated a request (to within a minute or two: see
    /// [`executor_store::KEY_USE_RESOLUTION`] and the server's key cache); `None`: never.
    #[serde(default)]
    pub last_used: Option<String>,
}

/// Run `command` on `store`.
pub async fn run(store: &impl KeyStore, command: Command) -> Result<Reply, KeysError> {
    Ok(match command {
        Command::Create { owner, toolkit } => {
            let token = create_scoped(store, &owner, toolkit.as_deref()).await?;
            Reply::Created { owner, token, toolkit }
        }
        Command::List => Reply::Listed { keys: list(store).await? },
        Command::Revoke { id } => {
            let key = revoke(store, &id).await?;
            Reply::Revoked {
                id: executor_core::key_id(&key.hash).to_owned(),
                owner: key.owner.to_string(),
                scope: scope(&key),
                created: key.created_at.to_rfc3339(),
            }
        }
    })
}

/// Create and store a new key for `owner`; the token is returned and never stored.
pub async fn create(store: &impl KeyStore, owner: &str) -> Result<String, KeysError> {
    create_scoped(store, owner, None).await
}

/// [`create`], the key scoped to `toolkit` when one is given.
pub async fn create_scoped(store: &impl KeyStore, owner: &str, toolkit: Option<&str>) -> Result<String, KeysError> {
    let owner = Principal::key_owner(owner)?;
    let toolkit = toolkit.map(ToolkitName::parse).transpose()?;
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| KeysError::Random(e.to_string()))?;
    let token = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
    let key = ApiKey { hash: TokenHash::of_token(&token), owner, created_at: SystemClock.now(), toolkit };
    store.create_key(&key).await?;
    Ok(token)
}

/// Every key, oldest first.
pub async fn list(store: &impl KeyStore) -> Result<Vec<KeyRow>, KeysError> {
    let mut keys = store.list_key_uses().await?;
    keys.sort_by_key(|k| k.key.created_at);
    Ok(keys
        .iter()
        .map(|KeyUse { key, last_used }| KeyRow {
            id: executor_core::key_id(&key.hash).to_owned(),
            owner: key.owner.to_string(),
            scope: scope(key),
            created: key.created_at.to_rfc3339(),
            last_used: last_used.map(|at| at.to_rfc3339()),
        })
        .collect())
}

/// `all`, or `toolkit <name>` for a scoped key.
fn scope(key: &ApiKey) -> String {
    key.toolkit.as_ref().map_or_else(|| "all".to_owned(), |t| format!("toolkit {t}"))
}

/// Revoke the one key whose hash starts with `id` (at least [`MIN_ID_LEN`]
/// characters, in either case); returns the key revoked. A revocation cannot
/// be undone, so a start that could name a key by accident, or names several,
/// revokes nothing.
pub async fn revoke(store: &impl KeyStore, id: &str) -> Result<ApiKey, KeysError> {
    let given = id.trim();
    if given.chars().count() < MIN_ID_LEN {
        return Err(KeysError::IdTooShort(id.to_owned()));
    }
    // Hashes are lowercase hex; an id copied in capitals is the same id.
    let start = given.to_ascii_lowercase();
    let keys = store.list_keys().await?;
    let mut matching: Vec<ApiKey> = keys.into_iter().filter(|k| k.hash.as_str().starts_with(&start)).collect();
    match matching.len() {
        0 => return Err(KeysError::UnknownId(id.to_owned())),
        1 => {}
        _ => {
            matching.sort_by_key(|k| k.created_at);
            let matches = matching.iter().map(|k| format!("{} ({})", &k.hash.as_str()[..ID_LEN], k.owner)).collect();
            return Err(KeysError::AmbiguousId { id: id.to_owned(), matches });
        }
    }
    let key = matching.remove(0);
    store.revoke_key(&key.hash).await?;
    Ok(key)
}

/// What the command prints.
impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Created { owner, token, toolkit: None } => {
                writeln!(f, "Created an API key for {owner}. This is the only time the token is shown:\n\n{token}")
            }
            Self::Created { owner, token, toolkit: Some(toolkit) } => writeln!(
                f,
                "Created an API key for {owner}, scoped to toolkit {toolkit}: it works only on \
                 /mcp/toolkits/{toolkit}. This is the only time the token is shown:\n\n{token}"
            ),
            Self::Listed { keys } if keys.is_empty() => {
                write!(f, "No keys. Create one with `executor keys create --owner NAME`.")
            }
            Self::Listed { keys } => {
                let width = keys.iter().map(|k| k.owner.len()).chain(["OWNER".len()]).max().unwrap_or_default();
                let scope = keys.iter().map(|k| k.scope.len()).chain(["SCOPE".len()]).max().unwrap_or_default();
                let created = keys.iter().map(|k| k.created.len()).chain(["CREATED".len()]).max().unwrap_or_default();
                write!(
                    f,
                    "{:ID_LEN$}  {:width$}  {:scope$}  {:created$}  LAST USED",
                    "ID", "OWNER", "SCOPE", "CREATED"
                )?;
                for key in keys {
                    let used = key.last_used.as_deref().unwrap_or("never");
                    let (id, owner, scope_, made) = (&key.id, &key.owner, &key.scope, &key.created);
                    write!(f, "\n{id:ID_LEN$}  {owner:width$}  {scope_:scope$}  {made:created$}  {used}")?;
                }
                Ok(())
            }
            // From a server older than the scope and creation fields.
            Self::Revoked { id, owner, scope, .. } if scope.is_empty() => write!(f, "Revoked key {id} of {owner}."),
            Self::Revoked { id, owner, scope, created } => {
                write!(f, "Revoked key {id} of {owner} (scope {scope}, created {created}).")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_have_a_header_and_aligned_columns() {
        let row = |id: &str, owner: &str, scope: &str, last_used: Option<&str>| KeyRow {
            id: id.into(),
            owner: owner.into(),
            scope: scope.into(),
            created: "2026-01-01T00:00:00.000Z".into(),
            last_used: last_used.map(Into::into),
        };
        let listed = Reply::Listed {
            keys: vec![
                row("0123456789ab", "alice@example.com", "all", Some("2026-01-02T03:04:05.000Z")),
                row("ba9876543210", "bob", "toolkit support", None),
            ],
        };
        assert_eq!(
            listed.to_string(),
            "ID            OWNER              SCOPE            CREATED                   LAST USED\n\
             0123456789ab  alice@example.com  all              2026-01-01T00:00:00.000Z  2026-01-02T03:04:05.000Z\n\
             ba9876543210  bob                toolkit support  2026-01-01T00:00:00.000Z  never"
        );
        assert!(Reply::Listed { keys: vec![] }.to_string().starts_with("No keys."));
        let revoked = Reply::Revoked {
            id: "0123456789ab".into(),
            owner: "bob".into(),
            scope: "all".into(),
            created: "2026-01-01T00:00:00.000Z".into(),
        };
        assert_eq!(
            revoked.to_string(),
            "Revoked key 0123456789ab of bob (scope all, created 2026-01-01T00:00:00.000Z)."
        );
    }

    #[test]
    fn a_reply_from_an_older_server_still_reads() {
        let old: Reply = serde_json::from_str(r#"{"done":"revoked","id":"0123456789ab","owner":"bob"}"#).unwrap();
        assert_eq!(old.to_string(), "Revoked key 0123456789ab of bob.");
        let old: Reply = serde_json::from_str(
            r#"{"done":"listed","keys":[{"id":"0123456789ab","owner":"bob","scope":"all","created":"c"}]}"#,
        )
        .unwrap();
        assert!(old.to_string().ends_with("  never"), "{old}");
    }

    /// Two keys whose hashes share their first `shared` characters, and a third that does not.
    async fn keys_sharing(store: &impl KeyStore, shared: usize) -> [ApiKey; 3] {
        let key = |hash: String, owner: &str| ApiKey {
            // Hashes chosen, not computed: only their starts matter here.
            hash: serde_json::from_value::<TokenHash>(serde_json::Value::String(hash)).unwrap(),
            owner: Principal::key_owner(owner).unwrap(),
            created_at: SystemClock.now(),
            toolkit: None,
        };
        let stem = "a".repeat(shared);
        let keys = [
            key(format!("{stem}{}", "1".repeat(64 - shared)), "alice"),
            key(format!("{stem}{}", "2".repeat(64 - shared)), "bob"),
            key("f".repeat(64), "carol"),
        ];
        for key in &keys {
            store.create_key(key).await.unwrap();
        }
        keys
    }

    #[tokio::test]
    async fn a_revoke_needs_six_characters_that_name_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = executor_store::EmbeddedStore::open(dir.path()).unwrap();
        let [alice, bob, carol] = keys_sharing(&store, 8).await;

        let short = revoke(&store, "fffff").await.unwrap_err();
        assert!(matches!(short, KeysError::IdTooShort(_)), "{short}");
        assert!(short.to_string().contains("at least 6 characters"), "{short}");
        let shared = revoke(&store, "aaaaaaaa").await.unwrap_err();
        assert_eq!(
            shared.to_string(),
            "the id \"aaaaaaaa\" is the start of 2 keys (aaaaaaaa1111 (alice), aaaaaaaa2222 (bob)); give more of \
             the ID of the one to revoke"
        );
        assert!(matches!(revoke(&store, "0123456").await, Err(KeysError::UnknownId(_))));
        assert_eq!(store.list_keys().await.unwrap().len(), 3, "nothing was revoked");

        assert_eq!(revoke(&store, "FFFFFF").await.unwrap(), carol, "six characters, in either case");
        assert_eq!(revoke(&store, &bob.hash.as_str()[..9]).await.unwrap(), bob);
        assert_eq!(revoke(&store, alice.hash.as_str()).await.unwrap(), alice, "the whole hash");
        assert!(store.list_keys().await.unwrap().is_empty());
    }
}
