//! The approver's console: who is signed in, and the one-time secrets that
//! sign them in. Each secret is stored only as the hash of its token: a sign-in
//! link (`executor console link`), an OIDC sign-in in progress (its PKCE
//! verifier and nonce), or a signed-in browser (its session cookie). Links and
//! OIDC sign-ins are single use; sessions last until they expire or their
//! owner signs out.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Principal, Timestamp, TokenHash};

/// How long a console link signs someone in.
pub const CONSOLE_LINK_TTL: Duration = Duration::from_secs(10 * 60);
/// How long an OIDC sign-in may take between leaving and coming back.
pub const CONSOLE_LOGIN_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a console session lasts by default (`EXECUTOR_CONSOLE_SESSION_MS`).
pub const DEFAULT_CONSOLE_SESSION: Duration = Duration::from_secs(8 * 3600);

/// What a console secret is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsoleSecretKind {
    /// A one-time sign-in link.
    Link,
    /// An OIDC authorization under way (the state parameter's hash).
    Login,
    /// A signed-in browser (the session cookie's hash).
    Session,
}

/// What the secret carries besides its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConsoleGrant {
    /// Signs in `owner` once.
    Link { owner: Principal },
    /// Finishes an OIDC sign-in: the PKCE verifier and the nonce the ID token must carry.
    Login { verifier: String, nonce: String },
    /// `principal` is signed in; `subject` is how the page names them (the
    /// OIDC subject, or the owner a link signed in).
    Session { principal: Principal, subject: String },
}

impl ConsoleGrant {
    pub fn kind(&self) -> ConsoleSecretKind {
        match self {
            Self::Link { .. } => ConsoleSecretKind::Link,
            Self::Login { .. } => ConsoleSecretKind::Login,
            Self::Session { .. } => ConsoleSecretKind::Session,
        }
    }

    /// The owner it belongs to, once someone is signed in or a link names one.
    pub fn owner(&self) -> Option<&Principal> {
        match self {
            Self::Link { owner } => Some(owner),
            Self::Session { principal, .. } => Some(principal),
            Self::Login { .. } => None,
        }
    }
}

/// One stored console secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleSecret {
    /// The hash of the token the browser (or link) holds; the token itself is never stored.
    pub hash: TokenHash,
    pub grant: ConsoleGrant,
    pub created_at: Timestamp,
    /// Reads treat it as gone from then on (DynamoDB TTL forgets it later).
    pub expires_at: Timestamp,
}

impl ConsoleSecret {
    pub fn new(token: &str, grant: ConsoleGrant, now: Timestamp, ttl: Duration) -> Self {
        Self { hash: TokenHash::of_token(token), grant, created_at: now, expires_at: now.plus(ttl) }
    }

    pub fn kind(&self) -> ConsoleSecretKind {
        self.grant.kind()
    }

    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}

/// The CSRF token of the forms a session's pages carry: derived from the
/// session token, which only that browser holds (an `HttpOnly` cookie), so a
/// page elsewhere can neither read nor guess it, and nothing more is stored.
pub fn csrf_of_session(session_token: &str) -> String {
    let digest = Sha256::digest(format!("executor console csrf\0{session_token}").as_bytes());
    hex::encode(&digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_kept_by_hash_and_live_until_they_expire() {
        let owner = Principal::parse("alice").unwrap();
        let now = Timestamp::from_millis(1_000);
        let secret = ConsoleSecret::new("tok", ConsoleGrant::Link { owner: owner.clone() }, now, CONSOLE_LINK_TTL);
        assert_eq!(secret.hash, TokenHash::of_token("tok"));
        assert_eq!(secret.kind(), ConsoleSecretKind::Link);
        assert_eq!(secret.grant.owner(), Some(&owner));
        let cases = [(0, true), (599_999, true), (600_000, false), (700_000, false)];
        for (after, live) in cases {
            assert_eq!(secret.is_live(Timestamp::from_millis(1_000 + after)), live, "{after}");
        }
    }

    #[test]
    fn csrf_tokens_differ_per_session_and_are_not_the_session() {
        let (a, b) = (csrf_of_session("s1"), csrf_of_session("s2"));
        assert_ne!(a, b);
        assert_eq!(a, csrf_of_session("s1"));
        assert_eq!(a.len(), 32);
        assert!(!a.contains("s1"));
    }

    #[test]
    fn grants_round_trip_with_their_kind() {
        let grants = [
            ConsoleGrant::Link { owner: Principal::parse("alice").unwrap() },
            ConsoleGrant::Login { verifier: "v".into(), nonce: "n".into() },
            ConsoleGrant::Session { principal: Principal::parse("alice").unwrap(), subject: "alice".into() },
        ];
        for grant in grants {
            let json = serde_json::to_string(&grant).unwrap();
            assert_eq!(serde_json::from_str::<ConsoleGrant>(&json).unwrap(), grant);
        }
    }
}
