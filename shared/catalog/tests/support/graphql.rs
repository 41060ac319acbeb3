//! A real GraphQL engine on loopback: `graphql_server.py` (graphql-core)
//! in a child process, ended when the handle drops.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use std::sync::Arc;

use executor_catalog::Catalog;
use serde_json::Value;

use super::{TOKEN, TOKEN_VAR, connect, set_secrets};

const INSTALL_HINT: &str = "graphql-core (Python) is needed for the GraphQL tests and was not found. \
     Install it with `python3 -m pip install graphql-core` (scripts/test does this for you).";

pub struct GraphqlServer {
    /// `http://127.0.0.1:<port>`
    pub base: String,
    child: Child,
}

impl GraphqlServer {
    /// The service, accepting only `Authorization: Bearer <token>`.
    pub fn start(token: &str) -> Self {
        let available = Command::new("python3").args(["-c", "import graphql"]).status();
        assert!(available.is_ok_and(|s| s.success()), "{INSTALL_HINT}");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/graphql_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(token)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the GraphQL test server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("port ").unwrap_or_else(|| panic!("the server said {line:?}"));
        Self { base: format!("http://127.0.0.1:{port}"), child }
    }

    pub fn url(&self) -> String {
        format!("{}/graphql", self.base)
    }

    /// `POST /graphql` of `query` and `variables` with the token, as a client
    /// other than the catalog would: what the service does with a document.
    pub async fn post(&self, query: &str, variables: Value, token: &str) -> Value {
        let http = executor_http_client::builder().build().unwrap();
        let body = serde_json::json!({"query": query, "variables": variables});
        let request = http.post(self.url()).bearer_auth(token).header("content-type", "application/json");
        let response = request.body(body.to_string()).send().await.unwrap();
        assert!(response.status().is_success(), "POST /graphql: {}", response.status());
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }

    /// `GET <path>` with the token: `/schema.json` or `/stats`.
    pub async fn get(&self, path: &str, token: &str) -> Value {
        let http = executor_http_client::builder().build().unwrap();
        let response = http.get(format!("{}{path}", self.base)).bearer_auth(token).send().await.unwrap();
        assert!(response.status().is_success(), "{path}: {}", response.status());
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }

    /// How many mutations the service ran (it accepts [`TOKEN`]).
    pub async fn mutations(&self) -> u64 {
        self.get("/stats", TOKEN).await["mutations"].as_u64().unwrap()
    }
}

/// A catalog with one GraphQL source `tracker` on `server`, with the
/// [`TOKEN`] it accepts; `extra` adds lines to its table.
pub async fn tracker(server: &GraphqlServer, extra: &str) -> (Arc<Catalog>, tempfile::TempDir) {
    set_secrets();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
        [outbound]
        allow_loopback = true

        [[sources]]
        namespace = "tracker"
        kind = "graphql"
        url = "{url}"
        auth = {{ type = "bearer", token = "env:{TOKEN_VAR}" }}
        {extra}
        "#,
        url = server.url(),
    );
    (connect(dir.path(), &config).await, dir)
}

impl Drop for GraphqlServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
