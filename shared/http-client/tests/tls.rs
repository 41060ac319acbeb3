//! Real TLS handshakes through `builder()`'s clients: rustls on ring against
//! local rustls servers, checked against the platform's roots as configured
//! by `SSL_CERT_FILE`, which are read once per process.

mod support;

use support::{certificates, serve_once, trust_only};

#[tokio::test]
async fn servers_are_checked_against_the_roots_read_at_the_first_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates();
    let (other_ca, other_cert, other_key) = certificates();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let empty = dir.path().join("no-more-roots");
    std::fs::create_dir(&empty).unwrap();
    trust_only(Some(ca_file.to_str().unwrap()), &empty);

    let port = serve_once(&cert, &key);
    let client = executor_http_client::builder().build().unwrap();
    let body = client.get(format!("https://localhost:{port}/")).send().await.unwrap().text().await.unwrap();
    assert_eq!(body, "ok");

    // A certificate from an authority the roots do not hold is refused.
    let port = serve_once(&other_cert, &other_key);
    let refused = client.get(format!("https://localhost:{port}/")).send().await;
    assert!(refused.is_err(), "{refused:?}");

    // The roots were read once: a client built after they change on disk
    // and in the environment still trusts what was read.
    let other_file = dir.path().join("other-ca.pem");
    std::fs::write(&other_file, &other_ca).unwrap();
    trust_only(Some(other_file.to_str().unwrap()), &empty);
    let later = executor_http_client::builder().build().unwrap();
    let port = serve_once(&other_cert, &other_key);
    let refused = later.get(format!("https://localhost:{port}/")).send().await;
    assert!(refused.is_err(), "{refused:?}");
    let port = serve_once(&cert, &key);
    let body = later.get(format!("https://localhost:{port}/")).send().await.unwrap().text().await.unwrap();
    assert_eq!(body, "ok");
}
