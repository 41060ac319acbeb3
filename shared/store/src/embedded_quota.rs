//! Quota counters in the embedded store: one redb write transaction reads the
//! counters, checks every limit and writes them, so racing takes are
//! serialised exactly as DynamoDB's conditional transaction serialises them.

use std::collections::BTreeMap;

use async_trait::async_trait;
use executor_core::{ExecutionId, Principal, QuotaLimit, Timestamp};
use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::{BACKEND, EmbeddedStore, Failure, ITEMS};
use crate::records::{self, QUOTA};
use crate::traced::traced;
use crate::{QuotaOutcome, QuotaStore, QuotaTake, StoreError};

/// `QUOTA#<owner>` / `HOUR#<start>`: executions started in that hour.
#[derive(Serialize, Deserialize)]
struct HourCount {
    count: u32,
    expires_at: Timestamp,
}

/// `QUOTA#<owner>` / `SLOTS`: the running executions and when each lease runs out.
#[derive(Serialize, Deserialize)]
struct Slots {
    leases: BTreeMap<String, Timestamp>,
    expires_at: Timestamp,
}

fn read<T: for<'de> Deserialize<'de>>(txn: &WriteTransaction, pk: &str, sk: &str) -> Result<Option<T>, Failure> {
    let table = txn.open_table(ITEMS)?;
    let Some(bytes) = table.get((pk, sk))? else { return Ok(None) };
    Ok(Some(records::decode(QUOTA, bytes.value()).map_err(Failure::Store)?))
}

fn write<T: Serialize>(txn: &WriteTransaction, pk: &str, sk: &str, record: &T) -> Result<(), Failure> {
    let body = records::encode(QUOTA, record).map_err(Failure::Store)?;
    txn.open_table(ITEMS)?.insert((pk, sk), body.as_slice())?;
    Ok(())
}

/// The slots with leases still running at `now`.
fn live_slots(txn: &WriteTransaction, pk: &str, now: Timestamp) -> Result<Slots, Failure> {
    let stored: Option<Slots> = read(txn, pk, records::SLOTS_SK)?;
    let mut slots = stored.unwrap_or(Slots { leases: BTreeMap::new(), expires_at: now });
    slots.leases.retain(|_, until| *until > now);
    Ok(slots)
}

fn store_slots(txn: &WriteTransaction, pk: &str, mut slots: Slots) -> Result<(), Failure> {
    match slots.leases.values().max().copied() {
        Some(last) => {
            slots.expires_at = last;
            write(txn, pk, records::SLOTS_SK, &slots)
        }
        None => {
            txn.open_table(ITEMS)?.remove((pk, records::SLOTS_SK))?;
            Ok(())
        }
    }
}

#[async_trait]
impl QuotaStore for EmbeddedStore {
    async fn take_quota(&self, take: &QuotaTake) -> Result<QuotaOutcome, StoreError> {
        traced("store.take_quota", BACKEND, async {
            let take = take.clone();
            self.write("take a quota", move |txn| {
                let pk = records::quota_pk(&take.owner);
                let hour = match &take.hourly {
                    Some(hourly) => {
                        let sk = records::hour_sk(hourly.window);
                        let count: Option<HourCount> = read(txn, &pk, &sk)?;
                        let used = count.as_ref().filter(|c| c.expires_at > take.now).map_or(0, |c| c.count);
                        if used >= hourly.limit {
                            return Ok(QuotaOutcome::Refused(QuotaLimit::ExecutionsPerHour));
                        }
                        // Kept an hour past its window, like the DynamoDB item's TTL.
                        let expires_at = hourly.window.plus(executor_core::quota::QUOTA_WINDOW * 2);
                        Some((sk, HourCount { count: used + 1, expires_at }))
                    }
                    None => None,
                };
                if let Some(slot) = &take.slot {
                    let mut slots = live_slots(txn, &pk, take.now)?;
                    if slots.leases.len() >= slot.limit as usize {
                        return Ok(QuotaOutcome::Refused(QuotaLimit::ConcurrentExecutions));
                    }
                    slots.leases.insert(slot.execution.to_string(), slot.lease_until);
                    store_slots(txn, &pk, slots)?;
                }
                if let Some((sk, count)) = hour {
                    write(txn, &pk, &sk, &count)?;
                }
                Ok(QuotaOutcome::Taken)
            })
            .await
        })
        .await
    }

    async fn release_slot(&self, owner: &Principal, execution: &ExecutionId) -> Result<(), StoreError> {
        traced("store.release_slot", BACKEND, async {
            let (pk, id, now) = (records::quota_pk(owner), execution.to_string(), self.clock.now());
            self.write("release a quota slot", move |txn| {
                let mut slots = live_slots(txn, &pk, now)?;
                slots.leases.remove(&id);
                store_slots(txn, &pk, slots)
            })
            .await
        })
        .await
    }
}
