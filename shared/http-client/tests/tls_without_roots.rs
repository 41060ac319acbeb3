//! A machine with no trusted roots: clients still build (the roots are read
//! at the first handshake, not at start), and the handshake fails saying
//! what to install.

mod support;

use support::{certificates, serve_once, trust_only};

#[tokio::test]
async fn without_roots_clients_build_and_handshakes_say_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    trust_only(None, dir.path());
    let client = executor_http_client::builder().build().expect("no roots are read to build a client");

    let (_, cert, key) = certificates();
    let port = serve_once(&cert, &key);
    let error = client.get(format!("https://localhost:{port}/")).send().await.unwrap_err();
    let mut chain = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        chain.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    assert!(chain.contains("no trusted root certificates") && chain.contains("SSL_CERT_FILE"), "{chain}");
}
