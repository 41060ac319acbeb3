//! Signing in to the console with the OIDC issuer: the authorization code
//! flow with PKCE (S256) for a public client (`EXECUTOR_CONSOLE_CLIENT_ID`).
//! `GET /console/oidc/start` stores the sign-in (its verifier and nonce,
//! under the hash of its `state`) and sends the browser to the issuer;
//! `GET /console/oidc/callback` takes it back once, redeems the code, checks
//! the ID token (signature, issuer, audience, expiry, nonce) and starts a
//! session for the owner it names.

use base64::Engine;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use sha2::{Digest, Sha256};

use crate::application::console::OidcStart;
use crate::http_edge::approvals::query_param;
use crate::http_edge::console::{ConsoleRoutes, LOGIN_COOKIE, Visit, add_cookies, console_error, message, unavailable};
use crate::http_edge::console_page;
use crate::http_edge::responses::page;

/// Where the issuer sends the person back, under the public URL.
pub(crate) const OIDC_CALLBACK_PATH: &str = "/console/oidc/callback";

impl ConsoleRoutes {
    pub(crate) async fn oidc_start(&self, visit: &Visit<'_>) -> Response<Bytes> {
        let Some((oidc, client_id)) = self.oidc.as_deref().and_then(|o| Some((o, o.console_client_id()?))) else {
            return no_oidc();
        };
        let endpoints = match oidc.endpoints().await {
            Ok(endpoints) => endpoints,
            Err(error) => return message(StatusCode::BAD_GATEWAY, "The issuer did not answer", &error.to_string()),
        };
        let started = match self.sign_in.begin_oidc().await {
            Ok(started) => started,
            Err(error) => return console_error(&error),
        };
        let redirect_uri = format!("{}{OIDC_CALLBACK_PATH}", visit.base_url);
        let location = authorization_url(&endpoints.authorization, client_id, &redirect_uri, &started);
        let mut response = page(StatusCode::FOUND, String::new());
        match HeaderValue::from_str(&location) {
            Ok(location) => response.headers_mut().insert(header::LOCATION, location),
            Err(_) => return unavailable("the issuer's authorization endpoint is not a usable URL"),
        };
        // `Lax`: the issuer's redirect back is a cross-site navigation.
        let login = visit.set_cookie(LOGIN_COOKIE, started.state.as_str(), "/console/oidc", 600, "Lax");
        add_cookies(&mut response, &[login]);
        response
    }

    pub(crate) async fn oidc_callback(&self, visit: &Visit<'_>) -> Response<Bytes> {
        let Some((oidc, client_id)) = self.oidc.as_deref().and_then(|o| Some((o, o.console_client_id()?))) else {
            return no_oidc();
        };
        let query = visit.request.uri().query();
        if let Some(error) = query_param(query, "error") {
            let text = format!("The issuer did not sign you in ({}). Try again from the console.", error);
            return message(StatusCode::FORBIDDEN, "Not signed in", &text);
        }
        // RFC 9207: a response from another issuer is not this sign-in's.
        if query_param(query, "iss").is_some_and(|iss| iss != oidc.issuer()) {
            return message(StatusCode::FORBIDDEN, "Not signed in", "The answer came from another issuer.");
        }
        let (state, code) = (query_param(query, "state").unwrap_or_default(), query_param(query, "code"));
        // The state must be the one this browser left with.
        if state.is_empty() || visit.cookie(LOGIN_COOKIE).as_deref() != Some(state.as_str()) {
            let text = "This sign-in was not started in this browser, or it took too long. Start it again.";
            return message(StatusCode::FORBIDDEN, "Sign-in not finished", text);
        }
        let (verifier, nonce) = match self.sign_in.finish_oidc(&state).await {
            Ok(taken) => taken,
            Err(error) => return console_error(&error),
        };
        let redirect_uri = format!("{}{OIDC_CALLBACK_PATH}", visit.base_url);
        let signed = async {
            let id_token =
                oidc.redeem(code.as_deref().unwrap_or_default(), &verifier, &redirect_uri, client_id).await?;
            oidc.console_principal(&id_token, client_id, &nonce).await
        };
        let (principal, subject) = match signed.await {
            Ok(signed) => signed,
            Err(error) => return message(StatusCode::FORBIDDEN, "Not signed in", &error.to_string()),
        };
        match self.sign_in.start_session(principal, subject.clone()).await {
            Ok((token, _)) => {
                let mut response = page(StatusCode::OK, console_page::signed_in(&subject));
                let done = visit.set_cookie(LOGIN_COOKIE, "", "/console/oidc", 0, "Lax");
                add_cookies(&mut response, &[self.session_cookie(visit, token.as_str()), done]);
                response
            }
            Err(error) => console_error(&error),
        }
    }
}

/// The issuer's authorization endpoint with this sign-in's parameters.
fn authorization_url(endpoint: &str, client_id: &str, redirect_uri: &str, started: &OidcStart) -> String {
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(started.verifier.as_str()));
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("scope", "openid")
        .append_pair("state", started.state.as_str())
        .append_pair("nonce", started.nonce.as_str())
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .finish();
    let joiner = if endpoint.contains('?') { '&' } else { '?' };
    format!("{endpoint}{joiner}{query}")
}

fn no_oidc() -> Response<Bytes> {
    let text = "This console signs in with one-time links only: `executor console link --owner NAME` on the server. \
                Set EXECUTOR_OIDC_ISSUER and EXECUTOR_CONSOLE_CLIENT_ID to sign in with an identity provider.";
    message(StatusCode::NOT_FOUND, "No identity provider", text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authorization_url_carries_the_pkce_challenge_and_keeps_the_endpoints_query() {
        let started = OidcStart {
            state: crate::application::console::ConsoleToken::for_tests("s t"),
            verifier: crate::application::console::ConsoleToken::for_tests(
                "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            ),
            nonce: crate::application::console::ConsoleToken::for_tests("n"),
        };
        let cases =
            [("https://idp/auth", "https://idp/auth?"), ("https://idp/auth?tenant=1", "https://idp/auth?tenant=1&")];
        for (endpoint, starts) in cases {
            let url = authorization_url(endpoint, "console", "http://127.0.0.1:8787/console/oidc/callback", &started);
            assert!(url.starts_with(starts), "{url}");
            for part in [
                "response_type=code",
                "client_id=console",
                "redirect_uri=http%3A%2F%2F127.0.0.1%3A8787%2Fconsole%2Foidc%2Fcallback",
                "scope=openid",
                "state=s+t",
                "nonce=n",
                // RFC 7636, appendix B: this verifier's S256 challenge.
                "code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                "code_challenge_method=S256",
            ] {
                assert!(url.contains(part), "{part} missing in {url}");
            }
        }
    }
}
