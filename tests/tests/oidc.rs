//! OIDC bearer tokens: a local identity provider on loopback (discovery and
//! JWKS), tokens signed with its key, the real host on a socket.

#[path = "../../shared/sandbox/tests/support/mod.rs"]
mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::get;
use executor_cli::{keys, serve};
use executor_service::{HostConfig, OidcConfig};
use executor_store::EmbeddedStore;
use serde_json::{Value, json};

/// Signs each `(alg, key, kid, claims)` with fresh keys made by Python's
/// `cryptography` (which moto brings), independent of the verifier under
/// test. Keys: `rsa` (RS*/PS*), `p256`, `p384`, `ed25519`, and `hmac`, a
/// shared secret that is not in the JWKS. Returns the JWKS and the tokens.
fn sign(requests: &[(&str, &str, &str, Value)]) -> (String, Vec<String>) {
    let script = r#"
import base64, json, sys
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
num = lambda i, n=None: b64(i.to_bytes(n or (i.bit_length() + 7) // 8, "big"))
keys = {"rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "p256": ec.generate_private_key(ec.SECP256R1()), "p384": ec.generate_private_key(ec.SECP384R1()),
        "ed25519": ed25519.Ed25519PrivateKey.generate(), "hmac": b"not-in-the-jwks-0123456789abcdef"}
def jwk(kid, key):
    pub = key.public_key()
    if kid == "rsa":
        n = pub.public_numbers()
        return {"kty": "RSA", "kid": kid, "n": num(n.n), "e": num(n.e)}
    if kid == "ed25519":
        from cryptography.hazmat.primitives import serialization as s
        return {"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64(pub.public_bytes(s.Encoding.Raw, s.PublicFormat.Raw))}
    size = 32 if kid == "p256" else 48
    n = pub.public_numbers()
    return {"kty": "EC", "kid": kid, "crv": "P-256" if size == 32 else "P-384", "x": num(n.x, size), "y": num(n.y, size)}
def signature(alg, key, message):
    hash_ = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}.get(alg[2:])
    if alg.startswith("RS"):
        return key.sign(message, padding.PKCS1v15(), hash_)
    if alg.startswith("PS"):
        return key.sign(message, padding.PSS(mgf=padding.MGF1(hash_), salt_length=hash_.digest_size), hash_)
    if alg.startswith("ES"):
        r, s = decode_dss_signature(key.sign(message, ec.ECDSA(hash_)))
        size = key.curve.key_size // 8
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    if alg.startswith("HS"):
        mac = hmac.HMAC(key, hash_)
        mac.update(message)
        return mac.finalize()
    return key.sign(message)
tokens = []
for alg, key, kid, claims in json.load(sys.stdin):
    head = b64(json.dumps({"alg": alg, "typ": "JWT", "kid": kid}).encode()) + "." + b64(json.dumps(claims).encode())
    tokens.append(head + "." + b64(signature(alg, keys[key], head.encode())))
jwks = {"keys": [jwk(kid, key) for kid, key in keys.items() if kid != "hmac"]}
print(json.dumps({"jwks": jwks, "tokens": tokens}))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 with cryptography (installed with moto)");
    child.stdin.take().unwrap().write_all(serde_json::to_string(requests).unwrap().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tokens = made["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect();
    (made["jwks"].to_string(), tokens)
}

/// Serves discovery and `jwks` on `listener` (bound first: the tokens name its address).
fn identity_provider(listener: tokio::net::TcpListener, jwks: String, fetches: Arc<AtomicUsize>) {
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_tokens_are_checked_and_api_keys_still_work() {
    let idp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", idp.local_addr().unwrap());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let claims = |patch: Value| {
        let mut claims =
            json!({"iss": issuer, "aud": "executor", "sub": "u-1", "email": "alice@example.com", "exp": now + 600});
        claims.as_object_mut().unwrap().extend(patch.as_object().unwrap().clone());
        claims
    };
    let accepted = [
        ("RS256", "rsa"),
        ("RS512", "rsa"),
        ("PS256", "rsa"),
        ("ES256", "p256"),
        ("ES384", "p384"),
        ("EdDSA", "ed25519"),
    ];
    let refused = [
        ("another audience", "RS256", "rsa", "rsa", claims(json!({"aud": "someone-else"}))),
        ("another issuer", "RS256", "rsa", "rsa", claims(json!({"iss": "https://evil.example"}))),
        ("expired", "RS256", "rsa", "rsa", claims(json!({"exp": now - 3600}))),
        ("no owner claim", "ES256", "p256", "p256", claims(json!({"email": null}))),
        ("unknown key", "RS256", "rsa", "k9", claims(json!({}))),
        ("signed by another key than named", "ES256", "p384", "p256", claims(json!({}))),
        ("an RSA key named for an EC algorithm", "ES256", "p256", "rsa", claims(json!({}))),
        ("HMAC with a secret the JWKS does not hold", "HS256", "hmac", "rsa", claims(json!({}))),
    ];
    let mut requests: Vec<(&str, &str, &str, Value)> =
        accepted.iter().map(|&(alg, key)| (alg, key, key, claims(json!({})))).collect();
    requests.extend(refused.iter().map(|(_, alg, key, kid, claims)| (*alg, *key, *kid, claims.clone())));
    let (jwks, tokens) = sign(&requests);
    let fetches = Arc::new(AtomicUsize::new(0));
    identity_provider(idp, jwks, fetches.clone());

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let api_key = keys::create(&*store, "robot").await.unwrap();
    let oidc = oidc_config(&issuer, false);
    let config = HostConfig { oidc: Some(oidc), ..HostConfig::default() };
    let host =
        serve::host(store, Arc::new(executor_catalog::Catalog::load(None).await.unwrap()), &[], config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));

    let http = executor_http_client::builder().build().unwrap();
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
    for ((alg, _), token) in accepted.iter().zip(&tokens) {
        let response = call(token.clone()).await.unwrap();
        assert_eq!(response.status(), 200, "{alg}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["result"]["structuredContent"]["result"], 42, "{alg}");
    }
    let good = &tokens[0];
    let (rest, signature) = good.rsplit_once('.').unwrap();
    let tampered = format!("{rest}.{}", signature.chars().rev().collect::<String>());
    let refused = refused.iter().map(|r| r.0).zip(tokens[accepted.len()..].iter().cloned());
    for (what, bearer) in refused.chain([("bad signature", tampered)]) {
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

fn oidc_config(issuer: &str, share_key_owners: bool) -> OidcConfig {
    OidcConfig {
        issuer: issuer.to_owned(),
        audience: "executor".into(),
        jwks_url: None,
        owner_claim: "email".into(),
        share_key_owners,
        console_client_id: None,
    }
}

/// An identity-provider user whose claim equals an API-key owner's name is
/// someone else, unless the configuration says the two name spaces are one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idp_user_named_like_a_key_owner_sees_nothing_of_theirs() {
    let idp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", idp.local_addr().unwrap());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let claims =
        json!({"iss": issuer, "aud": "executor", "sub": "u-1", "email": "alice@example.com", "exp": now + 600});
    let (jwks, tokens) = sign(&[("ES256", "p256", "p256", claims)]);
    identity_provider(idp, jwks, Arc::new(AtomicUsize::new(0)));
    let idp_token = tokens[0].clone();

    for share in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let api_key = keys::create(&*store, "alice@example.com").await.unwrap();
        let config = HostConfig { oidc: Some(oidc_config(&issuer, share)), ..HostConfig::default() };
        let host = serve::host(store, support::TestTools::new(), &["w".into()], config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve::serve(listener, host, std::future::pending()));

        let http = executor_http_client::builder().build().unwrap();
        let call = |bearer: &str, name: &str, arguments: Value| {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}});
            http.post(format!("{base}/mcp"))
                .header("authorization", format!("Bearer {bearer}"))
                .header("accept", "application/json, text/event-stream")
                .json(&body)
                .send()
        };
        let paused: Value = call(&api_key, "execute", json!({"code": "return await tools.w.send({})"}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let paused = &paused["result"]["structuredContent"];
        assert_eq!(paused["status"], "waiting_for_interaction", "{paused}");
        let id = paused["executionId"].as_str().unwrap();

        let viewed = http
            .get(format!("{base}/api/executions/{id}"))
            .header("authorization", format!("Bearer {idp_token}"))
            .send()
            .await
            .unwrap();
        let resumed: Value = call(&idp_token, "resume", json!({"executionId": id, "action": "accept"}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let code = &resumed["result"]["structuredContent"]["error"]["code"];
        if share {
            assert_eq!(viewed.status(), 200, "shared on purpose: the same owner");
            assert_eq!(resumed["result"]["structuredContent"]["status"], "completed", "{resumed}");
        } else {
            assert_eq!(viewed.status(), 404, "another principal: not found");
            assert_eq!(code, "execution_not_found", "{resumed}");
        }
    }
}

/// A token with the `executor_toolkit` claim is scoped to that toolkit, as a
/// key made with `--toolkit` is: 403 on `/mcp`, served on the toolkit's
/// endpoint; a claim that names no valid toolkit is refused (401).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_with_the_toolkit_claim_works_only_on_that_toolkit() {
    let idp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", idp.local_addr().unwrap());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let claims = |toolkit: Value| {
        json!({"iss": issuer, "aud": "executor", "email": "bot@example.com", "exp": now + 600,
            executor_service::TOOLKIT_CLAIM: toolkit})
    };
    let (jwks, tokens) = sign(&[
        ("ES256", "p256", "p256", claims(json!("support"))),
        ("ES256", "p256", "p256", claims(json!("Not/A/Toolkit"))),
    ]);
    identity_provider(idp, jwks, Arc::new(AtomicUsize::new(0)));

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let tools = support::TestTools::new();
    let toolkit = executor_core::Toolkit {
        name: executor_core::ToolkitName::parse("support").unwrap(),
        tools: vec![executor_core::ToolPattern::parse("r.*").unwrap()],
        policy: executor_core::SourcePolicy::default(),
    };
    let namespaces = ["r".to_owned(), "w".to_owned()];
    let view = executor_catalog::ToolkitView::new(toolkit, tools.clone(), &namespaces);
    let endpoint = executor_service::ToolkitEndpoint {
        name: view.name().clone(),
        namespaces: view.namespaces().to_vec(),
        tools: Arc::new(view),
    };
    let config =
        HostConfig { oidc: Some(oidc_config(&issuer, false)), toolkits: vec![endpoint], ..HostConfig::default() };
    let host = serve::host(store, tools, &namespaces, config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve::serve(listener, host, std::future::pending()));

    let http = executor_http_client::builder().build().unwrap();
    let execute = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"code": "return (await tools.r.get({})).ok"}}});
    let call = |path: &str, bearer: &str| {
        http.post(format!("{base}{path}"))
            .header("authorization", format!("Bearer {bearer}"))
            .header("accept", "application/json, text/event-stream")
            .json(&execute)
            .send()
    };
    let refused = call("/mcp", &tokens[0]).await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("toolkit `support`"), "{body}");
    let served = call("/mcp/toolkits/support", &tokens[0]).await.unwrap();
    assert_eq!(served.status(), 200);
    let body: Value = served.json().await.unwrap();
    assert_eq!(body["result"]["structuredContent"]["result"], true, "{body}");
    let invalid = call("/mcp/toolkits/support", &tokens[1]).await.unwrap();
    assert_eq!(invalid.status(), 401);
    let body: Value = invalid.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("executor_toolkit"), "{body}");
}
