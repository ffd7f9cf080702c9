//! `/v1/datasets` and node documents.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, Method};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{json, Value};

use super::conditional::{respond, strong_etag};
use super::format::accept_items;
use super::problem::ApiError;
use super::AppState;
use crate::engine::{Dataset, Node, NodeMetadata};
use crate::identity::Caller;

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
    caller: Caller,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    require_json(&headers)?;
    let list: Vec<Value> = state
        .readable_datasets(&caller)
        .map(|d| json!({"name": &*d.name, "description": d.description}))
        .collect();
    Ok(json_response(
        Bytes::from(json!({ "datasets": list }).to_string()),
        &headers,
    ))
}

/// A JSON document with a strong ETag over its bytes; 304 when
/// `If-None-Match` names it.
pub(super) fn json_response(body: Bytes, headers: &HeaderMap) -> Response {
    let etag = strong_etag(&[&body]);
    respond(body, "application/json", &etag, &Method::GET, headers)
}

/// `GET /v1/datasets/{ds}/nodes`
pub(super) async fn root_node(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    document(&state, &caller, &ds, "", &headers).await
}

/// `GET /v1/datasets/{ds}/nodes/{path}`
pub(super) async fn node(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    document(&state, &caller, &ds, &path, &headers).await
}

/// The node document, rendered once per cached node.
async fn document(
    state: &AppState,
    caller: &Caller,
    ds: &str,
    path: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(ds, caller).await?;
    require_json(headers)?;
    let body = document_bytes(dataset, path).await?;
    Ok(json_response(body, headers))
}

/// The JSON node document of `path`, rendered once per cached node.
pub(super) async fn document_bytes(dataset: &Dataset, path: &str) -> Result<Bytes, ApiError> {
    let node = dataset.node(path).await?;
    let body = node
        .rendered
        .get_or_try_init(|| async {
            let doc = match &node.metadata {
                Some(meta @ NodeMetadata::Array { parsed, .. }) => {
                    array_document(&node, meta, parsed.as_ref().map(|m| &**m))
                }
                _ => group_document(dataset, &node).await?,
            };
            Ok::<_, ApiError>(Bytes::from(doc.to_string()))
        })
        .await?
        .clone();
    Ok(body)
}

fn display_path(path: &str) -> String {
    format!("/{path}")
}

fn array_document(
    node: &Node,
    meta: &NodeMetadata,
    parsed: Result<&crate::engine::ArrayMetadata, &crate::engine::Error>,
) -> Value {
    let raw = meta.raw();
    let v2 = meta.zarr_format() == 2;
    let rank = raw["shape"].as_array().map_or(0, Vec::len);
    let chunk_shape = match parsed {
        Ok(m) => m.chunk_shape_document(),
        Err(_) if v2 => raw.get("chunks").cloned().unwrap_or(Value::Null),
        Err(_) => raw
            .pointer("/chunk_grid/configuration/chunk_shape")
            .cloned()
            .unwrap_or(Value::Null),
    };
    let (data_type, codecs) = if v2 {
        let data_type = match parsed {
            Ok(m) => m.data_type.to_json(),
            Err(_) => crate::engine::v2_data_type_document(raw)
                .unwrap_or_else(|| raw.get("dtype").cloned().unwrap_or(Value::Null)),
        };
        (data_type, crate::engine::v2_codecs_document(raw))
    } else {
        let codecs = raw.get("codecs").cloned().unwrap_or_else(|| json!([]));
        (raw["data_type"].clone(), codecs)
    };
    let (read_chunk_shape, grid_shape) = match parsed {
        Ok(m) => (m.read_chunk_shape_document(), json!(m.chunk_grid.grid_shape(&m.shape))),
        Err(_) => (Value::Null, Value::Null),
    };
    let dimension_names = match (parsed, raw.get("dimension_names")) {
        (Ok(m), _) => json!(m.dimension_names.clone().unwrap_or_else(|| vec![None; rank])),
        // Unreadable: as written, if it is a list at all, else xarray's
        // `_ARRAY_DIMENSIONS` when it names every dimension.
        (Err(_), Some(Value::Array(names))) => Value::Array(names.clone()),
        (Err(_), _) => match meta.attributes().get("_ARRAY_DIMENSIONS") {
            Some(Value::Array(names)) if names.len() == rank && names.iter().all(Value::is_string) => {
                Value::Array(names.clone())
            }
            _ => Value::Array(vec![Value::Null; rank]),
        },
    };
    let mut doc = json!({
        "path": display_path(&node.path),
        "node_type": "array",
        "zarr_format": meta.zarr_format(),
        "shape": raw["shape"],
        "data_type": data_type,
        "fill_value": raw["fill_value"],
        "chunk_shape": chunk_shape,
        "read_chunk_shape": read_chunk_shape,
        "chunk_grid_shape": grid_shape,
        "dimension_names": dimension_names,
        "attributes": meta.attributes(),
        "codecs": codecs,
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
    let meta = node.metadata.as_ref();
    let raw = meta.map(NodeMetadata::raw);
    Ok(json!({
        "path": display_path(&node.path),
        "node_type": "group",
        "zarr_format": meta.map_or(3, NodeMetadata::zarr_format),
        "attributes": meta.map_or_else(|| json!({}), |m| m.attributes().clone()),
        "implicit": raw.is_none(),
        "children": children,
        "metadata": raw.cloned().unwrap_or(Value::Null),
    }))
}
