//! A real OpenID Provider for the console's OIDC sign-in: panva's certified
//! `oidc-provider` (npm), run by `tests/oidc-provider/server.mjs` on a free
//! loopback port with plain http. One public client (no secret, the
//! authorization code flow with PKCE S256), RS256 ID tokens whose `sub` is the
//! login name typed on its development sign-in page; server.mjs's header names
//! the pages' form fields and buttons.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const INSTALL_HINT: &str = "the OIDC provider for the console tests is missing: \
     run `npm ci --prefix tests/oidc-provider` (scripts/test does), with Node.js installed";
const START: Duration = Duration::from_secs(30);

/// A running provider; the process is killed when this drops.
pub struct OidcProvider {
    /// `http://127.0.0.1:PORT`, as its discovery document and ID tokens name it.
    pub issuer: String,
    child: Child,
    /// Held open: the server exits when its stdin closes, so it cannot outlive this test process.
    _stdin: ChildStdin,
    stderr: Arc<Mutex<String>>,
}

impl OidcProvider {
    /// Start a provider whose one client is `client_id`, allowed to redirect to `redirect_uri`.
    pub fn start(client_id: &str, redirect_uri: &str) -> OidcProvider {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("oidc-provider");
        assert!(dir.join("node_modules/oidc-provider").is_dir(), "{INSTALL_HINT}");
        let mut child = Command::new("node")
            .arg(dir.join("server.mjs"))
            .args(["--client-id", client_id, "--redirect-uri", redirect_uri, "--port", "0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("Node.js runs tests/oidc-provider/server.mjs ({e}); {INSTALL_HINT}"));
        let stdin = child.stdin.take().expect("a piped stdin");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("a piped stderr");
        let log = stderr.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = err.read(&mut chunk) {
                log.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        let stdout = child.stdout.take().expect("a piped stdout");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = sender.send(lines.next());
            // Keep reading so the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = match receiver.recv_timeout(START) {
            Ok(Some(Ok(line))) => line,
            outcome => {
                let _ = child.kill();
                let _ = child.wait();
                let log = stderr.lock().unwrap().clone();
                panic!("the OIDC provider printed no issuer within {START:?} ({outcome:?}): {log}\n{INSTALL_HINT}");
            }
        };
        let started: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("the OIDC provider printed {line:?}: {e}"));
        let issuer = started["issuer"].as_str().unwrap_or_else(|| panic!("no issuer in {line}")).to_owned();
        OidcProvider { issuer, child, _stdin: stdin, stderr }
    }

    /// What the provider wrote on stderr so far: its warnings, and each
    /// authorization, grant or server error it met (for a failing test's message).
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::OidcProvider;

    /// The body of `GET path` on `issuer` (plain HTTP/1.0, so the server closes).
    fn get(issuer: &str, path: &str) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(issuer.trim_start_matches("http://"))?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", issuer.trim_start_matches("http://"))?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default())
    }

    #[test]
    fn it_serves_discovery_for_a_public_pkce_client_and_stops_on_drop() {
        let provider = OidcProvider::start("console-test", "http://127.0.0.1:9/console/oidc/callback");
        assert!(provider.issuer.starts_with("http://127.0.0.1:"), "{}", provider.issuer);
        let body = get(&provider.issuer, "/.well-known/openid-configuration").expect("the discovery document");
        let discovery: serde_json::Value = serde_json::from_str(&body).expect("JSON discovery");
        assert_eq!(discovery["issuer"], provider.issuer.as_str());
        assert_eq!(discovery["code_challenge_methods_supported"], serde_json::json!(["S256"]));
        assert_eq!(discovery["id_token_signing_alg_values_supported"], serde_json::json!(["RS256"]));
        let jwks_path = discovery["jwks_uri"].as_str().unwrap().trim_start_matches(&provider.issuer).to_owned();
        let jwks: serde_json::Value = serde_json::from_str(&get(&provider.issuer, &jwks_path).unwrap()).unwrap();
        assert_eq!(jwks["keys"][0]["kty"], "RSA");
        assert!(jwks["keys"][0].get("d").is_none(), "only the public key is served");
        let issuer = provider.issuer.clone();
        drop(provider);
        assert!(get(&issuer, "/.well-known/openid-configuration").is_err(), "the server is gone");
    }
}
