//! A client secret that an authorization server issues at registration is
//! stored for the per-owner flow, and appears in no log line or span and no
//! "unavailable" reason. Alone in its binary: the log is captured by a
//! subscriber of this test's thread, which other tests running at the same
//! time would get in the way of.

#[path = "support/capture.rs"]
mod capture;
mod support;

use std::sync::Arc;

use capture::Capture;
use executor_store::{EmbeddedStore, OAuthClientStore};
use support::mcp_oauth::{SITE, instance, reason, start};
use tracing_subscriber::layer::SubscriberExt as _;

#[tokio::test]
async fn racing_instances_agree_on_one_registration_and_its_secret_stays_out_of_logs_and_reasons() {
    const SECRET: &str = "dcr-secret-7d1f0a5c";
    // This test's thread runs every task of the runtime: the capture sees them all.
    let capture = Capture::default();
    let _logs = tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let fixture = start().await;
    fixture.set(|s| s.client_secret = Some(SECRET.into()));
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(data.path()).unwrap());

    let (a, b) = tokio::join!(instance(&fixture, &store, Some(SITE)), instance(&fixture, &store, Some(SITE)));
    let stored = store.get_oauth_client("docs").await.unwrap();
    // Both may have registered; the stored one is the one both use.
    for namespace in [&a, &b] {
        assert!(reason(namespace).contains(&format!("(client `{}`,", stored.client_id)), "{namespace:?}");
        assert!(!reason(namespace).contains(SECRET));
    }
    assert!((1..=2).contains(&fixture.registrations().len()));
    let sealed = stored.client_secret.as_deref().expect("kept for the token requests of the per-owner flow");
    assert!(!sealed.contains(SECRET), "stored sealed, not in clear: {sealed}");
    let logs = capture.0.lock().unwrap().clone();
    assert!(logs.contains("OAuth client registered"), "the log was captured:\n{logs}");
    assert!(!logs.contains(SECRET), "{logs}");
}
