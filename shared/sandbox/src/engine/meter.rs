//! CPU time and the wall-clock deadline of one execution, checked by QuickJS's
//! interrupt handler.

use std::time::{Duration, Instant};

use crate::{SandboxError, Stop};

/// CPU time spent in JavaScript, and the wall-clock deadline. Checked by
/// QuickJS's interrupt handler, which cannot be caught by the code.
pub(super) struct Meter {
    pub(super) cpu_used: Duration,
    pub(super) running_since: Option<Instant>,
    pub(super) cpu_limit: Duration,
    pub(super) wall_deadline: Instant,
    pub(super) wall_limit: Duration,
    pub(super) stop: Stop,
    pub(super) tripped: Option<SandboxError>,
    /// On a worker thread: the JavaScript time after which the run stops to be
    /// started over off the worker (see `run::drive`).
    pub(super) relocate_after: Option<Duration>,
    pub(super) relocating: bool,
}

impl Meter {
    pub(super) fn check(&mut self) -> bool {
        let now = Instant::now();
        let running = self.running_since.map_or(Duration::ZERO, |since| now - since);
        if self.relocate_after.is_some_and(|budget| self.cpu_used + running > budget) {
            self.relocating = true;
            return true;
        }
        if self.cpu_used + running > self.cpu_limit {
            self.tripped.get_or_insert(SandboxError::CpuLimit { limit: self.cpu_limit });
        } else if now > self.wall_deadline {
            self.tripped.get_or_insert(SandboxError::WallClockLimit { limit: self.wall_limit });
        } else if self.stop.is_requested() {
            self.tripped.get_or_insert(SandboxError::Stopped);
        }
        self.tripped.is_some()
    }
}

impl Meter {
    pub(super) fn start(&mut self) -> Instant {
        let now = Instant::now();
        self.running_since = Some(now);
        now
    }

    pub(super) fn stop(&mut self, started: Instant) {
        self.cpu_used += started.elapsed();
        self.running_since = None;
    }
}
