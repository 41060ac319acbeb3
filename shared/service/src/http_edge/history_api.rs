//! `GET /api/executions` and `GET /api/executions/{id}/history`: the audit
//! trail as its owner reads it. A toolkit-scoped key sees its toolkit's
//! executions only; another owner's history is "not found".

use bytes::Bytes;
use executor_core::{ExecutionId, ExecutionStatus, Principal, Timestamp, ToolkitName};
use executor_store::StoreError;
use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::application::history::{History, Listing};
use crate::http_edge::responses::api_json;

/// A listing's size unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 50;

/// Answer a history route as the authenticated `owner` (in `scope`, the toolkit of a scoped key).
pub(crate) async fn answer(
    history: &History,
    request: &Request<Bytes>,
    owner: &Principal,
    scope: Option<&ToolkitName>,
) -> Response<Bytes> {
    if request.method() != Method::GET {
        let message = "GET /api/executions or GET /api/executions/{id}/history";
        return error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", message);
    }
    let path = request.uri().path().trim_end_matches('/');
    match path.strip_prefix("/api/executions/").and_then(|rest| rest.strip_suffix("/history")) {
        Some(id) => show(history, owner, scope, id).await,
        None => match listing(request.uri().query()) {
            Ok(listing) => list(history, owner, scope, &listing).await,
            Err(message) => error(StatusCode::BAD_REQUEST, "invalid_arguments", &message),
        },
    }
}

async fn list(history: &History, owner: &Principal, scope: Option<&ToolkitName>, listing: &Listing) -> Response<Bytes> {
    match history.list(owner, scope, listing).await {
        Ok(page) => {
            let now = history.now();
            let executions: Vec<Value> = page.items.iter().map(|record| record.to_json(now)).collect();
            api_json(StatusCode::OK, &json!({ "executions": executions, "nextCursor": page.next }))
        }
        Err(StoreError::NotFound { .. }) => {
            error(StatusCode::BAD_REQUEST, "invalid_arguments", "`cursor` is not one a listing returned; start over")
        }
        Err(e) => unavailable(&e),
    }
}

async fn show(history: &History, owner: &Principal, scope: Option<&ToolkitName>, id: &str) -> Response<Bytes> {
    let not_found = || {
        let message = "no execution with this id has a history for you; GET /api/executions lists yours";
        error(StatusCode::NOT_FOUND, "execution_not_found", message)
    };
    let Ok(id) = ExecutionId::parse(id) else { return not_found() };
    crate::http_edge::spans::record("executor.execution.id", id.as_str());
    match history.show(owner, scope, &id).await {
        Ok((record, entries)) => {
            let entries: Vec<Value> = entries.iter().map(|entry| entry.to_json()).collect();
            let status = record.status_at(history.now());
            api_json(StatusCode::OK, &json!({ "executionId": id, "status": status.as_str(), "entries": entries }))
        }
        Err(StoreError::NotFound { .. }) => not_found(),
        Err(e) => unavailable(&e),
    }
}

/// `?status=&since=&limit=&cursor=`, each checked.
fn listing(query: Option<&str>) -> Result<Listing, String> {
    let mut listing = Listing { limit: DEFAULT_LIMIT, ..Listing::default() };
    for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match &*name {
            "status" => listing.status = Some(status(&value)?),
            "since" => {
                let since = Timestamp::parse_rfc3339(&value)
                    .map_err(|e| format!("`since` must be an RFC 3339 time such as 2026-12-01T10:00:00Z: {e}"))?;
                listing.since = Some(since);
            }
            "limit" => {
                listing.limit = match value.parse::<usize>() {
                    Ok(n @ 1..=crate::MAX_LIST_LIMIT) => n,
                    _ => return Err(format!("`limit` must be a whole number from 1 to {}", crate::MAX_LIST_LIMIT)),
                }
            }
            "cursor" => listing.cursor = Some(value.into_owned()),
            other => return Err(format!("unknown parameter `{other}`; use status, since, limit or cursor")),
        }
    }
    Ok(listing)
}

fn status(value: &str) -> Result<ExecutionStatus, String> {
    ExecutionStatus::parse(value).ok_or_else(|| {
        let names: Vec<&str> = ExecutionStatus::ALL.iter().map(|status| status.as_str()).collect();
        format!("`status` must be one of {}, not {value:?}", names.join(", "))
    })
}

fn error(status: StatusCode, code: &str, message: &str) -> Response<Bytes> {
    api_json(status, &json!({"error": {"code": code, "message": message}}))
}

fn unavailable(e: &StoreError) -> Response<Bytes> {
    error(StatusCode::SERVICE_UNAVAILABLE, "store_error", &e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_parameters_are_checked() {
        let ok = |query: &str| listing(Some(query)).unwrap();
        assert_eq!(ok("").limit, DEFAULT_LIMIT);
        assert_eq!(ok("status=paused").status, Some(ExecutionStatus::Paused));
        assert_eq!(ok("limit=5&cursor=EXEC%23x").cursor.as_deref(), Some("EXEC#x"));
        assert_eq!(ok("since=1970-01-01T00:00:01Z").since, Some(Timestamp::from_millis(1000)));
        let refused = ["status=done", "limit=0", "limit=201", "limit=x", "since=yesterday", "owner=bob"];
        for query in refused {
            assert!(listing(Some(query)).is_err(), "{query}");
        }
    }
}
