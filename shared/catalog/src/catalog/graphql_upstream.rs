//! Calling a GraphQL service: its schema asked for at connection
//! (introspection), and a call's checked document (`tool/graphql.rs`) posted
//! with the source's credentials, its answer read as the field's data or
//! the messages of its `errors`.

use executor_core::Principal;
use executor_sandbox::{CallContext, ToolError, ToolSuccess};
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use crate::catalog::endpoint::{ERROR_EXCERPT_CHARS, Endpoint, SendError, send_error};
use crate::catalog::tool_errors::invalid;
use crate::graphql::{self, GraphqlError};
use crate::outbound::Answer;
use crate::redact::{Redactor, display_url};
use crate::tool::graphql::{GraphqlOperation, OperationKind};

pub(super) struct GraphqlUpstream {
    /// With the query credentials in it.
    pub(super) url: Url,
    pub(super) endpoint: Endpoint,
}

impl GraphqlUpstream {
    /// For the person approving a call: what runs where (the variables are the arguments shown).
    pub(super) fn effect(&self, op: &GraphqlOperation) -> String {
        format!("GraphQL {} `{}` at {}", op.kind.as_str(), op.field, display_url(&self.url))
    }

    /// POST `{query, variables}` as JSON; `idempotency_key` for writes; as `owner` for a per-owner source.
    async fn post(
        &self,
        body: &Value,
        idempotency_key: Option<&str>,
        owner: Option<&Principal>,
    ) -> Result<Answer, SendError> {
        let body = body.to_string();
        self.endpoint
            .send(
                |outbound| {
                    let request = outbound
                        .request(reqwest::Method::POST, self.url.clone())
                        .header(reqwest::header::CONTENT_TYPE, "application/json")
                        .header(reqwest::header::ACCEPT, "application/graphql-response+json, application/json")
                        .body(body.clone());
                    match idempotency_key {
                        Some(key) => request.header("Idempotency-Key", key),
                        None => request,
                    }
                },
                owner,
            )
            .await
    }

    /// The schema, asked of the service with the source's credentials.
    pub(super) async fn introspect(&self, redactor: &Redactor) -> Result<String, String> {
        let answer =
            self.post(&json!({"query": graphql::INTROSPECTION_QUERY}), None, None).await.map_err(|e| e.to_string())?;
        match answer.status {
            200..300 => Ok(String::from_utf8_lossy(&answer.body).into_owned()),
            status => Err(format!(
                "introspection answered HTTP {status}: {}",
                redactor.excerpt(&answer.body, ERROR_EXCERPT_CHARS)
            )),
        }
    }

    /// The field's data, or the messages of the answer's `errors`.
    pub(super) async fn call(
        &self,
        op: &GraphqlOperation,
        args: Value,
        ctx: &CallContext,
        redactor: &Redactor,
    ) -> Result<ToolSuccess, ToolError> {
        let request = op.request(&args).map_err(|e| invalid(e.to_string()))?;
        let body = json!({"query": request.query, "variables": request.variables});
        let key = (op.kind == OperationKind::Mutation).then(|| ctx.idempotency_key());
        let answer = self.post(&body, key.as_deref(), ctx.owner.as_ref()).await.map_err(send_error)?;
        #[derive(Deserialize)]
        struct Response {
            data: Option<Value>,
            #[serde(default)]
            errors: Vec<GraphqlError>,
        }
        let status = answer.status;
        match serde_json::from_slice::<Response>(&answer.body) {
            // Services answer errors with 200 or 4xx alike; the messages are what the code needs.
            Ok(response) if !response.errors.is_empty() => {
                let message = redactor.excerpt(graphql::messages(&response.errors).as_bytes(), ERROR_EXCERPT_CHARS);
                Err(ToolError { code: "graphql_error".into(), message })
            }
            Ok(Response { data: Some(mut data), .. }) if (200..300).contains(&status) => {
                Ok(ToolSuccess::plain(data.get_mut(&op.field).map(Value::take).unwrap_or(Value::Null)))
            }
            _ => {
                let excerpt = redactor.excerpt(&answer.body, ERROR_EXCERPT_CHARS);
                match status {
                    200..300 => Err(ToolError {
                        code: "upstream_error".into(),
                        message: format!("the service answered without GraphQL `data` or `errors`: {excerpt}"),
                    }),
                    _ => {
                        Err(ToolError { code: format!("http_{status}"), message: format!("HTTP {status}: {excerpt}") })
                    }
                }
            }
        }
    }
}
