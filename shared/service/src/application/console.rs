//! Signing in to the approver's console: one-time links, OIDC sign-ins under
//! way, and the sessions both end in. Every secret is 256 random bits handed
//! out once; only its hash is stored (`executor_core::console`), so neither
//! the store nor its backups can sign anyone in.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use executor_core::{
    CONSOLE_LINK_TTL, CONSOLE_LOGIN_TTL, Clock, ConsoleGrant, ConsoleSecret, ConsoleSecretKind, Principal, Timestamp,
    TokenHash, csrf_of_session,
};
use executor_store::{ConsoleStore, StoreError};

/// A console secret as handed out once (a link's token, a cookie, an OIDC
/// state). `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsoleToken(String);

impl ConsoleToken {
    fn generate() -> Result<Self, ConsoleError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| ConsoleError::Randomness(e.to_string()))?;
        Ok(Self(hex::encode(bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    #[cfg(test)]
    pub(crate) fn for_tests(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl fmt::Debug for ConsoleToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ConsoleToken(..)")
    }
}

/// Who a console session signed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    pub principal: Principal,
    /// How the page names them: the OIDC subject, or the owner a link signed in.
    pub subject: String,
    /// The token every form of this session must carry.
    pub csrf: String,
    pub session: TokenHash,
}

/// An OIDC sign-in as it leaves for the issuer.
#[derive(Debug)]
pub struct OidcStart {
    /// The `state` parameter, which comes back with the code.
    pub state: ConsoleToken,
    /// The PKCE verifier; the issuer sees only its S256 challenge.
    pub verifier: ConsoleToken,
    pub nonce: ConsoleToken,
}

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error(
        "this sign-in link is not valid: it was used already, expired (links last 10 minutes) or was copied \
         incompletely; ask for a new one with `executor console link --owner NAME`"
    )]
    LinkNotValid,
    #[error("this sign-in did not come back in time or was already finished; start it again from the console")]
    LoginNotValid,
    #[error("you are not signed in, or your session ended; sign in again")]
    SignedOut,
    #[error("the system's random source failed: {0}")]
    Randomness(String),
    #[error("the console's storage failed: {0}; try again shortly")]
    Store(StoreError),
}

pub struct ConsoleSignIn {
    store: Arc<dyn ConsoleStore>,
    clock: Arc<dyn Clock>,
    session_ttl: Duration,
}

impl ConsoleSignIn {
    /// Sessions last `session_ttl` (`EXECUTOR_CONSOLE_SESSION_MS`).
    pub fn new(store: Arc<dyn ConsoleStore>, clock: Arc<dyn Clock>, session_ttl: Duration) -> Self {
        Self { store, clock, session_ttl }
    }

    pub fn session_ttl(&self) -> Duration {
        self.session_ttl
    }

    /// A one-time link's token for `owner`, valid [`CONSOLE_LINK_TTL`].
    pub async fn create_link(&self, owner: &Principal) -> Result<ConsoleToken, ConsoleError> {
        Self::create_link_on(&*self.store, self.clock.now(), owner).await
    }

    /// [`ConsoleSignIn::create_link`] on `store` as of `now`: what `executor
    /// console link` runs, here or in the server that holds the store.
    pub async fn create_link_on(
        store: &dyn ConsoleStore,
        now: Timestamp,
        owner: &Principal,
    ) -> Result<ConsoleToken, ConsoleError> {
        put(store, ConsoleGrant::Link { owner: owner.clone() }, now, CONSOLE_LINK_TTL).await
    }

    /// Use the link whose token is `token` (once) and sign its owner in: the
    /// new session's cookie and who it is.
    pub async fn sign_in_with_link(&self, token: &str) -> Result<(ConsoleToken, SignedIn), ConsoleError> {
        let hash = TokenHash::of_token(token);
        let link = match self.store.take_console_secret(ConsoleSecretKind::Link, &hash).await {
            Ok(link) => link,
            Err(StoreError::NotFound { .. }) => return Err(ConsoleError::LinkNotValid),
            Err(e) => return Err(ConsoleError::Store(e)),
        };
        let ConsoleGrant::Link { owner } = link.grant else { return Err(ConsoleError::LinkNotValid) };
        let subject = owner.as_str().to_owned();
        self.start_session(owner, subject).await
    }

    /// Store an OIDC sign-in about to leave for the issuer.
    pub async fn begin_oidc(&self) -> Result<OidcStart, ConsoleError> {
        let (verifier, nonce) = (ConsoleToken::generate()?, ConsoleToken::generate()?);
        let grant = ConsoleGrant::Login { verifier: verifier.0.clone(), nonce: nonce.0.clone() };
        let state = self.put(grant, CONSOLE_LOGIN_TTL).await?;
        Ok(OidcStart { state, verifier, nonce })
    }

    /// The verifier and nonce of the sign-in whose state came back, used once.
    pub async fn finish_oidc(&self, state: &str) -> Result<(String, String), ConsoleError> {
        let hash = TokenHash::of_token(state);
        match self.store.take_console_secret(ConsoleSecretKind::Login, &hash).await {
            Ok(ConsoleSecret { grant: ConsoleGrant::Login { verifier, nonce }, .. }) => Ok((verifier, nonce)),
            Ok(_) | Err(StoreError::NotFound { .. }) => Err(ConsoleError::LoginNotValid),
            Err(e) => Err(ConsoleError::Store(e)),
        }
    }

    /// Sign `principal` in: a new session and its cookie's value.
    pub async fn start_session(
        &self,
        principal: Principal,
        subject: String,
    ) -> Result<(ConsoleToken, SignedIn), ConsoleError> {
        let grant = ConsoleGrant::Session { principal: principal.clone(), subject: subject.clone() };
        let token = self.put(grant, self.session_ttl).await?;
        let signed_in = SignedIn {
            principal,
            subject,
            csrf: csrf_of_session(token.as_str()),
            session: TokenHash::of_token(&token.0),
        };
        tracing::info!(owner = signed_in.principal.as_str(), "console sign-in");
        Ok((token, signed_in))
    }

    /// Who the session cookie `token` signs in, while it lasts.
    pub async fn session(&self, token: &str) -> Result<SignedIn, ConsoleError> {
        let hash = TokenHash::of_token(token);
        match self.store.get_console_secret(ConsoleSecretKind::Session, &hash).await {
            Ok(ConsoleSecret { grant: ConsoleGrant::Session { principal, subject }, .. }) => {
                Ok(SignedIn { principal, subject, csrf: csrf_of_session(token), session: hash })
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => Err(ConsoleError::SignedOut),
            Err(e) => Err(ConsoleError::Store(e)),
        }
    }

    /// End the session `signed_in` (sign out).
    pub async fn sign_out(&self, signed_in: &SignedIn) -> Result<(), ConsoleError> {
        self.store.delete_console_secret(&signed_in.session).await.map_err(ConsoleError::Store)
    }

    /// End every console session of `owner`; how many there were.
    pub async fn revoke_sessions(&self, owner: &Principal) -> Result<usize, ConsoleError> {
        self.store.revoke_console_sessions(owner).await.map_err(ConsoleError::Store)
    }

    async fn put(&self, grant: ConsoleGrant, ttl: Duration) -> Result<ConsoleToken, ConsoleError> {
        put(&*self.store, grant, self.clock.now(), ttl).await
    }
}

/// A new secret carrying `grant`, stored by its hash; its token, handed out once.
async fn put(
    store: &dyn ConsoleStore,
    grant: ConsoleGrant,
    now: Timestamp,
    ttl: Duration,
) -> Result<ConsoleToken, ConsoleError> {
    let token = ConsoleToken::generate()?;
    let secret = ConsoleSecret::new(token.as_str(), grant, now, ttl);
    store.put_console_secret(&secret).await.map_err(ConsoleError::Store)?;
    Ok(token)
}
