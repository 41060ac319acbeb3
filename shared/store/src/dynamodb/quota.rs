//! Quota counters on DynamoDB, under the owner's `QUOTA#<owner>` partition:
//! - `HOUR#<start>`: `executions`, the executions started in that clock hour;
//! - `SLOTS`: `leases`, a string set of `<leaseUntilMs>#<executionId>`, one
//!   per running execution.
//!
//! A take is one `TransactWriteItems` of conditional updates (`executions <
//! :limit`, `size(leases) < :limit`), so either every counter moves or none,
//! and of N racing takes against a limit of L exactly L succeed. Its client
//! request token makes the SDK's own retries apply it once. A lease whose
//! holder stopped without releasing it is removed once it has run out, when a
//! take finds the slots full.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use executor_core::{ExecutionId, Principal, QuotaLimit, Timestamp};

use super::item::{self, EXPIRES_AT, KIND, OWNER, n, s, ttl};
use super::{BACKEND, CONFLICT_RETRIES, DynamoStore, random_token};
use crate::records::{self, QUOTA};
use crate::traced::traced;
use crate::{QuotaOutcome, QuotaStore, QuotaTake, StoreError};

const EXECUTIONS: &str = "executions";
const LEASES: &str = "leases";

fn lease(until: Timestamp, execution: &ExecutionId) -> String {
    format!("{}#{execution}", until.as_millis())
}

/// A lease's end and holder.
fn parse_lease(lease: &str) -> Option<(Timestamp, &str)> {
    let (until, id) = lease.split_once('#')?;
    Some((Timestamp::from_millis(until.parse().ok()?), id))
}

impl DynamoStore {
    /// The leases in the owner's slots item.
    async fn leases(&self, owner: &Principal, operation: &'static str) -> Result<Vec<String>, StoreError> {
        let item = self.get_item(operation, records::quota_pk(owner), records::SLOTS_SK).await?;
        Ok(match item.as_ref().and_then(|i| i.get(LEASES)) {
            Some(AttributeValue::Ss(leases)) => leases.clone(),
            _ => Vec::new(),
        })
    }

    /// Remove `leases` from the owner's slots (removing what is absent is a no-op).
    async fn remove_leases(
        &self,
        owner: &Principal,
        leases: Vec<String>,
        operation: &'static str,
    ) -> Result<(), StoreError> {
        if leases.is_empty() {
            return Ok(());
        }
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item::key(records::quota_pk(owner), records::SLOTS_SK)))
            .update_expression("DELETE #leases :gone")
            .expression_attribute_names("#leases", LEASES)
            .expression_attribute_values(":gone", AttributeValue::Ss(leases))
            .send()
            .await
            .map_err(|e| self.sdk_error(operation, e))?;
        Ok(())
    }

    /// The conditional updates of `take`, each with the limit it checks.
    fn quota_updates(&self, take: &QuotaTake) -> Result<Vec<(TransactWriteItem, QuotaLimit)>, StoreError> {
        const OPERATION: &str = "take a quota";
        let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::backend(OPERATION, e);
        let pk = records::quota_pk(&take.owner);
        let mut updates = Vec::new();
        if let Some(hourly) = &take.hourly {
            let update = Update::builder()
                .table_name(&self.table)
                .set_key(Some(item::key(pk.clone(), &records::hour_sk(hourly.window))))
                .update_expression("ADD #executions :one SET #expires = :ttl, #kind = :kind, #owner = :owner")
                .condition_expression("attribute_not_exists(#executions) OR #executions < :limit")
                .expression_attribute_names("#executions", EXECUTIONS)
                .expression_attribute_names("#expires", EXPIRES_AT)
                .expression_attribute_names("#kind", KIND)
                .expression_attribute_names("#owner", OWNER)
                .expression_attribute_values(":one", n(1))
                // Kept an hour past its window, then left to TTL.
                .expression_attribute_values(":ttl", ttl(hourly.window.plus(executor_core::quota::QUOTA_WINDOW * 2)))
                .expression_attribute_values(":kind", s("quota_hour"))
                .expression_attribute_values(":owner", s(take.owner.as_str()))
                .expression_attribute_values(":limit", n(u64::from(hourly.limit)))
                .build()
                .map_err(build)?;
            updates.push((TransactWriteItem::builder().update(update).build(), QuotaLimit::ExecutionsPerHour));
        }
        if let Some(slot) = &take.slot {
            let update = Update::builder()
                .table_name(&self.table)
                .set_key(Some(item::key(pk, records::SLOTS_SK)))
                // Leases are taken with the same length, so the newest ends last.
                .update_expression("ADD #leases :lease SET #expires = :ttl, #kind = :kind, #owner = :owner")
                .condition_expression("attribute_not_exists(#leases) OR size(#leases) < :limit")
                .expression_attribute_names("#leases", LEASES)
                .expression_attribute_names("#expires", EXPIRES_AT)
                .expression_attribute_names("#kind", KIND)
                .expression_attribute_names("#owner", OWNER)
                .expression_attribute_values(
                    ":lease",
                    AttributeValue::Ss(vec![lease(slot.lease_until, &slot.execution)]),
                )
                .expression_attribute_values(":ttl", ttl(slot.lease_until))
                .expression_attribute_values(":kind", s("quota_slots"))
                .expression_attribute_values(":owner", s(take.owner.as_str()))
                .expression_attribute_values(":limit", n(u64::from(slot.limit)))
                .build()
                .map_err(build)?;
            updates.push((TransactWriteItem::builder().update(update).build(), QuotaLimit::ConcurrentExecutions));
        }
        Ok(updates)
    }
}

#[async_trait]
impl QuotaStore for DynamoStore {
    async fn take_quota(&self, take: &QuotaTake) -> Result<QuotaOutcome, StoreError> {
        traced("store.take_quota", BACKEND, async {
            const OPERATION: &str = "take a quota";
            let updates = self.quota_updates(take)?;
            if updates.is_empty() {
                return Ok(QuotaOutcome::Taken);
            }
            let items: Vec<TransactWriteItem> = updates.iter().map(|(item, _)| item.clone()).collect();
            let mut backoff = Duration::from_millis(20);
            let mut pruned = false;
            for attempt in 0..=CONFLICT_RETRIES {
                let token = random_token().map_err(|e| StoreError::backend(OPERATION, e))?;
                let request = self.client.transact_write_items().set_transact_items(Some(items.clone()));
                let Err(error) = request.client_request_token(token).send().await else {
                    return Ok(QuotaOutcome::Taken);
                };
                let reasons: Vec<String> = match error.as_service_error() {
                    Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
                        e.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None").to_owned()).collect()
                    }
                    _ => return Err(self.sdk_error(OPERATION, error)),
                };
                let refused = reasons.iter().zip(&updates).find(|(r, _)| *r == "ConditionalCheckFailed");
                match refused.map(|(_, (_, limit))| *limit) {
                    // Full slots may hold leases that ran out: remove those, try once more.
                    Some(QuotaLimit::ConcurrentExecutions) if !pruned => {
                        pruned = true;
                        let leases = self.leases(&take.owner, OPERATION).await?;
                        let expired: Vec<String> = leases
                            .into_iter()
                            .filter(|l| parse_lease(l).is_none_or(|(until, _)| until <= take.now))
                            .collect();
                        if expired.is_empty() {
                            return Ok(QuotaOutcome::Refused(QuotaLimit::ConcurrentExecutions));
                        }
                        self.remove_leases(&take.owner, expired, OPERATION).await?;
                    }
                    Some(limit) => return Ok(QuotaOutcome::Refused(limit)),
                    None if reasons.iter().any(|r| r == "TransactionConflict") && attempt < CONFLICT_RETRIES => {
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                    }
                    None => {
                        return Err(StoreError::backend(
                            OPERATION,
                            format!("transaction cancelled: {}", reasons.join(", ")),
                        ));
                    }
                }
            }
            Err(StoreError::Conflict { what: QUOTA })
        })
        .await
    }

    async fn release_slot(&self, owner: &Principal, execution: &ExecutionId) -> Result<(), StoreError> {
        traced("store.release_slot", BACKEND, async {
            const OPERATION: &str = "release a quota slot";
            let leases = self.leases(owner, OPERATION).await?;
            let ours: Vec<String> =
                leases.into_iter().filter(|l| parse_lease(l).is_some_and(|(_, id)| id == execution.as_str())).collect();
            self.remove_leases(owner, ours, OPERATION).await
        })
        .await
    }
}
