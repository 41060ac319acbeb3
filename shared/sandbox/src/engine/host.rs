//! The host's side of a context: what the code's tool calls, logs, clock and
//! random numbers reach, shared between the functions installed in the
//! context and the engine.

use executor_core::ArgsHash;
use serde_json::Value as Json;

use crate::logs::Logs;
use crate::{CALL_OVERHEAD_BYTES, Limits};

/// A tool call the code issued and is awaiting.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IssuedCall {
    pub step: u32,
    pub path: String,
    pub args: Json,
    pub args_hash: ArgsHash,
}

impl IssuedCall {
    pub fn new(step: u32, path: impl Into<String>, args: Json) -> Self {
        let args_hash = ArgsHash::of(&args);
        Self { step, path: path.into(), args, args_hash }
    }
}

/// State shared between the host functions inside the context and the engine.
pub(super) struct Host {
    pub(super) issued: Vec<IssuedCall>,
    /// What `issued` holds, counted as [`Limits::call_bytes`] counts it.
    pub(super) issued_bytes: usize,
    pub(super) call_bytes: usize,
    /// Set when a call would have taken `issued` past `call_bytes`: that call
    /// and every later one is dropped, and the run ends with the limit.
    pub(super) calls_over: bool,
    pub(super) next_step: u32,
    pub(super) pinned_now: f64,
    pub(super) random: SplitMix64,
    pub(super) logs: Logs,
}

impl Host {
    pub(super) fn new(seed: u64, pinned_now: f64, limits: &Limits) -> Self {
        Self {
            issued: Vec::new(),
            issued_bytes: 0,
            call_bytes: limits.call_bytes,
            calls_over: false,
            next_step: 0,
            pinned_now,
            random: SplitMix64(seed),
            logs: Logs::new(limits.log_bytes),
        }
    }

    /// Hold a call the code made, unless the round's calls would hold too much.
    pub(super) fn issue(&mut self, path: String, args: Option<String>) -> u32 {
        let step = self.next_step;
        self.next_step += 1;
        let size = args.as_ref().map_or(0, String::len) + path.len() + CALL_OVERHEAD_BYTES;
        if self.calls_over || self.issued_bytes + size > self.call_bytes {
            self.calls_over = true;
            return step;
        }
        self.issued_bytes += size;
        let args = args.and_then(|json| serde_json::from_str(&json).ok()).unwrap_or(Json::Null);
        self.issued.push(IssuedCall::new(step, path, args));
        step
    }
}

/// `Math.random()`: SplitMix64 from the journal's seed, so a replay draws the
/// same numbers in the same order.
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    pub(super) fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // The top 53 bits, as a fraction in [0, 1).
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}
