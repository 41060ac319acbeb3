//! Sources that failed to connect with the catalog, retried until they do:
//! each one's outage (the latest reason, since when, the next retry), the
//! backoff between retries (from the injected clock: tests move it), and the
//! retry itself, which gives the source its tools without a restart.
//!
//! Retries are made by whoever comes first once one is due: the background
//! task a long-lived host runs ([`Catalog::heal_in_background`]), or the first
//! use of the source (a call, a search, a describe), which is all a Lambda
//! function has. One attempt at a time per source; the others wait for it.
//!
//! A source that connects stays connected: its tools are set once
//! (`OnceLock`), so every reader holds them without a lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use executor_core::Timestamp;
use executor_sandbox::{Readiness, SourceReadiness};
use executor_telemetry::Metric;
use tokio::sync::watch;

use crate::catalog::connect::connect_source;
use crate::catalog::{Catalog, Connection, Source, SourceState};
use crate::config::SourceConfig;
use crate::search::SearchIndex;
use crate::tool::ToolDef;

/// The wait after the first failure; each failed retry doubles it, up to [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(2);
const LONGEST_WAIT: Duration = Duration::from_secs(60);
/// The longest the background task sleeps before it reads the clock again
/// (an injected clock may jump: tests move it).
const BACKGROUND_TICK: Duration = Duration::from_secs(1);
/// The shortest, so that a clock that stands still never makes it spin.
const SHORTEST_SLEEP: Duration = Duration::from_millis(50);
/// Plans kept for calls that never came (a run stopped between planning and
/// calling) are forgotten past this many paths, once older than
/// [`BLIND_PLAN_LIFETIME`], far beyond any run's wall clock.
const BLIND_PATHS: usize = 1024;
const BLIND_PLAN_LIFETIME: Duration = Duration::from_secs(3600);

/// The wait before the retry that follows `failures` failures (1: the first).
pub(super) fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_WAIT.saturating_mul(1 << doublings).min(LONGEST_WAIT)
}

/// A source that failed to connect with the catalog.
pub(super) struct Retrying {
    config: SourceConfig,
    outage: Mutex<Outage>,
    /// Its tools from the catalog index, kept for the retries (the index was read once).
    indexed: Mutex<Option<Vec<ToolDef>>>,
    healed: OnceLock<Healed>,
    /// One attempt at a time.
    attempt: tokio::sync::Mutex<()>,
    /// Calls of each path planned while the source was unavailable: their
    /// policy was decided without the tool (an unknown path runs, to be told
    /// why), so once it connects such a call is decided again before it is made.
    /// How many, and when the latest was planned.
    blind: Mutex<HashMap<String, (u32, Instant)>>,
}

#[derive(Debug, Clone)]
struct Outage {
    /// The latest failure's, redacted.
    reason: String,
    /// The first failure.
    since: Timestamp,
    next_retry_at: Timestamp,
    failures: u32,
}

/// A source connected since the catalog was: its connection and its tools.
pub(super) struct Healed {
    pub(super) connection: Connection,
    /// Sorted by path.
    pub(super) tools: Vec<ToolDef>,
    by_path: HashMap<String, usize>,
    pub(super) index: SearchIndex,
}

impl Healed {
    fn new(connection: Connection, mut tools: Vec<ToolDef>) -> Self {
        tools.sort_by(|a, b| a.path.cmp(&b.path));
        let by_path = tools.iter().enumerate().map(|(i, t)| (t.path.clone(), i)).collect();
        let index = SearchIndex::build(&tools);
        Self { connection, tools, by_path, index }
    }

    pub(super) fn tool(&self, path: &str) -> Option<&ToolDef> {
        self.by_path.get(path).map(|i| &self.tools[*i])
    }
}

impl Retrying {
    /// `config` failed at `now` for `reason`; `indexed` is what it had of the catalog index.
    pub(super) fn new(config: SourceConfig, reason: String, indexed: Option<Vec<ToolDef>>, now: Timestamp) -> Self {
        let outage = Outage { reason, since: now, next_retry_at: now.plus(backoff(1)), failures: 1 };
        Self {
            config,
            outage: Mutex::new(outage),
            indexed: Mutex::new(indexed),
            healed: OnceLock::new(),
            attempt: tokio::sync::Mutex::new(()),
            blind: Mutex::default(),
        }
    }

    pub(super) fn healed(&self) -> Option<&Healed> {
        self.healed.get()
    }

    /// Why it is unavailable, while it is.
    pub(super) fn reason(&self) -> Option<String> {
        self.outage().map(|outage| outage.reason)
    }

    fn outage(&self) -> Option<Outage> {
        match self.healed.get() {
            Some(_) => None,
            None => Some(lock(&self.outage).clone()),
        }
    }

    fn due(&self, now: Timestamp) -> bool {
        self.outage().is_some_and(|outage| outage.next_retry_at <= now)
    }

    /// A call of `path` is planned while the source is unavailable.
    pub(super) fn planned_blind(&self, path: &str) {
        let now = Instant::now();
        let mut blind = lock(&self.blind);
        if blind.len() >= BLIND_PATHS {
            blind.retain(|_, (_, at)| now.duration_since(*at) < BLIND_PLAN_LIFETIME);
        }
        let (count, at) = blind.entry(path.to_owned()).or_insert((0, now));
        (*count, *at) = (*count + 1, now);
    }

    /// Whether a call of `path` may have been planned while the source was
    /// unavailable (one such plan is taken: each call takes its own).
    pub(super) fn take_blind(&self, path: &str) -> bool {
        let mut blind = lock(&self.blind);
        let Some((count, _)) = blind.get_mut(path) else { return false };
        *count -= 1;
        if *count == 0 {
            blind.remove(path);
        }
        true
    }
}

/// A poisoned lock still holds consistent data here: each update is one assignment.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The background retries of [`Catalog::heal_in_background`]; dropping it stops them.
pub struct Healing {
    task: tokio::task::JoinHandle<()>,
    rounds: watch::Receiver<u64>,
}

impl Healing {
    /// How many rounds the retries have made (a round retries what is due,
    /// then waits for the next): what shows that one passed without
    /// waiting for a guess at how long a round takes.
    pub fn rounds(&self) -> watch::Receiver<u64> {
        self.rounds.clone()
    }
}

impl Drop for Healing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Catalog {
    /// Retry every unavailable source whose retry is due (by the catalog's
    /// clock), concurrently; answers how many sources are unavailable after.
    pub async fn heal(&self) -> usize {
        let due = self.sources.iter().filter_map(|s| Some((s, s.retrying()?)));
        futures_util::future::join_all(due.map(|(source, retrying)| self.retry(source, retrying))).await;
        self.unavailable_count()
    }

    /// When the next retry is due; `None` once every source is connected.
    pub fn next_retry_at(&self) -> Option<Timestamp> {
        self.sources.iter().filter_map(|s| Some(s.retrying()?.outage()?.next_retry_at)).min()
    }

    /// Retry the unavailable sources in a task of their own until all are
    /// connected, each when its retry is due: for a host that keeps running
    /// between requests (`executor serve`). A Lambda function does not run
    /// between invocations; there a source is retried on its first use.
    pub fn heal_in_background(self: &Arc<Self>) -> Healing {
        let (made, rounds) = watch::channel(0);
        Healing { task: tokio::spawn(heal_until_connected(Arc::downgrade(self), made)), rounds }
    }

    /// Retry `namespace`'s source if it is unavailable and its retry is due:
    /// its first use after that.
    pub(super) async fn heal_namespace(&self, namespace: &str) {
        if let Some((source, retrying)) = self.source(namespace).and_then(|s| Some((s, s.retrying()?))) {
            self.retry(source, retrying).await;
        }
    }

    /// One attempt, if still due once it is this caller's turn.
    async fn retry(&self, source: &Source, retrying: &Retrying) {
        if !retrying.due(self.context.clock.now()) {
            return;
        }
        let _turn = retrying.attempt.lock().await;
        // Whoever had the turn before may have connected it, or failed and put the retry off.
        if !retrying.due(self.context.clock.now()) {
            return;
        }
        let mut indexed = lock(&retrying.indexed).take();
        let connected = connect_source(&retrying.config, &self.context, &mut indexed).await;
        let now = self.context.clock.now();
        match connected {
            Ok((connection, tools)) => {
                let count = tools.len();
                // Set once, here, under the turn: nothing else sets it.
                let _ = retrying.healed.set(Healed::new(connection, tools));
                tracing::info!(namespace = %source.namespace, tools = count, "source connected after a retry");
                executor_telemetry::level(Metric::SourcesUnavailable, self.unavailable_count() as u64);
            }
            Err(reason) => {
                *lock(&retrying.indexed) = indexed;
                let mut outage = lock(&retrying.outage);
                outage.failures += 1;
                outage.next_retry_at = now.plus(backoff(outage.failures));
                let next_retry_at = outage.next_retry_at.to_rfc3339();
                match outage.reason == reason {
                    true => tracing::debug!(namespace = %source.namespace, %next_retry_at, "source still unavailable"),
                    false => {
                        tracing::warn!(namespace = %source.namespace, %reason, %next_retry_at, "source still unavailable")
                    }
                }
                outage.reason = reason;
            }
        }
    }

    pub(super) fn unavailable_count(&self) -> usize {
        self.sources.iter().filter(|s| s.unavailable().is_some()).count()
    }

    /// Each source's state, for `GET /readyz`.
    pub(super) fn source_readiness(&self) -> Readiness {
        let state = |source: &Source| match source.retrying().and_then(Retrying::outage) {
            None => SourceReadiness::Connected,
            Some(Outage { reason, since, next_retry_at, .. }) => {
                SourceReadiness::Unavailable { reason, since, next_retry_at }
            }
        };
        Readiness { sources: self.sources.iter().map(|s| (s.namespace.clone(), state(s))).collect() }
    }
}

/// [`Catalog::heal_in_background`]'s loop. The catalog is held only while
/// retrying: a catalog its host dropped is not kept alive by its retries.
async fn heal_until_connected(catalog: Weak<Catalog>, rounds: watch::Sender<u64>) {
    loop {
        let wait = {
            let Some(catalog) = catalog.upgrade() else { return };
            let unavailable = catalog.heal().await;
            rounds.send_modify(|made| *made += 1);
            if unavailable == 0 {
                return;
            }
            let now = catalog.context.clock.now();
            catalog.next_retry_at().map_or(BACKGROUND_TICK, |at| at.since(now).clamp(SHORTEST_SLEEP, BACKGROUND_TICK))
        };
        tokio::time::sleep(wait).await;
    }
}

/// A catalog's sources from the start: connected, or retried from `now` on.
pub(super) fn source_state(
    config: &SourceConfig,
    connected: Result<Connection, String>,
    indexed: Option<Vec<ToolDef>>,
    now: Timestamp,
) -> SourceState {
    match connected {
        Ok(connection) => SourceState::Connected(Box::new(connection)),
        Err(reason) => SourceState::Retrying(Box::new(Retrying::new(config.clone(), reason, indexed, now))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_retry_is_within_5_s_and_none_waits_over_60_s() {
        let waits: Vec<u64> = (1..=9).map(|failures| backoff(failures).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60, 60, 60]);
        assert_eq!(backoff(u32::MAX), LONGEST_WAIT);
        assert!(backoff(1) <= Duration::from_secs(5));
    }
}
