//! How an execution too large for one item is laid out, and which of its
//! chunk items a write can leave alone.
//!
//! An execution whose JSON fits one item is stored whole in its `body`. A
//! larger one is split in two streams: the completed journal steps, one JSON
//! line each, and the rest of the execution (its JSON with no steps: state,
//! code, pending calls, links, logs). Steps are only ever appended (replay
//! never changes a recorded step), so the steps stream of a new version starts
//! with the stream of the version before: its full pieces are the same bytes.
//! Chunk items `CHUNK#0001..` hold the steps pieces, then the pieces of the
//! rest after its first, which sits in the execution item's own `body`.
//!
//! A write puts only the chunk items whose bytes differ from what the stored
//! version holds, as this process last read or wrote it ([`Seen`]): a claim or
//! an expiry, which change no step, writes the execution item alone.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use executor_core::{Execution, JournalStep};
use sha2::{Digest, Sha256};

use crate::StoreError;
use crate::records::{self, EXECUTION, MAX_ITEM_BODY_BYTES};

/// An execution as the pieces it is stored in.
pub(crate) struct Layout {
    /// The execution item's `body`.
    pub head: Vec<u8>,
    /// The chunk items' bodies, `CHUNK#0001` first.
    pub chunks: Vec<Vec<u8>>,
    /// How many of `chunks` are steps (the rest continue `head`).
    pub steps_chunks: usize,
}

impl Layout {
    pub fn of(execution: &Execution) -> Result<Self, StoreError> {
        // The size limit applies to the execution's JSON, as on every adapter.
        let whole = records::encode_execution(execution)?;
        if whole.len() <= MAX_ITEM_BODY_BYTES {
            return Ok(Self { head: whole, chunks: Vec::new(), steps_chunks: 0 });
        }
        let mut steps = Vec::new();
        for step in &execution.journal.steps {
            serde_json::to_writer(&mut steps, step).map_err(|e| StoreError::corrupt(EXECUTION, e))?;
            steps.push(b'\n');
        }
        let mut rest = execution.clone();
        rest.journal.steps.clear();
        let rest = records::encode(EXECUTION, &rest)?;
        let mut chunks: Vec<Vec<u8>> = steps.chunks(MAX_ITEM_BODY_BYTES).map(<[u8]>::to_vec).collect();
        let steps_chunks = chunks.len();
        let mut rest_pieces = rest.chunks(MAX_ITEM_BODY_BYTES).map(<[u8]>::to_vec);
        let head = rest_pieces.next().unwrap_or_default();
        chunks.extend(rest_pieces);
        Ok(Self { head, chunks, steps_chunks })
    }

    /// The execution these pieces hold (a layout with no steps chunks is its JSON, split).
    pub fn execution(self) -> Result<Execution, StoreError> {
        let mut rest = self.head;
        for piece in &self.chunks[self.steps_chunks..] {
            rest.extend_from_slice(piece);
        }
        let mut execution: Execution = records::decode(EXECUTION, &rest)?;
        if self.steps_chunks > 0 {
            let steps: Vec<u8> = self.chunks[..self.steps_chunks].concat();
            for line in steps.split(|b| *b == b'\n').filter(|line| !line.is_empty()) {
                execution.journal.steps.push(records::decode::<JournalStep>(EXECUTION, line)?);
            }
        }
        Ok(execution)
    }
}

/// A chunk item outlives the execution item written with it by this much, so
/// that a later write that moves the execution's expiry (a pause again) can
/// still leave it alone.
pub(crate) const CHUNK_TTL_SLACK: Duration = Duration::from_secs(24 * 3600);

/// What one chunk item holds: the version that wrote it, its bytes' hash and
/// its TTL (epoch seconds).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Piece {
    pub version: u64,
    pub expires_at: u64,
    hash: [u8; 32],
}

impl Piece {
    pub fn new(version: u64, expires_at: u64, bytes: &[u8]) -> Self {
        Self { version, expires_at, hash: Sha256::digest(bytes).into() }
    }

    /// Whether this item can stay as it is for an execution whose item expires at
    /// `expires_at` (seconds) and whose piece here is `bytes`.
    pub fn serves(&self, bytes: &[u8], expires_at: u64) -> bool {
        self.expires_at >= expires_at && self.hash == <[u8; 32]>::from(Sha256::digest(bytes))
    }
}

/// The chunk items of the executions this process last read or wrote, by
/// execution id: (the execution's version, its pieces). Only a cache: a
/// missing entry means every chunk is written. Kept small, since only
/// executions over one item have an entry and most are written a few times.
#[derive(Default)]
pub(crate) struct Seen(Mutex<HashMap<String, (u64, Vec<Piece>)>>);

/// Entries kept at most; past it the cache starts again empty.
const SEEN_LIMIT: usize = 256;

impl Seen {
    /// The pieces stored at `version`, if this process knows them.
    pub fn at(&self, id: &str, version: u64) -> Option<Vec<Piece>> {
        let seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(id).filter(|(v, _)| *v == version).map(|(_, pieces)| pieces.clone())
    }

    /// An execution stored in one item has no chunks to know.
    pub fn forget(&self, id: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    pub fn remember(&self, id: &str, version: u64, pieces: Vec<Piece>) {
        if pieces.is_empty() {
            return self.forget(id);
        }
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= SEEN_LIMIT {
            seen.clear();
        }
        seen.insert(id.to_owned(), (version, pieces));
    }
}

/// `versions` as the execution item's `chunk_versions` attribute, e.g. `3,3,5`.
pub(crate) fn versions_attribute(pieces: &[Piece]) -> String {
    pieces.iter().map(|p| p.version.to_string()).collect::<Vec<_>>().join(",")
}

pub(crate) fn parse_versions(text: &str) -> Result<Vec<u64>, StoreError> {
    text.split(',')
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().map_err(|_| StoreError::corrupt(EXECUTION, format!("bad chunk version {v:?}"))))
        .collect()
}
