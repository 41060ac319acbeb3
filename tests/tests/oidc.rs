//! OIDC bearer tokens: a local identity provider on loopback (discovery and
//! JWKS), tokens signed with its key, the real host on a socket.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::get;
use executor_cli::{keys, serve};
use executor_service::{HostConfig, OidcConfig};
use executor_store::EmbeddedStore;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

/// A fresh RSA key (PEM) and its JWKS, made by Python's `cryptography` (which moto brings).
fn key_pair() -> (String, String) {
    let script = r#"
import base64, json
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
n = key.public_key().public_numbers()
b64 = lambda i: base64.urlsafe_b64encode(i.to_bytes((i.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()
print(json.dumps({"pem": pem, "jwks": {"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": b64(n.n), "e": b64(n.e)}]}}))
"#;
    let out =
        Command::new("python3").args(["-c", script]).output().expect("python3 with cryptography (installed with moto)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    (made["pem"].as_str().unwrap().to_owned(), made["jwks"].to_string())
}

async fn identity_provider(jwks: String, fetches: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let discovery = json!({ "issuer": base, "jwks_uri": format!("{base}/jwks") }).to_string();
    let app = Router::new().route("/.well-known/openid-configuration", get(move || async move { discovery })).route(
        "/jwks",
        get(move || {
            fetches.fetch_add(1, Ordering::SeqCst);
            let jwks = jwks.clone();
            async move { jwks }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

fn token(pem: &str, kid: &str, claims: Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.into());
    encode(&header, &claims, &EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_tokens_are_checked_and_api_keys_still_work() {
    let (pem, jwks) = key_pair();
    let fetches = Arc::new(AtomicUsize::new(0));
    let issuer = identity_provider(jwks, fetches.clone()).await;

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let api_key = keys::create(&*store, "robot").await.unwrap();
    let oidc =
        OidcConfig { issuer: issuer.clone(), audience: "executor".into(), jwks_url: None, owner_claim: "email".into() };
    let config = HostConfig { oidc: Some(oidc), ..HostConfig::default() };
    let host =
        serve::host(store, Arc::new(executor_catalog::Catalog::load(None).await.unwrap()), &[], config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));

    let http = reqwest::Client::new();
    let execute = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "return 6 * 7"}}});
    let call = |bearer: String| {
        http.post(&url)
            .header("authorization", format!("Bearer {bearer}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(execute.to_string())
            .send()
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let claims = |patch: Value| {
        let mut claims =
            json!({"iss": issuer, "aud": "executor", "sub": "u-1", "email": "alice@example.com", "exp": now + 600});
        claims.as_object_mut().unwrap().extend(patch.as_object().unwrap().clone());
        claims
    };

    let good = call(token(&pem, "k1", claims(json!({})))).await.unwrap();
    assert_eq!(good.status(), 200);
    let body: Value = good.json().await.unwrap();
    assert_eq!(body["result"]["structuredContent"]["result"], 42);

    let refused = [
        ("another audience", token(&pem, "k1", claims(json!({"aud": "someone-else"})))),
        ("another issuer", token(&pem, "k1", claims(json!({"iss": "https://evil.example"})))),
        ("expired", token(&pem, "k1", claims(json!({"exp": now - 3600})))),
        ("no owner claim", token(&pem, "k1", claims(json!({"email": null})))),
        ("unknown key", token(&pem, "k9", claims(json!({})))),
        ("bad signature", {
            let t = token(&pem, "k1", claims(json!({})));
            let (rest, signature) = t.rsplit_once('.').unwrap();
            format!("{rest}.{}", signature.chars().rev().collect::<String>())
        }),
    ];
    for (what, bearer) in refused {
        let response = call(bearer).await.unwrap();
        assert_eq!(response.status(), 401, "{what}");
        assert!(response.headers().contains_key("www-authenticate"), "{what}");
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "the JWKS is fetched once, not per request or unknown key");

    assert_eq!(call(api_key).await.unwrap().status(), 200, "API keys keep working");
    let metadata: Value = http
        .get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["authorization_servers"], json!([issuer]));
}
