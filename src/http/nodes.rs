//! `/v1/datasets` and node documents.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde_json::{json, Value};

use super::format::accept_items;
use super::problem::ApiError;
use super::AppState;
use crate::engine::{Dataset, Node, NodeMetadata};

/// 406 unless `Accept` allows JSON.
pub(super) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let ok = accept_items(accept)
        .any(|(media, q)| q > 0.0 && matches!(media.as_str(), "application/json" | "application/*" | "*/*" | ""));
    if ok {
        Ok(())
    } else {
        Err(ApiError::NotAcceptable(format!(
            "Accept '{accept}' does not allow application/json"
        )))
    }
}

/// `GET /v1/datasets`
pub(super) async fn list_datasets(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    require_json(&headers)?;
    let list: Vec<Value> = state
        .datasets
        .values()
        .map(|d| json!({"name": &*d.dataset.name, "description": d.dataset.description}))
        .collect();
    Ok(Json(json!({ "datasets": list })))
}

/// `GET /v1/datasets/{ds}/nodes`
pub(super) async fn root_node(
    State(state): State<Arc<AppState>>,
    Path(ds): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    document(&state, &ds, "", &headers).await
}

/// `GET /v1/datasets/{ds}/nodes/{path}`
pub(super) async fn node(
    State(state): State<Arc<AppState>>,
    Path((ds, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    document(&state, &ds, &path, &headers).await
}

/// The node document, rendered once per cached node.
async fn document(state: &AppState, ds: &str, path: &str, headers: &HeaderMap) -> Result<Response, ApiError> {
    let dataset = state.dataset(ds, headers)?;
    require_json(headers)?;
    let node = dataset.node(path).await?;
    let body = node
        .rendered
        .get_or_try_init(|| async {
            let doc = match &node.metadata {
                Some(NodeMetadata::Array { raw, parsed }) => array_document(&node, raw, parsed.as_ref().map(|m| &**m)),
                _ => group_document(dataset, &node).await?,
            };
            Ok::<_, ApiError>(Bytes::from(doc.to_string()))
        })
        .await?
        .clone();
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

fn display_path(path: &str) -> String {
    format!("/{path}")
}

fn array_document(
    node: &Node,
    raw: &Value,
    parsed: Result<&crate::engine::ArrayMetadata, &crate::engine::Error>,
) -> Value {
    let rank = raw["shape"].as_array().map_or(0, Vec::len);
    let chunk_shape = match parsed {
        Ok(m) => json!(m.chunk_grid.chunk_shape),
        Err(_) => raw
            .pointer("/chunk_grid/configuration/chunk_shape")
            .cloned()
            .unwrap_or(Value::Null),
    };
    let (read_chunk_shape, grid_shape) = match parsed {
        Ok(m) => (
            json!(m.codecs.read_chunk_shape()),
            json!(m.chunk_grid.grid_shape(&m.shape)),
        ),
        Err(_) => (Value::Null, Value::Null),
    };
    let dimension_names = match (parsed, raw.get("dimension_names")) {
        (Ok(m), _) => json!(m.dimension_names.clone().unwrap_or_else(|| vec![None; rank])),
        // Unreadable: as written, if it is a list at all.
        (Err(_), Some(Value::Array(names))) => Value::Array(names.clone()),
        (Err(_), _) => Value::Array(vec![Value::Null; rank]),
    };
    let mut doc = json!({
        "path": display_path(&node.path),
        "node_type": "array",
        "zarr_format": 3,
        "shape": raw["shape"],
        "data_type": raw["data_type"],
        "fill_value": raw["fill_value"],
        "chunk_shape": chunk_shape,
        "read_chunk_shape": read_chunk_shape,
        "chunk_grid_shape": grid_shape,
        "dimension_names": dimension_names,
        "attributes": raw.get("attributes").cloned().unwrap_or_else(|| json!({})),
        "codecs": raw.get("codecs").cloned().unwrap_or_else(|| json!([])),
        "readable": parsed.is_ok(),
        "metadata": raw,
    });
    if let Err(reason) = parsed {
        doc["unreadable_reason"] = json!(reason.to_string());
    }
    doc
}

async fn group_document(dataset: &Dataset, node: &Node) -> Result<Value, ApiError> {
    let children: Vec<Value> = dataset
        .children(&node.path)
        .await?
        .into_iter()
        .map(|c| json!({"name": c.name, "path": display_path(&c.path), "node_type": c.node_type}))
        .collect();
    let raw = node.metadata.as_ref().map(NodeMetadata::raw);
    Ok(json!({
        "path": display_path(&node.path),
        "node_type": "group",
        "zarr_format": 3,
        "attributes": raw.and_then(|r| r.get("attributes")).cloned().unwrap_or_else(|| json!({})),
        "implicit": raw.is_none(),
        "children": children,
        "metadata": raw.cloned().unwrap_or(Value::Null),
    }))
}
