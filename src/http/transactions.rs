//! Transactions of Icechunk repositories (api.md 4.3): begun on a branch,
//! written by every write route with `?transaction=ID` (and read at
//! `{ds}@transaction.ID`), then committed as one commit or aborted. Their
//! state is in the repository's store, so any replica serves any of their
//! requests. Like every write they need the dataset writable and the
//! caller's `write` grant; reading one needs `read`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::problem::ApiError;
use super::refs::{json_body, repository};
use super::write::{no_store, rfc3339};
use super::AppState;
use crate::identity::{Caller, Permission};
use crate::storage::{TransactionInfo, Version};

/// What the route of one transaction allows on a dataset that takes no writes.
const TRANSACTION_METHODS: &str = "GET, HEAD";

/// The body of `POST .../transactions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Begin {
    #[serde(default = "main")]
    branch: String,
}

fn main() -> String {
    "main".into()
}

/// The body of `POST .../transactions/ID/commit`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CommitBody {
    message: Option<String>,
}

/// A JSON body of type `T`; none at all is `T`'s default.
fn optional_body<T: serde::de::DeserializeOwned + Default>(
    headers: &HeaderMap,
    body: &[u8],
    expected: &str,
) -> Result<T, ApiError> {
    match body.is_empty() {
        true => Ok(T::default()),
        false => json_body(headers, body, expected),
    }
}

impl Default for Begin {
    fn default() -> Self {
        Begin { branch: main() }
    }
}

fn described(info: &TransactionInfo) -> serde_json::Value {
    json!({
        "id": info.id,
        "branch": info.branch,
        "base_snapshot": info.base_snapshot,
        "expires_at": rfc3339(info.expires_at),
        "writes": info.writes,
    })
}

/// 400 for `{ds}@ref`: a transaction's route names the dataset alone.
fn plain_name(ds: &str) -> Result<(), ApiError> {
    match ds.contains('@') {
        true => Err(ApiError::BadRequest(format!(
            "'{ds}' names a version; transactions are routes of the dataset (its branch is in the body)"
        ))),
        false => Ok(()),
    }
}

/// `POST /v1/datasets/{ds}/transactions` with `{"branch"}` (default
/// `main`): 201 with `id`, `branch`, `base_snapshot` and `expires_at`.
pub(super) async fn begin(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let dataset = repository(state.write_allowed(&ds, &caller, "")?)?;
    plain_name(&ds)?;
    let begin: Begin = optional_body(&headers, &body, r#"{"branch": "main"}"#)?;
    Version::parse(&format!("branch.{}", begin.branch)).map_err(ApiError::BadRequest)?;
    let info = dataset
        .begin_transaction(&begin.branch, state.transaction_times)
        .await?;
    tracing::info!(principal = %caller, dataset = ds, transaction = info.id, branch = info.branch, "transaction begun");
    let mut response = no_store((StatusCode::CREATED, axum::Json(described(&info))).into_response());
    let location = format!("/v1/datasets/{ds}/transactions/{}", info.id);
    if let Ok(value) = HeaderValue::from_str(&super::state::absolute(&state, &headers, &location)) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// `GET /v1/datasets/{ds}/transactions/{id}`: the transaction now (404
/// unknown, 410 expired, committed or aborted).
pub(super) async fn show(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    plain_name(&ds)?;
    let (dataset, _) = state.configured(&ds, &caller, Permission::Read)?;
    let info = repository(dataset)?.transaction_info(&id).await?;
    Ok(no_store(axum::Json(described(&info)).into_response()))
}

/// `POST /v1/datasets/{ds}/transactions/{id}/commit` with `{"message"}`:
/// 200 with `snapshot` and `branch`, or 409 naming the conflicts (the
/// transaction stays open).
pub(super) async fn commit(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let dataset = repository(state.write_allowed(&ds, &caller, "")?)?;
    plain_name(&ds)?;
    let given: CommitBody = optional_body(&headers, &body, r#"{"message": "..."}"#)?;
    let message = given.message.unwrap_or_else(|| format!("commit transaction {id}"));
    let author = caller.to_string();
    let committed = dataset
        .commit_transaction(&id, &message, &author, state.commit_attempts(), state.transaction_times)
        .await;
    let committed = match committed {
        Ok(committed) => committed,
        Err(e) => {
            tracing::warn!(principal = %caller, dataset = ds, transaction = id, error = %e, "a transaction's commit failed");
            return Err(e.into());
        }
    };
    tracing::info!(principal = %caller, dataset = ds, transaction = id, branch = committed.branch, snapshot = committed.snapshot, message, "transaction committed");
    let answer = json!({"snapshot": committed.snapshot, "branch": committed.branch, "transaction": id});
    Ok(no_store(axum::Json(answer).into_response()))
}

/// `DELETE /v1/datasets/{ds}/transactions/{id}`: abort; nothing of it is
/// ever committed.
pub(super) async fn abort(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let dataset = repository(state.write_allowed(&ds, &caller, TRANSACTION_METHODS)?)?;
    plain_name(&ds)?;
    dataset.abort_transaction(&id, state.transaction_times).await?;
    tracing::info!(principal = %caller, dataset = ds, transaction = id, "transaction aborted");
    Ok(no_store(StatusCode::NO_CONTENT.into_response()))
}
