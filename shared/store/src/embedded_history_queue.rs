//! Histories written after their answer (`HistoryStore::queue_history`):
//! the history of an execution that ended within its answer is handed to one
//! writer thread, which encodes what was handed to it and stores it in one
//! transaction at most every [`COMMIT_EVERY`] (encoding it there too keeps
//! it off the answer's path: it was a twentieth of a stateless `execute`).
//! A commit writes pages and syncs the file
//! (about half a millisecond of a core on a local disk); paid per request,
//! that was most of a stateless `execute`, and committed as soon as
//! anything waits it still took a third of the machine. Reads of the
//! history first wait for what was handed on before them
//! ([`HistoryQueue::settled`], which has the writer commit at once), so
//! nobody reading through this store sees the difference; closing the store
//! writes what is left. A crash of the process loses what was not yet
//! committed: at most one window's histories, of runs that already had their
//! answer (as a failed write of their history does).

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use executor_core::{HistoryAppend, Timestamp};
use executor_telemetry::{Metric, count};
use redb::Database;
use tokio::sync::watch;

use super::Failure;
use super::history::{encode_history, write_history};

/// The most histories waiting at once; more are written by their callers
/// (so a disk slower than the requests slows the requests, never memory).
const MAX_WAITING: usize = 1024;

/// The least time between two commits of the writer: at most this much of
/// answered runs' history is lost to a crash. Pacing only (no record's time
/// depends on it), so it is measured by the machine's monotonic clock.
const COMMIT_EVERY: Duration = Duration::from_millis(10);

/// A history handed on, with the time it was handed on (what decides
/// whether a part already stored is still live).
struct Handed {
    history: HistoryAppend,
    at: Timestamp,
}

struct Waiting {
    histories: Vec<Handed>,
    /// How many histories were ever handed on: the writer's progress is
    /// measured against it.
    handed: u64,
    /// Someone reads the history: commit now.
    hurry: bool,
    closing: bool,
}

struct Shared {
    waiting: Mutex<Waiting>,
    wake: Condvar,
    /// How many handed-on histories are written (or given up on).
    done: watch::Sender<u64>,
}

pub(super) struct HistoryQueue {
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
}

impl HistoryQueue {
    pub(super) fn start(db: Arc<Database>) -> Self {
        let waiting = Waiting { histories: Vec::new(), handed: 0, hurry: false, closing: false };
        let shared = Arc::new(Shared { waiting: Mutex::new(waiting), wake: Condvar::new(), done: watch::channel(0).0 });
        let on_thread = shared.clone();
        let writer = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || write_handed(&on_thread, &db))
            .expect("a thread for the history writer");
        Self { shared, writer: Some(writer) }
    }

    /// Hand `history` to the writer; given back when too many wait (the
    /// caller writes it itself).
    pub(super) fn hand_on(&self, history: HistoryAppend, at: Timestamp) -> Result<(), Box<HistoryAppend>> {
        let mut waiting = self.shared.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if waiting.closing || waiting.histories.len() >= MAX_WAITING {
            return Err(Box::new(history));
        }
        waiting.histories.push(Handed { history, at });
        waiting.handed += 1;
        // The writer waits for a first history, or gathers until half full.
        if waiting.histories.len() == 1 || waiting.histories.len() == MAX_WAITING / 2 {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Wait until everything handed on before this call is written.
    pub(super) async fn settled(&self) {
        let handed = {
            let mut waiting = self.shared.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            if !waiting.histories.is_empty() {
                waiting.hurry = true;
                self.shared.wake.notify_one();
            }
            waiting.handed
        };
        let mut done = self.shared.done.subscribe();
        // The sender lives as long as `self`: this ends.
        let _ = done.wait_for(|done| *done >= handed).await;
    }
}

impl Drop for HistoryQueue {
    /// Write what is waiting, then stop the writer.
    fn drop(&mut self) {
        self.shared.waiting.lock().unwrap_or_else(PoisonError::into_inner).closing = true;
        self.shared.wake.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The writer: everything waiting, one transaction at a time and at most
/// one per [`COMMIT_EVERY`] unless hurried, until closed with nothing left.
fn write_handed(shared: &Shared, db: &Database) {
    /// Should the writer ever stop early (a panic), nobody waits on it any
    /// more and nothing more is handed to it: callers write themselves.
    struct Stopped<'a>(&'a Shared);
    impl Drop for Stopped<'_> {
        fn drop(&mut self) {
            self.0.waiting.lock().unwrap_or_else(PoisonError::into_inner).closing = true;
            self.0.done.send_replace(u64::MAX);
        }
    }
    let _stopped = Stopped(shared);
    yield_to_requests();
    let mut last_commit: Option<Instant> = None;
    loop {
        let (batch, handed) = {
            let mut waiting = shared.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            while waiting.histories.is_empty() && !waiting.closing {
                waiting = shared.wake.wait(waiting).unwrap_or_else(PoisonError::into_inner);
            }
            if waiting.histories.is_empty() {
                return;
            }
            // Gather more until the window since the last commit is over.
            while let Some(left) = last_commit.map(|at| COMMIT_EVERY.saturating_sub(at.elapsed()))
                && !left.is_zero()
                && !waiting.hurry
                && !waiting.closing
                && waiting.histories.len() < MAX_WAITING / 2
            {
                waiting = shared.wake.wait_timeout(waiting, left).unwrap_or_else(PoisonError::into_inner).0;
            }
            waiting.hurry = false;
            (std::mem::take(&mut waiting.histories), waiting.handed)
        };
        last_commit = Some(Instant::now());
        let unwritten = write_batch(db, &batch);
        for _ in 0..unwritten {
            count(Metric::HistoryNotWritten);
        }
        shared.done.send_replace(handed);
    }
}

/// Give the calling thread (the writer) a lower scheduling priority than the
/// threads that answer requests: what it writes is of runs already answered,
/// and on a core it shares with them it delays the next answers (the slowest
/// hundredth of one connection's `execute`s waited for its commits). Under
/// a steady overload it still gets a share of the machine, and past
/// [`MAX_WAITING`] the callers write themselves.
fn yield_to_requests() {
    // Linux keeps a nice value per thread; `0` is the calling one.
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only changes this thread's scheduling priority.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, WRITER_NICE);
    }
}

/// The writer's nice value: ten steps below the default, about a tenth of a
/// default thread's share of a core when both want it.
#[cfg(target_os = "linux")]
const WRITER_NICE: libc::c_int = 10;

/// Write `batch` in one transaction: a history refused (too large, or a
/// live part of it is stored) is left out alone; a failed commit loses them
/// all. Returns how many were not written, each logged.
fn write_batch(db: &Database, batch: &[Handed]) -> usize {
    const OPERATION: &str = "store executions' histories";
    // Encoded before the transaction, which holds the store's write lock.
    let encoded: Vec<_> =
        batch.iter().map(|handed| (encode_history(&handed.history).map_err(Failure::Store), handed.at)).collect();
    let committed = db.begin_write().map_err(|e| crate::StoreError::backend(OPERATION, e)).and_then(|txn| {
        let mut refused = 0;
        for (history, at) in encoded {
            match history.and_then(|history| write_history(&txn, &history, at)) {
                Ok(()) => {}
                Err(Failure::Store(error)) => {
                    refused += 1;
                    tracing::error!(%error, "history not written");
                }
                Err(Failure::Db(error)) => return Err(crate::StoreError::backend(OPERATION, error)),
            }
        }
        txn.commit().map_err(|e| crate::StoreError::backend(OPERATION, e))?;
        Ok(refused)
    });
    committed.unwrap_or_else(|error| {
        tracing::error!(%error, histories = batch.len(), "histories not written");
        batch.len()
    })
}
