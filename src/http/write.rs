//! Writes to Zarr stores (api.md 4.2): region `PUT`s. The handler checks
//! the dataset takes writes and the caller's `write` grant, plans the
//! region as a read of it would be planned, receives the body whole and
//! checks it against the region, checks `If-Match` against the region's
//! binary ETag, then hands the elements to the engine. A write in a
//! transaction takes the transaction's lease only once its body is in (and
//! plans the region again as the transaction then holds it): a slow upload
//! keeps no other request of the transaction waiting.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::conditional::if_match;
use super::data::binary_etag;
use super::problem::ApiError;
use super::query::{unknown_parameter, Query};
use super::state::Hold;
use super::upload::{self, Kind, Region};
use super::AppState;
use crate::engine::{Commit, Dataset, Error, RegionWrite};
use crate::identity::Caller;
use crate::storage::TransactionInfo;

/// What a data route allows on a dataset that takes no writes.
const READ_METHODS: &str = "GET, HEAD, POST";

/// The query parameters a region write takes.
const WRITE_PARAMETERS: [&str; 4] = ["select", "sel", "sel_method", "transaction"];

/// The transaction a write's query names (`transaction=ID`), if any.
pub(super) fn transaction_of(query: Option<&str>) -> Result<Option<String>, ApiError> {
    let mut found = None;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if key == "transaction" {
            if found.is_some() {
                return Err(ApiError::BadRequest(
                    "query parameter 'transaction' given more than once".into(),
                ));
            }
            found = Some(value.into_owned());
        }
    }
    Ok(found)
}

/// `query` without its `transaction` parameter.
fn without_transaction(query: Option<&str>) -> String {
    let kept = url::form_urlencoded::parse(query.unwrap_or("").as_bytes()).filter(|(k, _)| k != "transaction");
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(kept)
        .finish()
}

/// Whether a data route's query asks for an append (`append=DIM`).
pub(super) fn appends(query: Option<&str>) -> bool {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes()).any(|(k, _)| k == "append")
}

/// `POST /v1/datasets/{ds}/data/{path}?append=DIM`: grow the array along
/// `DIM` (a name or an index) by the body's length there, and write it.
pub(super) async fn append(
    state: &AppState,
    caller: &Caller,
    ds: &str,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let transaction = transaction_of(query)?;
    let view = state
        .write_target(ds, caller, READ_METHODS, transaction.as_deref(), Hold::View)
        .await?;
    let mut dim = None;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match key.as_ref() {
            "append" if dim.is_none() => dim = Some(value.into_owned()),
            "append" => {
                return Err(ApiError::BadRequest(
                    "query parameter 'append' given more than once".into(),
                ))
            }
            "transaction" => {}
            other => return Err(unknown_parameter(other, &["append", "transaction"])),
        }
    }
    let kind = Kind::of(headers)?;
    let named = dim.as_deref().unwrap_or("");
    let along = |node: &crate::engine::Node| {
        let meta = node.array()?;
        dimension(named, &meta.shape, meta.dimension_names.as_deref())
    };
    let mut node = view.node(path).await?;
    let mut dim = along(&node)?;
    let upload = upload::receive(body, headers, &state.uploads).await?;
    // A transaction is held from here: the array as it has it now.
    let dataset = match state.held(ds, caller, READ_METHODS, transaction.as_deref()).await? {
        None => view,
        Some(held) => {
            node = held.node(path).await?;
            dim = along(&node)?;
            held
        }
    };
    let meta = node.array()?;
    let body_bytes = upload.len();
    upload::check_json_size(kind, &upload, &state.uploads)?;
    let count = upload::free_length(kind, &upload, &meta.shape, dim, meta.data_type)?;
    let mut shape = meta.shape.clone();
    shape[dim] = count;
    let region = Region {
        shape: &shape,
        rank_shape: &shape,
        data_type: meta.data_type,
    };
    let elements = upload::elements(kind, upload, &region, &state.uploads).await?;
    let appended = match dataset.append(path, dim, count, elements, &state.write_options).await {
        Ok(appended) => appended,
        Err(e) => {
            tracing::warn!(principal = %caller, dataset = ds, path, error = %e, "append failed");
            return Err(e.into());
        }
    };
    let outcome = &appended.outcome;
    state
        .metrics
        .write_done(ds, body_bytes, outcome.objects_written + 1, outcome.objects_deleted);
    tracing::info!(
        principal = %caller,
        dataset = ds,
        path,
        dimension = dim,
        offset = appended.offset,
        count,
        bytes = body_bytes,
        objects_written = outcome.objects_written + 1,
        "append"
    );
    let kept = keep(state, &dataset, caller, headers, || {
        format!("append {count} along dimension {dim} of '{path}'")
    })
    .await?;
    let mut answer = json!({
        "offset": appended.offset,
        "count": count,
        "dimension": dim,
        "shape": appended.shape,
        "chunks_written": outcome.chunks_written,
        "chunks_deleted": outcome.chunks_deleted,
        "objects_written": outcome.objects_written + 1,
    });
    add_kept(&mut answer, kept.as_ref());
    Ok(no_store((StatusCode::OK, axum::Json(answer)).into_response()))
}

/// The dimension `given` names: an index (negative from the end) or one
/// of the array's dimension names.
fn dimension(given: &str, shape: &[u64], names: Option<&[Option<String>]>) -> Result<usize, ApiError> {
    let rank = shape.len() as i64;
    if let Ok(i) = given.parse::<i64>() {
        let d = if i < 0 { i + rank } else { i };
        if (0..rank).contains(&d) {
            return Ok(d as usize);
        }
        return Err(ApiError::BadRequest(format!(
            "append={given}: the array has {rank} dimensions"
        )));
    }
    names
        .and_then(|names| names.iter().position(|n| n.as_deref() == Some(given)))
        .ok_or_else(|| {
            let known: Vec<&str> = names.unwrap_or_default().iter().flatten().map(String::as_str).collect();
            ApiError::BadRequest(format!(
                "append={given}: no such dimension (an index, or one of {known:?})"
            ))
        })
}

/// What a write to an Icechunk repository left: a commit on its branch,
/// or the write kept in a transaction.
pub(super) enum Kept {
    Committed(Commit),
    Saved(TransactionInfo),
}

impl Kept {
    /// The version that holds the write (a snapshot or `transaction.ID`).
    fn version(&self) -> String {
        match self {
            Kept::Committed(c) => c.snapshot.clone(),
            Kept::Saved(t) => format!("transaction.{}", t.id),
        }
    }
}

/// Keep a write to an Icechunk repository: in its transaction, or as one
/// commit on its branch with the message `X-Commit-Message` gives (else
/// `default`'s) and the caller as author; `None` for a dataset that is not
/// a repository's.
async fn keep(
    state: &AppState,
    dataset: &Dataset,
    caller: &Caller,
    headers: &HeaderMap,
    default: impl FnOnce() -> String,
) -> Result<Option<Kept>, ApiError> {
    if let Some(id) = dataset.transaction() {
        let saved = match dataset.save_transaction(state.transaction_times).await {
            Ok(saved) => saved,
            Err(e) => {
                tracing::warn!(principal = %caller, dataset = %dataset.name, transaction = id, error = %e, "a transaction's write was not kept");
                return Err(e.into());
            }
        };
        tracing::info!(principal = %caller, dataset = %dataset.name, transaction = id, writes = saved.writes, "kept in the transaction");
        return Ok(Some(Kept::Saved(saved)));
    }
    if dataset.branch().is_none() {
        return Ok(None);
    }
    let message = match headers.get("x-commit-message") {
        None => default(),
        Some(value) => String::from_utf8(value.as_bytes().to_vec())
            .map_err(|_| ApiError::BadRequest("X-Commit-Message is not UTF-8 text; nothing was committed".into()))?,
    };
    let author = caller.to_string();
    let committed = match dataset.commit(&message, &author, state.commit_attempts()).await {
        Ok(committed) => committed,
        Err(e) => {
            tracing::warn!(principal = %caller, dataset = %dataset.name, error = %e, "commit failed");
            return Err(e.into());
        }
    };
    tracing::info!(
        principal = %caller,
        dataset = %dataset.name,
        branch = committed.branch,
        snapshot = committed.snapshot,
        message,
        "commit"
    );
    Ok(Some(Kept::Committed(committed)))
}

/// Add what keeps a write to a JSON answer: a commit's `snapshot` and
/// `branch`; a transaction's `transaction`, `branch` and `expires_at`.
pub(super) fn add_kept(answer: &mut serde_json::Value, kept: Option<&Kept>) {
    let (Some(kept), Some(fields)) = (kept, answer.as_object_mut()) else {
        return;
    };
    match kept {
        Kept::Committed(c) => {
            fields.insert("snapshot".into(), c.snapshot.clone().into());
            fields.insert("branch".into(), c.branch.clone().into());
        }
        Kept::Saved(t) => {
            fields.insert("transaction".into(), t.id.clone().into());
            fields.insert("branch".into(), t.branch.clone().into());
            fields.insert("expires_at".into(), rfc3339(t.expires_at).into());
        }
    }
}

/// A time as answers write it (RFC 3339, seconds, UTC).
pub(super) fn rfc3339(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

pub(super) fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.extensions_mut().insert(super::Uncompressed);
    response
}

/// The region's binary ETag now, and the versions of its objects; `None`
/// while other writers keep changing them (each try reads the versions
/// of all of them).
async fn region_etag(
    state: &AppState,
    dataset: &Dataset,
    plan: &crate::engine::ReadPlan,
) -> Result<Option<(String, crate::engine::Versions)>, ApiError> {
    for _ in 0..4 {
        match binary_etag(state, dataset, plan).await {
            Ok(now) => return Ok(Some(now)),
            Err(ApiError::Engine(Error::Store(crate::storage::StoreError::Changed(_)))) => {
                tokio::time::sleep(std::time::Duration::from_millis(rand::random_range(1..20))).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// What a node route allows on a dataset that takes no writes.
const NODE_METHODS: &str = "GET, HEAD";

/// 415 unless the body is JSON (`application/json`, or `merge` also
/// `application/merge-patch+json`).
pub(super) fn require_json_body(headers: &HeaderMap, merge: bool) -> Result<(), ApiError> {
    let given = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    match given.as_deref() {
        Some("application/json") => Ok(()),
        Some("application/merge-patch+json") if merge => Ok(()),
        other => Err(ApiError::Rejected(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "the body must be {}, not {}",
                if merge {
                    "application/merge-patch+json"
                } else {
                    "application/json"
                },
                other.unwrap_or("without Content-Type")
            ),
        )),
    }
}

/// 412 unless `If-Match` (when sent) names the node document's ETag now.
async fn node_matches(dataset: &Dataset, path: &str, headers: &HeaderMap) -> Result<(), ApiError> {
    if !headers.contains_key(header::IF_MATCH) {
        return Ok(());
    }
    dataset.fresh_node(path).await?;
    let body = super::nodes::document_bytes(dataset, path).await?;
    let now = super::conditional::strong_etag(&[&body]);
    match if_match(headers, &now) {
        true => Ok(()),
        false => Err(ApiError::Engine(Error::PreconditionFailed(format!(
            "the node's ETag is now {now}, not what If-Match names; nothing was changed"
        )))),
    }
}

/// The node document as `GET .../nodes/{path}` sends it, with its ETag;
/// after a commit or in a transaction, with what [`add_kept`] adds (the
/// ETag stays the document's).
async fn node_answer(
    dataset: &Dataset,
    path: &str,
    status: StatusCode,
    kept: Option<&Kept>,
) -> Result<Response, ApiError> {
    let mut body = super::nodes::document_bytes(dataset, path).await?;
    let etag = super::conditional::strong_etag(&[&body]);
    if kept.is_some() {
        let mut document: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| ApiError::Engine(Error::Internal(e.to_string())))?;
        add_kept(&mut document, kept);
        body = serde_json::to_vec(&document)
            .map_err(|e| ApiError::Engine(Error::Internal(e.to_string())))?
            .into();
    }
    let mut response = no_store((status, [(header::CONTENT_TYPE, "application/json")], body).into_response());
    if let Ok(value) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(response)
}

/// The node a node route names: `/nodes/{path}`, or the root (`/nodes`).
#[derive(serde::Deserialize)]
pub(super) struct NodeAt {
    ds: String,
    #[serde(default)]
    path: String,
}

/// `PUT /v1/datasets/{ds}/nodes/{path}` (or `/nodes`, the root): create an
/// array or a group.
pub(super) async fn create_node(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(NodeAt { ds, path }): Path<NodeAt>,
    query: RawQuery,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let transaction = transaction_of(query.0.as_deref())?;
    let dataset = state
        .writable(&ds, &caller, NODE_METHODS, transaction.as_deref())
        .await?;
    require_json_body(&headers, false)?;
    let node = dataset.create_node(&path, &body).await?;
    state.metrics.write_done(&ds, body.len() as u64, 1, 0);
    tracing::info!(principal = %caller, dataset = ds, path = node.path, "node created");
    let kept = keep(&state, &dataset, &caller, &headers, || {
        format!("create node '{}'", node.path)
    })
    .await?;
    node_answer(&dataset, &path, StatusCode::CREATED, kept.as_ref()).await
}

/// `PATCH /v1/datasets/{ds}/nodes/{path}` (or `/nodes`): a merge patch of
/// `attributes` and `shape`.
pub(super) async fn patch_node(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(NodeAt { ds, path }): Path<NodeAt>,
    query: RawQuery,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let transaction = transaction_of(query.0.as_deref())?;
    let dataset = state
        .writable(&ds, &caller, NODE_METHODS, transaction.as_deref())
        .await?;
    require_json_body(&headers, true)?;
    let patch: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("the body is not valid JSON: {e}")))?;
    node_matches(&dataset, &path, &headers).await?;
    dataset.patch_node(&path, &patch, &state.write_options).await?;
    state.metrics.write_done(&ds, body.len() as u64, 1, 0);
    tracing::info!(principal = %caller, dataset = ds, path, patch = %patch, "node patched");
    let kept = keep(&state, &dataset, &caller, &headers, || format!("patch node '{path}'")).await?;
    node_answer(&dataset, &path, StatusCode::OK, kept.as_ref()).await
}

/// `DELETE /v1/datasets/{ds}/nodes/{path}`: the node and everything under
/// it (`/nodes`, the root: 400, after the dataset's write checks).
pub(super) async fn delete_node(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(NodeAt { ds, path }): Path<NodeAt>,
    query: RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let transaction = transaction_of(query.0.as_deref())?;
    let dataset = state
        .writable(&ds, &caller, NODE_METHODS, transaction.as_deref())
        .await?;
    node_matches(&dataset, &path, &headers).await?;
    let removed = dataset.delete_node(&path).await?;
    state.metrics.write_done(&ds, 0, 0, removed);
    tracing::info!(principal = %caller, dataset = ds, path, objects_deleted = removed, "node deleted");
    match keep(&state, &dataset, &caller, &headers, || format!("delete node '{path}'")).await? {
        None => Ok(no_store(StatusCode::NO_CONTENT.into_response())),
        Some(kept) => {
            let mut answer = json!({});
            add_kept(&mut answer, Some(&kept));
            Ok(no_store((StatusCode::OK, axum::Json(answer)).into_response()))
        }
    }
}

/// `PUT /v1/datasets/{ds}/data`: a write to the root array.
pub(super) async fn region_root(
    state: State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    query: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    write_region(&state, &caller, &ds, "", query.0.as_deref(), &headers, body).await
}

/// `PUT /v1/datasets/{ds}/data/{path}?select=SEL`: write a region.
pub(super) async fn region(
    state: State<Arc<AppState>>,
    caller: Caller,
    Path((ds, path)): Path<(String, String)>,
    query: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    write_region(&state, &caller, &ds, &path, query.0.as_deref(), &headers, body).await
}

async fn write_region(
    state: &AppState,
    caller: &Caller,
    ds: &str,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let transaction = transaction_of(query)?;
    let view = state
        .write_target(ds, caller, READ_METHODS, transaction.as_deref(), Hold::View)
        .await?;
    for (key, _) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if !WRITE_PARAMETERS.contains(&key.as_ref()) {
            return Err(unknown_parameter(&key, &WRITE_PARAMETERS));
        }
    }
    let query = Query::from_query_string(Some(&without_transaction(query)))?;
    let kind = Kind::of(headers)?;
    let mut plan = view.plan_query(path, &query.read).await?;
    let mut write = RegionWrite::of(&plan)?;
    let upload = upload::receive(body, headers, &state.uploads).await?;
    // A transaction is held from here: the region as it has it now.
    let dataset = match state.held(ds, caller, READ_METHODS, transaction.as_deref()).await? {
        None => view,
        Some(held) => {
            plan = held.plan_query(path, &query.read).await?;
            write = RegionWrite::of(&plan)?;
            held
        }
    };
    let body_bytes = upload.len();
    let (shape, rank_shape) = (plan.output_shape(), write.region_shape());
    let region = Region {
        shape: &shape,
        rank_shape: &rank_shape,
        data_type: write.data_type(),
    };
    let elements = upload::elements(kind, upload, &region, &state.uploads).await?;
    let mut options = state.write_options.clone();
    if headers.contains_key(header::IF_MATCH) {
        let (now, versions) = region_etag(state, &dataset, &plan)
            .await?
            .unwrap_or_else(|| ("\"changing\"".into(), Default::default()));
        if !if_match(headers, &now) {
            return Err(ApiError::Engine(Error::PreconditionFailed(format!(
                "the region's ETag is now {now}, not what If-Match names; nothing was written"
            ))));
        }
        // Each object is then written only at the version checked here.
        options.expected = Some(std::sync::Arc::new(versions));
    }
    let outcome = dataset.write_region(&write, elements, &options).await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            tracing::warn!(principal = %caller, dataset = ds, path, error = %e, "write failed");
            return Err(e.into());
        }
    };
    state
        .metrics
        .write_done(ds, body_bytes, outcome.objects_written, outcome.objects_deleted);
    tracing::info!(
        principal = %caller,
        dataset = ds,
        path,
        selection = %plan.selection_key(),
        bytes = body_bytes,
        objects_written = outcome.objects_written,
        objects_deleted = outcome.objects_deleted,
        "write"
    );
    let selection = plan.selection_key();
    let kept = keep(state, &dataset, caller, headers, || {
        format!("write '{path}' at {selection}")
    })
    .await?;
    let etag = match &kept {
        None => region_etag(state, &dataset, &plan).await?.map(|(etag, _)| etag),
        // The region as the new snapshot (or the transaction) holds it.
        Some(kept) => {
            let view = state
                .write_allowed(ds, caller, READ_METHODS)?
                .at(Some(&kept.version()))
                .await?;
            let plan = view.plan_query(path, &query.read).await?;
            region_etag(state, &view, &plan).await?.map(|(etag, _)| etag)
        }
    };
    let mut answer = json!({
        "etag": etag,
        "chunks_written": outcome.chunks_written,
        "chunks_deleted": outcome.chunks_deleted,
        "objects_written": outcome.objects_written,
    });
    add_kept(&mut answer, kept.as_ref());
    // The ETag is the region's binary one: no coding may be added to it.
    let mut response = no_store((StatusCode::OK, axum::Json(answer)).into_response());
    if let Some(value) = etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
        response.headers_mut().insert(header::ETAG, value);
    }
    Ok(response)
}
