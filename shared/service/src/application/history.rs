//! Reading the audit trail: an owner's executions, newest first, and one
//! execution's history. Written by the recorder with every change; read
//! here, owner-scoped: a toolkit-scoped caller sees only its toolkit's.

use std::sync::Arc;

use executor_core::{
    Clock, ExecutionId, ExecutionRecord, ExecutionStatus, HistoryEntry, Principal, Timestamp, ToolkitName,
};
use executor_store::{Access, HistoryStore, Page, StoreError};

/// At most this many executions a page lists.
pub const MAX_LIST_LIMIT: usize = 200;
/// Store pages read to fill one filtered page: a filter that matches little
/// answers a short page with a cursor rather than reading on and on.
const MAX_STORE_PAGES: usize = 10;

/// What a listing asks for.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Only executions in this status, as of now (a pause past its window is expired).
    pub status: Option<ExecutionStatus>,
    /// Only executions created at or after this.
    pub since: Option<Timestamp>,
    pub limit: usize,
    pub cursor: Option<String>,
}

pub struct History {
    store: Arc<dyn HistoryStore>,
    clock: Arc<dyn Clock>,
}

impl History {
    pub fn new(store: Arc<dyn HistoryStore>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// The time the listings' statuses are as of.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// `owner`'s executions that `scope` (a toolkit-scoped caller's toolkit)
    /// may see, as `listing` asks, newest first.
    pub async fn list(
        &self,
        owner: &Principal,
        scope: Option<&ToolkitName>,
        listing: &Listing,
    ) -> Result<Page<ExecutionRecord>, StoreError> {
        let limit = listing.limit.clamp(1, MAX_LIST_LIMIT);
        let now = self.clock.now();
        let wanted = |record: &ExecutionRecord| {
            scope.is_none_or(|toolkit| record.toolkit.as_ref() == Some(toolkit))
                && listing.status.is_none_or(|status| record.status_at(now) == status)
        };
        let mut items = Vec::new();
        let mut cursor = listing.cursor.clone();
        // Each store page asks for no more than is still wanted, so nothing
        // read is dropped and the cursor stays exact.
        for _ in 0..MAX_STORE_PAGES {
            let wants = limit - items.len();
            let page =
                self.store.list_executions(Access::Owner(owner), listing.since, wants, cursor.as_deref()).await?;
            items.extend(page.items.into_iter().filter(|record| wanted(record)));
            cursor = page.next;
            if cursor.is_none() || items.len() >= limit {
                break;
            }
        }
        Ok(Page { items, next: cursor })
    }

    /// The history of `owner`'s execution `id`; `NotFound` for anyone
    /// else's, and for another toolkit's when `scope` is set.
    pub async fn show(
        &self,
        owner: &Principal,
        scope: Option<&ToolkitName>,
        id: &ExecutionId,
    ) -> Result<(ExecutionRecord, Vec<HistoryEntry>), StoreError> {
        let (record, entries) = self.store.execution_history(Access::Owner(owner), id).await?;
        if scope.is_some_and(|toolkit| record.toolkit.as_ref() != Some(toolkit)) {
            return Err(StoreError::NotFound { what: "execution history" });
        }
        Ok((record, entries))
    }
}
