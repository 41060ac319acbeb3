//! Browser approval links: which single-use tokens may decide a paused execution.
//!
//! Only hashes are kept. Every pause starts with no links; each link handed
//! out (the `execute` result, a `resume` that is still waiting, the page shown
//! after an approval that paused again) adds one. A claim spends them all, so a
//! link decides at most once; the one that decided is remembered so a second
//! submit of the same page can say "already decided".

use serde::{Deserialize, Serialize};

use crate::TokenHash;

/// At most this many links are open for one pause; the oldest is dropped first.
pub const MAX_OPEN_LINKS: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ApprovalLinks {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    open: Vec<TokenHash>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spent: Option<TokenHash>,
}

/// What a token is to the execution it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkStatus {
    /// It may decide the current pause.
    Open,
    /// It decided this execution's last claimed pause.
    Spent,
    /// Wrong, dropped, or from an earlier pause: the same as no execution at all.
    Unknown,
}

impl ApprovalLinks {
    /// Admit one more link to the current pause.
    pub fn open(&mut self, hash: TokenHash) {
        if self.open.len() == MAX_OPEN_LINKS {
            self.open.remove(0);
        }
        self.open.push(hash);
    }

    pub fn status(&self, hash: &TokenHash) -> LinkStatus {
        if self.open.contains(hash) {
            LinkStatus::Open
        } else if self.spent.as_ref() == Some(hash) {
            LinkStatus::Spent
        } else {
            LinkStatus::Unknown
        }
    }

    /// The pause was claimed, through `by` when a link decided it.
    pub(crate) fn spend(&mut self, by: Option<TokenHash>) {
        self.open.clear();
        self.spent = by;
    }

    /// A new pause: links of the previous one decide nothing now.
    pub(crate) fn reset(&mut self) {
        self.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(token: &str) -> TokenHash {
        TokenHash::of_token(token)
    }

    #[test]
    fn links_open_spend_and_reset() {
        let mut links = ApprovalLinks::default();
        links.open(hash("a"));
        links.open(hash("b"));
        let table = [("a", LinkStatus::Open), ("b", LinkStatus::Open), ("c", LinkStatus::Unknown)];
        for (token, expected) in table {
            assert_eq!(links.status(&hash(token)), expected, "{token}");
        }
        links.spend(Some(hash("a")));
        let table = [("a", LinkStatus::Spent), ("b", LinkStatus::Unknown)];
        for (token, expected) in table {
            assert_eq!(links.status(&hash(token)), expected, "{token}");
        }
        links.open(hash("d"));
        links.reset();
        assert_eq!(links.status(&hash("d")), LinkStatus::Unknown);
        assert_eq!(links.status(&hash("a")), LinkStatus::Spent);
    }

    #[test]
    fn the_oldest_open_link_is_dropped_at_the_cap() {
        let mut links = ApprovalLinks::default();
        for i in 0..=MAX_OPEN_LINKS {
            links.open(hash(&i.to_string()));
        }
        assert_eq!(links.status(&hash("0")), LinkStatus::Unknown);
        assert_eq!(links.status(&hash("1")), LinkStatus::Open);
        assert_eq!(links.status(&hash(&MAX_OPEN_LINKS.to_string())), LinkStatus::Open);
    }
}
