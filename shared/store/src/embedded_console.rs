//! The console's secrets in the embedded store: the DynamoDB item's key
//! (`CONSOLE#<hash>` / `SECRET`), its value the secret's JSON. A take reads,
//! checks and removes in one write transaction; redb serialises those, so of
//! racing takes exactly one finds the secret.

use async_trait::async_trait;
use executor_core::{ConsoleSecret, ConsoleSecretKind, Principal, Timestamp, TokenHash};
use redb::ReadableTable;

use super::{BACKEND, EmbeddedStore, Failure, ITEMS};
use crate::records::{self, CONSOLE_SECRET};
use crate::traced::traced;
use crate::{ConsoleStore, StoreError};

fn not_found() -> StoreError {
    StoreError::NotFound { what: CONSOLE_SECRET }
}

/// The stored secret, if it is live and of `kind`: anything else reads as absent.
fn live_of_kind(bytes: &[u8], kind: ConsoleSecretKind, now: Timestamp) -> Result<Option<ConsoleSecret>, StoreError> {
    let secret: ConsoleSecret = records::decode(CONSOLE_SECRET, bytes)?;
    Ok((secret.kind() == kind && secret.is_live(now)).then_some(secret))
}

#[async_trait]
impl ConsoleStore for EmbeddedStore {
    async fn put_console_secret(&self, secret: &ConsoleSecret) -> Result<(), StoreError> {
        traced("store.put_console_secret", BACKEND, async {
            let body = records::encode_small(CONSOLE_SECRET, secret)?;
            let pk = records::console_pk(&secret.hash);
            let now = self.clock.now();
            self.write("store a console secret", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let key = (pk.as_str(), records::CONSOLE_SK);
                // An expired secret is absent, as on DynamoDB (where a put's condition admits it).
                let taken = match table.get(key)? {
                    Some(stored) => records::decode::<ConsoleSecret>(CONSOLE_SECRET, stored.value())
                        .map_err(Failure::Store)?
                        .is_live(now),
                    None => false,
                };
                if taken {
                    return Err(Failure::Store(StoreError::AlreadyExists { what: CONSOLE_SECRET }));
                }
                table.insert(key, body.as_slice())?;
                Ok(())
            })
            .await
        })
        .await
    }

    async fn take_console_secret(
        &self,
        kind: ConsoleSecretKind,
        hash: &TokenHash,
    ) -> Result<ConsoleSecret, StoreError> {
        traced("store.take_console_secret", BACKEND, async {
            let pk = records::console_pk(hash);
            let now = self.clock.now();
            self.write("take a console secret", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let key = (pk.as_str(), records::CONSOLE_SK);
                let found = match table.get(key)? {
                    Some(stored) => live_of_kind(stored.value(), kind, now).map_err(Failure::Store)?,
                    None => None,
                };
                // Another kind's secret stays: a link is no session, nor a session a link.
                let secret = found.ok_or_else(|| Failure::Store(not_found()))?;
                table.remove(key)?;
                Ok(secret)
            })
            .await
        })
        .await
    }

    async fn get_console_secret(&self, kind: ConsoleSecretKind, hash: &TokenHash) -> Result<ConsoleSecret, StoreError> {
        traced("store.get_console_secret", BACKEND, async {
            let bytes =
                self.get("read a console secret", records::console_pk(hash), records::CONSOLE_SK.into()).await?;
            let stored = bytes.ok_or_else(not_found)?;
            live_of_kind(&stored, kind, self.clock.now())?.ok_or_else(not_found)
        })
        .await
    }

    async fn delete_console_secret(&self, hash: &TokenHash) -> Result<(), StoreError> {
        traced("store.delete_console_secret", BACKEND, async {
            let pk = records::console_pk(hash);
            self.write("delete a console secret", move |txn| {
                txn.open_table(ITEMS)?.remove((pk.as_str(), records::CONSOLE_SK))?;
                Ok(())
            })
            .await
        })
        .await
    }

    async fn revoke_console_sessions(&self, owner: &Principal) -> Result<usize, StoreError> {
        traced("store.revoke_console_sessions", BACKEND, async {
            let (owner, now) = (owner.clone(), self.clock.now());
            // Every console partition, `CONSOLE#<hash>`, sorts between these.
            let end = format!("{}$", records::CONSOLE_PK_PREFIX.trim_end_matches('#'));
            self.write("revoke console sessions", move |txn| {
                let mut table = txn.open_table(ITEMS)?;
                let (mut doomed, mut live) = (Vec::new(), 0);
                for entry in table.range((records::CONSOLE_PK_PREFIX, "")..(end.as_str(), ""))? {
                    let (key, value) = entry?;
                    let secret: ConsoleSecret =
                        records::decode(CONSOLE_SECRET, value.value()).map_err(Failure::Store)?;
                    if secret.kind() == ConsoleSecretKind::Session && secret.grant.owner() == Some(&owner) {
                        // Expired ones go too, uncounted: they signed no one in.
                        live += usize::from(secret.is_live(now));
                        doomed.push(key.value().0.to_owned());
                    }
                }
                for pk in &doomed {
                    table.remove((pk.as_str(), records::CONSOLE_SK))?;
                }
                Ok(live)
            })
            .await
        })
        .await
    }
}
