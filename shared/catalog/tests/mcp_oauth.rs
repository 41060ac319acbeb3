//! OAuth-protected upstream MCP servers against real servers on loopback
//! (see `support/mcp_oauth.rs`): the server's 401 leads to its authorization
//! server, where this deployment registers (dynamic registration, stored
//! and reused by every instance, redone when the scopes grow) or is known by
//! its Client ID Metadata Document, served by a real `executor serve` host.
//! `mcp_oauth_secrets.rs` checks that a registered secret stays out of logs.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use executor_catalog::{Catalog, McpAuth, OAuthBacking};
use executor_cli::serve;
use executor_core::{ClientSite, ManualClock};
use executor_service::HostConfig;
use executor_store::{EmbeddedStore, OAuthClientStore, StoreError};
use serde_json::json;
use support::mcp_oauth::{SITE, config, instance, reason, start};

const TOKEN_VAR: &str = "EXECUTOR_CATALOG_TEST_MCP_OAUTH_TOKEN";
const TOKEN: &str = "mcp-oauth-at-29c4e1";

#[tokio::test]
async fn dynamic_registration_is_stored_reused_by_every_instance_and_redone_when_the_scopes_grow_or_the_server_moves() {
    let fixture = start().await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());

    let first = instance(&fixture, &store, Some(SITE)).await;
    let issuer = fixture.issuer();
    assert_eq!(first.error, None, "{first:?}");
    assert!(
        reason(&first).starts_with(&format!(
            "`docs` is an OAuth-protected MCP server (owners authorize at {issuer} (client `dcr-client-1`, scopes \
             [\"docs:read\"])) that lists its tools only to a connected owner"
        )),
        "{first:?}"
    );
    assert_eq!(
        fixture.registrations(),
        [json!({
            "client_name": "Executor",
            "redirect_uris": [format!("{SITE}/oauth/callback")],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "scope": "docs:read",
        })],
        "one registration: a public client using PKCE, for the scopes the resource supports"
    );
    let stored = store.get_oauth_client("docs").await.unwrap();
    assert_eq!(
        (stored.issuer.as_str(), stored.client_id.as_str(), &stored.scopes, &stored.client_secret, stored.version),
        (issuer.as_str(), "dcr-client-1", &vec!["docs:read".to_owned()], &None, 1)
    );

    // Another instance (another Lambda, a restart) finds the registration and makes none.
    let second = instance(&fixture, &store, Some(SITE)).await;
    assert_eq!(reason(&second), reason(&first));
    assert_eq!(fixture.registrations().len(), 1);

    // Fewer scopes are covered by the registration too.
    fixture.set(|s| s.scopes = vec![]);
    instance(&fixture, &store, Some(SITE)).await;
    assert_eq!(fixture.registrations().len(), 1);

    // The server now wants more: registered again, and the new client replaces the old for everyone.
    fixture.set(|s| s.scopes = vec!["docs:read".into(), "docs:write".into()]);
    let wider = instance(&fixture, &store, Some(SITE)).await;
    assert!(reason(&wider).contains("(client `dcr-client-2`, scopes [\"docs:read\", \"docs:write\"])"), "{wider:?}");
    let registrations = fixture.registrations();
    assert_eq!(registrations.len(), 2);
    assert_eq!(registrations[1]["scope"], "docs:read docs:write");
    let stored = store.get_oauth_client("docs").await.unwrap();
    assert_eq!((stored.client_id.as_str(), stored.version), ("dcr-client-2", 2));
    instance(&fixture, &store, Some(SITE)).await;
    assert_eq!(fixture.registrations().len(), 2, "and reused from then on");

    // The 401's own `scope` is what the request needed: it wins over the advertised scopes.
    fixture.set(|s| s.challenge_scope = Some("docs:read docs:admin".into()));
    instance(&fixture, &store, Some(SITE)).await;
    assert_eq!(fixture.registrations()[2]["scope"], "docs:read docs:admin");
    assert_eq!(store.get_oauth_client("docs").await.unwrap().scopes, ["docs:read", "docs:admin"]);

    // The source moved to a server with another authorization server: registered there.
    let moved = start().await;
    let namespace = instance(&moved, &store, Some(SITE)).await;
    assert!(reason(&namespace).contains(&format!("at {} (client `dcr-client-1`", moved.issuer())), "{namespace:?}");
    assert_eq!(moved.registrations().len(), 1);
    let stored = store.get_oauth_client("docs").await.unwrap();
    assert_eq!((stored.issuer, stored.version), (moved.issuer(), 4));
}

#[tokio::test]
async fn with_client_id_metadata_documents_the_authorization_server_reads_ours_from_executor_serve() {
    let fixture = start().await;
    fixture.set(|s| s.client_id_metadata_documents = true);
    // A real `executor serve` host, reached at its own address (its public URL).
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let empty = Arc::new(Catalog::load(None).await.unwrap());
    let host = serve::host(store.clone(), empty, &[], HostConfig::default()).await.unwrap();
    tokio::spawn(serve::serve(listener, host, std::future::pending()));

    let namespace = instance(&fixture, &store, Some(&base)).await;
    let client_id = format!("{base}/oauth/client-metadata.json");
    assert!(reason(&namespace).contains(&format!("(client `{client_id}`, scopes [\"docs:read\"])")), "{namespace:?}");
    assert_eq!(fixture.registrations().len(), 0, "no registration request: the client id is the document's URL");
    assert!(matches!(store.get_oauth_client("docs").await, Err(StoreError::NotFound { .. })), "nothing to store");

    // The authorization server fetches the document from our server and checks the redirect URI against it.
    let http = executor_http_client::builder().build().unwrap();
    let authorize = |redirect_uri: String| {
        let query = [
            ("response_type", "code".to_owned()),
            ("client_id", client_id.clone()),
            ("redirect_uri", redirect_uri),
            ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".to_owned()),
            ("code_challenge_method", "S256".to_owned()),
            ("resource", fixture.mcp_url()),
            ("state", "s1".to_owned()),
        ];
        http.get(url::Url::parse_with_params(&format!("{}/authorize", fixture.issuer()), &query).unwrap()).send()
    };
    let consent = authorize(format!("{base}/oauth/callback")).await.unwrap();
    assert_eq!(consent.status(), 200);
    assert!(consent.text().await.unwrap().contains("Allow"));
    let elsewhere = authorize("https://attacker.example/cb".into()).await.unwrap();
    assert_eq!(elsewhere.status(), 400, "a redirect URI the document does not list is refused");
    assert_eq!(fixture.documents_fetched.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn every_failure_says_what_failed() {
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    type Change = fn(&mut support::mcp_oauth::Settings);
    let cases: [(Change, &str); 5] = [
        (
            |s| s.pkce_methods = vec!["plain".into()],
            "does not offer PKCE with S256 (code_challenge_methods_supported: [\"plain\"])",
        ),
        (
            |s| s.resource = Some("http://127.0.0.1:1/other".into()),
            "describes the resource http://127.0.0.1:1/other, not this server",
        ),
        (|s| s.registration = false, "supports neither Client ID Metadata Documents nor dynamic client registration"),
        // Discovered through OpenID Connect metadata alone, or with the resource metadata at its well-known URL: it works.
        (|s| s.openid_only = true, "is an OAuth-protected MCP server (owners authorize at"),
        (|s| s.unnamed_metadata = true, "is an OAuth-protected MCP server (owners authorize at"),
    ];
    for (change, expected) in cases {
        let fixture = start().await;
        fixture.set(change);
        let namespace = instance(&fixture, &store, Some(SITE)).await;
        assert!(reason(&namespace).contains(expected), "{expected}: {namespace:?}");
    }

    // Without a public URL there is no redirect URI to register.
    let fixture = start().await;
    let namespace = instance(&fixture, &store, None).await;
    assert!(reason(&namespace).contains("set EXECUTOR_PUBLIC_URL"), "{namespace:?}");
    // A host that keeps no registrations still says who the authorization server is.
    let catalog = Catalog::connect(&config(&fixture, "")).await.unwrap();
    let namespace = catalog.namespaces().remove(0);
    let expected = format!("requires OAuth authorization from {}", fixture.issuer());
    assert!(reason(&namespace).contains(&expected), "{namespace:?}");
    assert!(fixture.registrations().is_empty());
}

#[tokio::test]
async fn the_server_takes_only_tokens_for_itself_and_a_source_with_its_own_refused_credentials_is_not_rediscovered() {
    // SAFETY: set before any catalog of this binary reads the environment, under a name only this test uses.
    unsafe { std::env::set_var(TOKEN_VAR, TOKEN) };
    let fixture = start().await;
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());
    let mcp_auth = || OAuthBacking {
        vault: None,
        mcp: Some(McpAuth { registrations: store.clone(), site: Some(ClientSite::new(SITE)) }),
    };
    let with_token = config(&fixture, &format!(r#"auth = {{ type = "bearer", token = "env:{TOKEN_VAR}" }}"#));
    let clock = || Arc::new(ManualClock::starting_now());

    // A token issued for another resource is refused, and the source's own credentials are not replaced.
    fixture.tokens.lock().unwrap().insert(TOKEN.into(), "http://127.0.0.1:1/mcp".into());
    let catalog = Catalog::connect_with(&with_token, clock(), mcp_auth()).await.unwrap();
    let namespace = catalog.namespaces().remove(0);
    assert!(reason(&namespace).contains("source `docs` (mcp) failed: MCP handshake failed: HTTP 401"), "{namespace:?}");
    assert!(!reason(&namespace).contains(TOKEN));
    assert!(fixture.registrations().is_empty(), "no discovery for a source with its own auth");

    // Issued for this server: the tools are listed.
    fixture.tokens.lock().unwrap().insert(TOKEN.into(), fixture.mcp_url());
    let catalog = Catalog::connect_with(&with_token, clock(), mcp_auth()).await.unwrap();
    let namespace = catalog.namespaces().remove(0);
    assert_eq!((namespace.tools, namespace.error), (3, None));
}
