//! A request, from outside the run, that it stop at its next safe point: a
//! point where no tool call is in flight (before the next batch of calls is
//! made). Calls already made keep their outcome. A cancellation also stops
//! JavaScript that is running; a hand-off waits for the next batch, so that
//! the journal holds every call made and the replay elsewhere makes the rest.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

const CANCEL: u8 = 1;
const HAND_OFF: u8 = 2;

/// Shared between the run and whoever may ask it to stop; clones share one flag.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicU8>);

impl Stop {
    /// Cancel the run: it fails with `cancelled`.
    pub fn request(&self) {
        self.0.store(CANCEL, Ordering::SeqCst);
    }

    /// Hand the run on: it ends `Yielded`, to be replayed elsewhere. A
    /// cancellation already asked for stands.
    pub fn request_hand_off(&self) {
        let _ = self.0.compare_exchange(0, HAND_OFF, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst) == CANCEL
    }

    pub fn is_hand_off(&self) -> bool {
        self.0.load(Ordering::SeqCst) == HAND_OFF
    }
}
