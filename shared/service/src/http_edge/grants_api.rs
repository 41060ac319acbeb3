//! `GET /api/grants` and `DELETE /api/grants/{id}`: the owner's remembered
//! approvals, listed and revoked.

use bytes::Bytes;
use executor_core::{Grant, Principal, ToolkitName};
use executor_store::StoreError;
use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::application::grants::Grants;
use crate::http_edge::responses::{api_json, empty};

/// `GET /api/grants` and `DELETE /api/grants/{id}`, as the authenticated `owner`.
pub(crate) async fn answer(grants: &Grants, request: &Request<Bytes>, owner: &Principal) -> Response<Bytes> {
    let path = request.uri().path().trim_end_matches('/');
    match (request.method(), path.strip_prefix("/api/grants")) {
        (&Method::GET, Some("")) => match grants.list(owner).await {
            Ok(grants) => {
                let grants: Vec<Value> = grants.iter().map(grant_json).collect();
                api_json(StatusCode::OK, &json!({ "grants": grants }))
            }
            Err(e) => unavailable(&e),
        },
        (&Method::DELETE, Some(rest)) if rest.starts_with('/') => match grants.revoke(owner, &rest[1..]).await {
            Ok(_) => empty(StatusCode::NO_CONTENT),
            Err(StoreError::NotFound { .. }) => {
                let message = "no grant with this id exists for you; GET /api/grants lists yours";
                api_json(StatusCode::NOT_FOUND, &json!({"error": {"code": "grant_not_found", "message": message}}))
            }
            Err(e) => unavailable(&e),
        },
        _ => {
            let message = "GET /api/grants or DELETE /api/grants/{id}";
            api_json(
                StatusCode::METHOD_NOT_ALLOWED,
                &json!({"error": {"code": "method_not_allowed", "message": message}}),
            )
        }
    }
}

/// A grant as the API shows it.
fn grant_json(grant: &Grant) -> Value {
    json!({
        "id": grant.id.as_str(),
        "tool": grant.tool,
        "grantedBy": grant.granted_by.as_str(),
        "createdAt": grant.created_at.to_rfc3339(),
        "expiresAt": grant.expires_at.to_rfc3339(),
        "toolkit": grant.toolkit.as_ref().map(ToolkitName::as_str),
    })
}

fn unavailable(error: &StoreError) -> Response<Bytes> {
    api_json(StatusCode::SERVICE_UNAVAILABLE, &json!({"error": {"code": "store_error", "message": error.to_string()}}))
}
