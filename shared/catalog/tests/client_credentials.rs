//! `oauth2_client_credentials` against real servers on loopback (see
//! `support/oauth.rs`): an authorization server that counts every token
//! request, and an OpenAPI service that accepts only the tokens it issued.
//! Expiry is moved with a manual clock, never waited for.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use executor_catalog::Catalog;
use executor_core::{ExecutionId, ManualClock};
use executor_sandbox::{CallContext, Tools};
use serde_json::json;
use support::oauth::{
    CLIENT_ID, CLIENT_SECRET, LIFETIME_SECONDS, SECRET_VAR, WRONG_SECRET_VAR, config, set_secrets, start,
};

fn ctx(step: u32) -> CallContext {
    CallContext::new(ExecutionId::parse("exec-1").unwrap(), step)
}

async fn fifty_reads(catalog: &Catalog) {
    let calls = (0..50).map(|step| async move { catalog.call("vault.items.listItems", json!({}), &ctx(step)).await });
    for result in futures_util::future::join_all(calls).await {
        assert_eq!(result.unwrap(), json!([{"name": "key"}]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_across_an_expiry_and_a_revocation_ask_for_the_fewest_tokens() {
    set_secrets();
    let (fixture, base) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::starting_now());
    let catalog = Catalog::connect_with_clock(&config(&base, SECRET_VAR, dir.path()), clock.clone()).await.unwrap();
    let namespace = &catalog.namespaces()[0];
    assert_eq!((namespace.tools, &namespace.error), (4, &None), "the spec was fetched with the token");
    assert_eq!(fixture.requests(), 1, "one token, at connect");
    assert_eq!(
        *fixture.asked.lock().unwrap(),
        [(CLIENT_ID.to_owned(), "items:read items:write".to_owned())],
        "the client authenticates with basic auth and asks for its scopes"
    );

    fifty_reads(&catalog).await;
    assert_eq!(fixture.requests(), 1, "the cached token serves every call");

    // Shortly before the expiry, the token is replaced once, whoever asks first.
    clock.advance(Duration::from_secs(LIFETIME_SECONDS - 30));
    fifty_reads(&catalog).await;
    assert_eq!(fixture.requests(), 2);
    let issued = fixture.issued();
    assert!(fixture.seen.lock().unwrap().iter().rev().take(50).all(|t| *t == issued[1]), "the new token was used");

    // Revoked before its expiry: every call gets a 401, one new token is asked for, each call is retried once.
    fixture.revoke(&issued[1]);
    fifty_reads(&catalog).await;
    assert_eq!(fixture.requests(), 3);

    // The lifetime was honoured: an hour later the third token is still used as it is.
    clock.advance(Duration::from_secs(LIFETIME_SECONDS - 120));
    fifty_reads(&catalog).await;
    assert_eq!(fixture.requests(), 3);
    // A service that refuses every token: one new token and one retry per call, then its 401.
    fixture.refuse_all.store(true, Ordering::SeqCst);
    let refused = catalog.call("vault.items.listItems", json!({}), &ctx(0)).await;
    let refused = refused.unwrap_err();
    assert_eq!((refused.code.as_str(), refused.message.as_str()), ("http_401", "HTTP 401: invalid or expired token"));
    assert_eq!(fixture.requests(), 4);

    // Past the expiry, with the client refused: the call says why it has no token.
    fixture.refuse_clients.store(true, Ordering::SeqCst);
    clock.advance(Duration::from_secs(LIFETIME_SECONDS));
    let no_token = catalog.call("vault.items.listItems", json!({}), &ctx(0)).await.unwrap_err();
    assert_eq!(no_token.code, "auth_error");
    assert!(
        no_token.message.starts_with("no access token: the token endpoint http://127.0.0.1:")
            && no_token.message.contains("refused the client (HTTP 401)"),
        "{}",
        no_token.message
    );
    assert!(
        !no_token.message.contains(CLIENT_SECRET) && no_token.message.contains("[redacted]"),
        "{}",
        no_token.message
    );
    assert_eq!(fixture.requests(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_client_credentials_make_the_source_unavailable_with_the_reason() {
    set_secrets();
    let (fixture, base) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::connect(&config(&base, WRONG_SECRET_VAR, dir.path())).await.unwrap();
    let error = catalog.namespaces()[0].error.clone().unwrap();
    assert_eq!(
        error,
        format!(
            "source `vault` (auth) failed: the token endpoint {base}/oauth/token refused the client (HTTP 401): \
             {{\"error\":\"invalid_client\",\"error_description\":\"unknown client executor ci:[redacted]\"}}; check \
             the source's client_id, client_secret and scopes"
        )
    );
    assert_eq!(fixture.requests(), 1);
    let call = catalog.call("vault.items.listItems", json!({}), &ctx(0)).await.unwrap_err();
    assert_eq!(call.code, "source_unavailable");
    assert!(call.message.contains("refused the client (HTTP 401)"), "{}", call.message);
}
