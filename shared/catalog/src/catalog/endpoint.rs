//! Sending a source's requests: its credential headers and its OAuth token
//! (the source's own, or the calling owner's) on every request, through the
//! checked outbound client; why a request was not answered, as a tool error.

use std::sync::Arc;

use executor_core::Principal;
use executor_sandbox::ToolError;
use reqwest::header::{HeaderName, HeaderValue};

use crate::connections::{OwnerTokenError, OwnerTokens};
use crate::oauth::{OAuthError, TokenCache};
use crate::outbound::{Answer, Outbound, OutboundError};

/// How much of an upstream error body the code sees.
pub(super) const ERROR_EXCERPT_CHARS: usize = 500;

/// Sends a source's requests with its credential headers and its OAuth token.
pub(super) struct Endpoint {
    pub(super) headers: Vec<(HeaderName, HeaderValue)>,
    pub(super) outbound: Outbound,
    pub(super) tokens: Option<Arc<TokenCache>>,
    /// A per-owner source: its owners' tokens and its namespace.
    pub(super) owners: Option<(Arc<OwnerTokens>, String)>,
}

/// Why a request was not answered.
#[derive(Debug, thiserror::Error)]
pub(super) enum SendError {
    #[error(transparent)]
    Outbound(#[from] OutboundError),
    #[error("no access token: {0}")]
    Token(#[from] OAuthError),
    #[error("no access token: {0}")]
    Owner(#[from] OwnerTokenError),
}

impl Endpoint {
    /// Send the request `build` makes, with the source's credentials. With
    /// an OAuth token, a 401 gets one more attempt with a new token: the
    /// token may have been revoked before it expired.
    /// A per-owner source's requests carry `owner`'s token; without an owner
    /// (the spec, fetched at start) they carry none.
    pub(super) async fn send(
        &self,
        build: impl Fn(&Outbound) -> reqwest::RequestBuilder,
        owner: Option<&Principal>,
    ) -> Result<Answer, SendError> {
        if let (Some((owners, source)), Some(owner)) = (&self.owners, owner) {
            let token = owners.access_token(owner, source).await?;
            return Ok(self.send_with(&build, Some(&token)).await?);
        }
        let Some(tokens) = &self.tokens else { return Ok(self.send_with(&build, None).await?) };
        let token = tokens.token().await?;
        let answer = self.send_with(&build, Some(&token)).await?;
        if answer.status != 401 {
            return Ok(answer);
        }
        tokens.rejected(&token).await;
        let token = tokens.token().await?;
        Ok(self.send_with(&build, Some(&token)).await?)
    }

    async fn send_with(
        &self,
        build: &impl Fn(&Outbound) -> reqwest::RequestBuilder,
        token: Option<&str>,
    ) -> Result<Answer, OutboundError> {
        let mut request = build(&self.outbound);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(token) = token {
            // Checked to be valid in a header when it was issued.
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| OutboundError::Failed { detail: "the access token is not valid in a header".into() })?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        self.outbound.send(request).await
    }
}

pub(super) fn send_error(error: SendError) -> ToolError {
    let code = match &error {
        SendError::Outbound(OutboundError::Refused { .. } | OutboundError::BadUrl { .. }) => "destination_refused",
        SendError::Outbound(OutboundError::Timeout { .. }) => "timeout",
        SendError::Outbound(OutboundError::TooLarge { .. }) => "response_too_large",
        SendError::Outbound(OutboundError::Failed { .. }) => "upstream_error",
        SendError::Token(_) | SendError::Owner(_) => "auth_error",
    };
    ToolError { code: code.into(), message: error.to_string() }
}
