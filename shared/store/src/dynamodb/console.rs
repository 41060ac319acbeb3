//! The console's secrets on DynamoDB: one item per token hash,
//! `CONSOLE#<sha256>` / `SECRET`, with `kind` (`console_link`,
//! `console_login`, `console_session`) and, on links and sessions, `owner`:
//! copies of `body` for the conditions and for the revoke's `Scan`.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::ReturnValue;
use executor_core::{ConsoleSecret, ConsoleSecretKind, Principal, Timestamp, TokenHash};

use super::item::{self, BODY, EXPIRES_AT, Item, KIND, OWNER, PK, b, get_b, get_s, now_secs, s, ttl};
use super::{BACKEND, DynamoStore, Expect};
use crate::records::{self, CONSOLE_SECRET};
use crate::traced::traced;
use crate::{ConsoleStore, StoreError};

fn not_found() -> StoreError {
    StoreError::NotFound { what: CONSOLE_SECRET }
}

/// The `kind` attribute of a secret of `kind`.
fn kind_attribute(kind: ConsoleSecretKind) -> &'static str {
    match kind {
        ConsoleSecretKind::Link => "console_link",
        ConsoleSecretKind::Login => "console_login",
        ConsoleSecretKind::Session => "console_session",
    }
}

fn secret_item(secret: &ConsoleSecret) -> Result<Item, StoreError> {
    let mut item = item::key(records::console_pk(&secret.hash), records::CONSOLE_SK);
    item.insert(KIND.into(), s(kind_attribute(secret.kind())));
    if let Some(owner) = secret.grant.owner() {
        item.insert(OWNER.into(), s(owner.as_str()));
    }
    item.insert(EXPIRES_AT.into(), ttl(secret.expires_at));
    item.insert(BODY.into(), b(&records::encode_small(CONSOLE_SECRET, secret)?));
    Ok(item)
}

/// The secret `item` holds, if it is of `kind` and live to the millisecond
/// (the TTL attribute the conditions compare is in whole seconds).
fn live_of_kind(item: &Item, kind: ConsoleSecretKind, now: Timestamp) -> Result<Option<ConsoleSecret>, StoreError> {
    let secret: ConsoleSecret = records::decode(CONSOLE_SECRET, get_b(item, BODY, CONSOLE_SECRET)?)?;
    Ok((secret.kind() == kind && secret.is_live(now)).then_some(secret))
}

#[async_trait]
impl ConsoleStore for DynamoStore {
    async fn put_console_secret(&self, secret: &ConsoleSecret) -> Result<(), StoreError> {
        traced("store.put_console_secret", BACKEND, async {
            // `attribute_not_exists(pk) OR expires_at <= :now`, and a retry whose
            // first attempt landed is recognised by its write id.
            self.put(CONSOLE_SECRET, "store a console secret", secret_item(secret)?, Expect::Absent).await
        })
        .await
    }

    async fn take_console_secret(
        &self,
        kind: ConsoleSecretKind,
        hash: &TokenHash,
    ) -> Result<ConsoleSecret, StoreError> {
        traced("store.take_console_secret", BACKEND, async {
            const OPERATION: &str = "take a console secret";
            let now = self.clock.now();
            // One conditional delete: of racing takes exactly one removes it. A
            // retry whose first attempt landed finds nothing and answers
            // `NotFound`: the secret is spent unused, which fails closed.
            let deleted = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(item::key(records::console_pk(hash), records::CONSOLE_SK)))
                .condition_expression(format!("attribute_exists({PK}) AND #kind = :kind AND {EXPIRES_AT} > :now"))
                .expression_attribute_names("#kind", KIND)
                .expression_attribute_values(":kind", s(kind_attribute(kind)))
                .expression_attribute_values(":now", now_secs(now))
                .return_values(ReturnValue::AllOld)
                .send()
                .await;
            match deleted {
                // Within the TTL's last second the condition admits an expired
                // secret: it is gone now, and still not handed out.
                Ok(out) => live_of_kind(&out.attributes.ok_or_else(not_found)?, kind, now)?.ok_or_else(not_found),
                Err(SdkError::ServiceError(e))
                    if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
                {
                    Err(not_found())
                }
                Err(e) => Err(self.sdk_error(OPERATION, e)),
            }
        })
        .await
    }

    async fn get_console_secret(&self, kind: ConsoleSecretKind, hash: &TokenHash) -> Result<ConsoleSecret, StoreError> {
        traced("store.get_console_secret", BACKEND, async {
            let found = self.get_item("read a console secret", records::console_pk(hash), records::CONSOLE_SK).await?;
            live_of_kind(&found.ok_or_else(not_found)?, kind, self.clock.now())?.ok_or_else(not_found)
        })
        .await
    }

    async fn delete_console_secret(&self, hash: &TokenHash) -> Result<(), StoreError> {
        traced("store.delete_console_secret", BACKEND, async {
            self.client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(item::key(records::console_pk(hash), records::CONSOLE_SK)))
                .send()
                .await
                .map_err(|e| self.sdk_error("delete a console secret", e))?;
            Ok(())
        })
        .await
    }

    async fn revoke_console_sessions(&self, owner: &Principal) -> Result<usize, StoreError> {
        traced("store.revoke_console_sessions", BACKEND, async {
            const OPERATION: &str = "revoke console sessions";
            let now = self.clock.now();
            let mut revoked = 0;
            for pk in self.console_sessions_of(owner).await? {
                let deleted = self
                    .client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(item::key(pk, records::CONSOLE_SK)))
                    .return_values(ReturnValue::AllOld)
                    .send()
                    .await
                    .map_err(|e| self.sdk_error(OPERATION, e))?;
                // Counted if it still signed someone in: not signed out meanwhile, not expired.
                if let Some(old) = deleted.attributes {
                    revoked += usize::from(live_of_kind(&old, ConsoleSecretKind::Session, now)?.is_some());
                }
            }
            Ok(revoked)
        })
        .await
    }
}

impl DynamoStore {
    /// The partition keys of every session item of `owner`, expired or not: a
    /// consistent `Scan` of the whole table (every page), for the admin command.
    async fn console_sessions_of(&self, owner: &Principal) -> Result<Vec<String>, StoreError> {
        const OPERATION: &str = "find console sessions";
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("#kind = :kind AND #owner = :owner")
                .expression_attribute_names("#kind", KIND)
                .expression_attribute_names("#owner", OWNER)
                .expression_attribute_values(":kind", s(kind_attribute(ConsoleSecretKind::Session)))
                .expression_attribute_values(":owner", s(owner.as_str()))
                .projection_expression("#pk")
                .expression_attribute_names("#pk", PK)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.sdk_error(OPERATION, e))?;
            for item in page.items() {
                keys.push(get_s(item, PK, CONSOLE_SECRET)?.to_owned());
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(keys);
            }
        }
    }
}
