//! A real GraphQL engine on loopback: `graphql_server.py` (graphql-core)
//! in a child process, ended when the handle drops.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

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

    /// `GET <path>` with the token: `/schema.json` or `/stats`.
    pub async fn get(&self, path: &str, token: &str) -> Value {
        let http = executor_http_client::builder().build().unwrap();
        let response = http.get(format!("{}{path}", self.base)).bearer_auth(token).send().await.unwrap();
        assert!(response.status().is_success(), "{path}: {}", response.status());
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }
}

impl Drop for GraphqlServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
