//! The refs and history of Icechunk repositories (api.md 3.7, 4.3): the
//! branches and tags with their snapshots; branches and tags made, a
//! branch reset (on condition of the snapshot it is at), removed; and the
//! snapshots a ref descends from, newest first. Changes need the dataset
//! writable and the caller's `write` grant, as every write does.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};

use super::conditional::if_match;
use super::nodes::{json_response, require_json};
use super::problem::ApiError;
use super::write::{no_store, require_json_body};
use super::AppState;
use crate::engine::Dataset;
use crate::identity::{Caller, Permission};
use crate::storage::{RefKind, Version};

/// What the ref routes allow on a dataset that takes no writes.
const REFS_METHODS: &str = "GET, HEAD";

/// The repository a ref route names: 400 for a dataset without versions.
pub(super) fn repository(dataset: &Dataset) -> Result<&Dataset, ApiError> {
    match dataset.store().is_versioned() {
        true => Ok(dataset),
        false => Err(ApiError::BadRequest(format!(
            "dataset '{}' is not an Icechunk repository: it has no refs",
            dataset.name
        ))),
    }
}

/// `GET /v1/datasets/{ds}/refs`: the branches and tags of an Icechunk
/// repository, each with the snapshot it names now.
pub(super) async fn refs(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // The repository's refs, whatever version the URL names.
    let (dataset, _) = state.configured(&ds, &caller, Permission::Read)?;
    require_json(&headers)?;
    let dataset = repository(dataset)?;
    let refs = dataset.store().refs().await?;
    let list = |refs: &[(String, String)]| -> Vec<Value> {
        refs.iter()
            .map(|(name, snapshot)| json!({"name": name, "snapshot": snapshot}))
            .collect()
    };
    let body = json!({"branches": list(&refs.branches), "tags": list(&refs.tags)});
    Ok(json_response(Bytes::from(body.to_string()), &headers))
}

/// The query of `GET .../history`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HistoryQuery {
    #[serde(rename = "ref")]
    at: Option<String>,
    limit: Option<usize>,
}

/// The most snapshots one history answer lists.
const MOST_HISTORY: usize = 10_000;

/// `GET /v1/datasets/{ds}/history?ref=REF&limit=N`: the snapshots `REF`
/// (default `branch.main`) descends from, itself first, each with `id`,
/// `parent`, `message`, `written_at` and `author`.
pub(super) async fn history(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    query: Result<Query<HistoryQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest(format!("history takes 'ref' and 'limit': {e}")))?;
    let (dataset, _) = state.configured(&ds, &caller, Permission::Read)?;
    require_json(&headers)?;
    let dataset = repository(dataset)?;
    let version = match query.at.as_deref() {
        None => Version::Branch("main".into()),
        Some(text) => Version::parse(text).map_err(ApiError::BadRequest)?,
    };
    let limit = match query.limit {
        Some(0) => return Err(ApiError::BadRequest("limit must be at least 1".into())),
        Some(n) => n.min(MOST_HISTORY),
        None => MOST_HISTORY,
    };
    let commits = dataset.store().history(&version, limit).await?;
    let list: Vec<Value> = commits
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "parent": c.parent,
                "message": c.message,
                "written_at": humantime::format_rfc3339_micros(c.written_at).to_string(),
                "author": c.author,
            })
        })
        .collect();
    let mut response = json_response(Bytes::from(Value::from(list).to_string()), &headers);
    // A branch's history grows with each commit.
    if !version.is_immutable() {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    Ok(response)
}

/// The body of a ref creation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewRef {
    name: String,
    snapshot: String,
}

/// The body of a branch reset.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResetTo {
    snapshot: String,
}

/// A JSON body of type `T`: 415 for another `Content-Type`, 400 naming
/// what is wrong.
pub(super) fn json_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
    expected: &str,
) -> Result<T, ApiError> {
    require_json_body(headers, false)?;
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("the body must be {expected}: {e}")))
}

fn ref_answer(status: StatusCode, name: &str, snapshot: &str) -> Response {
    no_store((status, axum::Json(json!({"name": name, "snapshot": snapshot}))).into_response())
}

/// The kind of ref a URL names: `branches` or `tags` (404 otherwise).
fn kind_of(plural: &str) -> Result<RefKind, ApiError> {
    match plural {
        "branches" => Ok(RefKind::Branch),
        "tags" => Ok(RefKind::Tag),
        other => Err(ApiError::NotFound(format!(
            "no refs of kind '{other}': refs are 'branches' or 'tags'"
        ))),
    }
}

/// `POST /v1/datasets/{ds}/refs/branches` and `.../refs/tags` with
/// `{"name", "snapshot"}`: 201, or 409 when the name exists.
pub(super) async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, plural)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let kind = kind_of(&plural)?;
    let dataset = repository(state.write_allowed(&ds, &caller, REFS_METHODS)?)?;
    let new: NewRef = json_body(&headers, &body, r#"{"name": "...", "snapshot": "<snapshot id>"}"#)?;
    dataset.store().create_ref(kind, &new.name, &new.snapshot).await?;
    tracing::info!(principal = %caller, dataset = ds, kind = ?kind, name = new.name, snapshot = new.snapshot, "ref created");
    Ok(ref_answer(StatusCode::CREATED, &new.name, &new.snapshot))
}

/// `PUT /v1/datasets/{ds}/refs/branches/{name}` with `{"snapshot"}`: the
/// branch moves there; with `If-Match: "<snapshot id>"` only while it is
/// at that snapshot (412 otherwise).
pub(super) async fn reset_branch(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    if kind_of(&plural)? == RefKind::Tag {
        return Err(ApiError::NotAllowed(
            format!("tag '{name}' never moves; make a new tag, or reset a branch"),
            "DELETE",
        ));
    }
    let dataset = repository(state.write_allowed(&ds, &caller, REFS_METHODS)?)?;
    let to: ResetTo = json_body(&headers, &body, r#"{"snapshot": "<snapshot id>"}"#)?;
    // The branch's ETag is its snapshot id, quoted.
    let holds = |current: &str| if_match(&headers, &format!("\"{current}\""));
    let condition: Option<&(dyn Fn(&str) -> bool + Sync)> = match headers.contains_key(header::IF_MATCH) {
        true => Some(&holds),
        false => None,
    };
    match dataset.store().reset_branch(&name, &to.snapshot, condition).await {
        Err(crate::storage::StoreError::Changed(_)) => {
            return Err(ApiError::Engine(crate::engine::Error::PreconditionFailed(format!(
                "branch '{name}' is not at the snapshot If-Match names; nothing changed"
            ))))
        }
        other => other?,
    }
    tracing::info!(principal = %caller, dataset = ds, branch = name, snapshot = to.snapshot, "branch reset");
    Ok(ref_answer(StatusCode::OK, &name, &to.snapshot))
}

/// `DELETE /v1/datasets/{ds}/refs/branches/{name}` (never `main`) and
/// `.../refs/tags/{name}`.
pub(super) async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, plural, name)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let kind = kind_of(&plural)?;
    let dataset = repository(state.write_allowed(&ds, &caller, REFS_METHODS)?)?;
    dataset.store().delete_ref(kind, &name).await?;
    tracing::info!(principal = %caller, dataset = ds, kind = ?kind, name, "ref deleted");
    Ok(no_store(StatusCode::NO_CONTENT.into_response()))
}
