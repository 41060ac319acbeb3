//! Fresh identifiers, seeds and approval tokens from the system's random source.
//!
//! The bytes are asked of the system a block at a time, kept per thread and
//! each handed out once: an `execute` takes an id and a seed, and asking for
//! them one by one was two of its five system calls.

use std::cell::RefCell;
use std::fmt;

use executor_core::{ExecutionId, GrantId, SessionId, Timestamp, TokenHash};

/// How many bytes one request to the system fetches.
const BLOCK: usize = 512;

/// Random bytes fetched and not yet handed out: `block[used..]`.
struct Pool {
    block: [u8; BLOCK],
    used: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const { RefCell::new(Pool { block: [0; BLOCK], used: BLOCK }) };
}

/// Fill `out` (at most [`BLOCK`] bytes) with bytes from the system's random
/// source. The bytes handed out are wiped from the pool, so each value is
/// only ever where it was asked for.
fn fill(out: &mut [u8]) -> Result<(), getrandom::Error> {
    debug_assert!(out.len() <= BLOCK);
    POOL.with_borrow_mut(|pool| {
        if BLOCK - pool.used < out.len() {
            getrandom::fill(&mut pool.block)?;
            pool.used = 0;
        }
        let taken = &mut pool.block[pool.used..pool.used + out.len()];
        out.copy_from_slice(taken);
        taken.fill(0);
        pool.used += out.len();
        Ok(())
    })
}

/// 128 random bits, hex: unguessable, so an id alone grants nothing.
fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// An execution created at `now`: its time in 12 hex digits (epoch ms),
/// then [`random_hex`]. Ids made later sort later, so the items keyed by them
/// (its history above all, written with nearly every `execute`) go in at
/// the end of the embedded store's tree instead of at random places in it,
/// where each would rewrite a page of its own: about a sixth of four busy
/// connections' requests. The random part alone makes it unguessable; the
/// time it shows is the execution's `created`, which whoever holds the id
/// is shown anyway.
pub(crate) fn execution_id(now: Timestamp) -> Result<ExecutionId, getrandom::Error> {
    let id = format!("{:012x}{}", now.as_millis(), random_hex()?);
    Ok(ExecutionId::parse(id).expect("hex is a valid id"))
}

pub(crate) fn grant_id() -> Result<GrantId, getrandom::Error> {
    Ok(GrantId::parse(random_hex()?).expect("hex is a valid id"))
}

/// Marks a claim as written by this resumer (see `Execution::claim`).
pub(crate) fn claim_id() -> Result<String, getrandom::Error> {
    random_hex()
}

pub(crate) fn session_id() -> Result<SessionId, getrandom::Error> {
    Ok(SessionId::parse(random_hex()?).expect("hex is a valid id"))
}

/// The value of the approval page's double-submit CSRF cookie.
pub(crate) fn csrf_token() -> Result<String, getrandom::Error> {
    random_hex()
}

pub(crate) fn seed() -> Result<u64, getrandom::Error> {
    let mut bytes = [0u8; 8];
    fill(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}

/// A browser approval token: 256 random bits, shown once in a link; only its
/// hash is stored. `Debug` does not print it, so it stays out of logs.
#[derive(Clone, PartialEq, Eq)]
pub struct ApprovalToken(String);

impl ApprovalToken {
    /// The approval page's link for execution `id` on the deployment at `base_url`.
    pub(crate) fn approval_url(&self, base_url: &str, id: &ExecutionId) -> String {
        format!("{}/approvals/{id}?token={}", base_url.trim_end_matches('/'), self.as_str())
    }

    pub(crate) fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 32];
        fill(&mut bytes)?;
        Ok(Self(hex::encode(bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn hash(&self) -> TokenHash {
        Self::hash_of(&self.0)
    }

    pub(crate) fn hash_of(token: &str) -> TokenHash {
        TokenHash::of_token(token)
    }
}

impl fmt::Debug for ApprovalToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApprovalToken(..)")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn draws_across_blocks_are_all_different_and_wiped_from_the_pool() {
        let mut seen = HashSet::new();
        // Sizes as asked for (an id, a seed, a token), over several blocks
        // and across their ends.
        for &size in [16, 8, 32].iter().cycle().take(BLOCK) {
            let mut out = vec![0u8; size];
            fill(&mut out).unwrap();
            assert!(seen.insert(out), "a draw of {size} bytes came twice");
            POOL.with_borrow(|pool| {
                assert!(pool.block[..pool.used].iter().all(|&b| b == 0), "handed-out bytes left in the pool");
            });
        }
    }

    #[test]
    fn execution_ids_sort_by_their_time_and_differ_within_one_millisecond() {
        let at = |ms| execution_id(Timestamp::from_millis(ms)).unwrap().as_str().to_owned();
        let cases = [(0, 1), (1_765_000_000_000, 1_765_000_000_001), (0xf, 0x10), (0xfff_ffff_ffff, 0x1000_0000_0000)];
        for (earlier, later) in cases {
            let (a, b) = (at(earlier), at(later));
            assert!(a < b, "{a} (at {earlier}) sorts after {b} (at {later})");
            assert_eq!((a.len(), b.len()), (44, 44));
        }
        let (a, b) = (at(1_765_000_000_000), at(1_765_000_000_000));
        assert_ne!(a, b);
        assert_eq!(a[..12], b[..12]);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
    }
}
