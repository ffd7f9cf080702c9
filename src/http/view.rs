//! The Zarr v2 view (`GET|HEAD /v1/datasets/{ds}/v2/{key}`) and prefix
//! listings of the view and of the passthrough (`.../zarr/{prefix}/`): an
//! HTML page of links by default (what fsspec's HTTP filesystem and
//! browsers read), `{"prefixes": [...], "keys": [...]}` for
//! `Accept: application/json`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, Method};
use axum::response::Response;
use bytes::Bytes;
use serde_json::json;

use super::conditional::{respond, strong_etag};
use super::format::accept_items;
use super::problem::ApiError;
use super::respond::{Answer, Checked};
use super::AppState;
use crate::encode::xml::escape;
use crate::engine::{Listing, ViewValue};
use crate::identity::Caller;
use crate::storage::validate_key;

/// `/v1/datasets/{ds}/v2` and `/v1/datasets/{ds}/v2/`: the root listing.
pub(super) async fn v2_root(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(&ds, &caller).await?;
    let listing = dataset.v2_view_list("").await?;
    Ok(listing_response(
        &listing,
        &format!("/v1/datasets/{ds}/v2/"),
        &method,
        &headers,
    ))
}

/// `/v1/datasets/{ds}/v2/{key}`: a value of the view, or with a trailing
/// `/` the listing of that prefix.
pub(super) async fn v2_get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, key)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(&ds, &caller).await?;
    if let Some(prefix) = key.strip_suffix('/') {
        validate_key(prefix).map_err(ApiError::BadRequest)?;
        let listing = dataset.v2_view_list(prefix).await?;
        let base = format!("/v1/datasets/{ds}/v2/{prefix}/");
        return Ok(listing_response(&listing, &base, &method, &headers));
    }
    validate_key(&key).map_err(ApiError::BadRequest)?;
    let chunk = match dataset.v2_view_get(&key).await? {
        ViewValue::Metadata(doc) => {
            let body = Bytes::from(doc.to_string());
            let etag = strong_etag(&[&body]);
            return Ok(respond(body, "application/json", &etag, &method, &headers));
        }
        ViewValue::Chunk(chunk) => chunk,
    };
    let described = Answer::new(&state, dataset, "v2-view", "application/octet-stream")
        .key(&key)
        .plan(&chunk.plan)
        .bytes(chunk.bytes())
        .length(chunk.length());
    match described.check(&method, &headers).await? {
        Checked::Answered(response) => Ok(response),
        Checked::Read(ready) => {
            let data = dataset.read_view_chunk(&chunk, Some(ready.versions())).await?;
            Ok(ready.whole(data))
        }
    }
}

/// `/v1/datasets/{ds}/zarr/`: the passthrough's root listing.
pub(super) async fn zarr_root(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    zarr_listing(&state, &caller, &ds, "", &method, &headers).await
}

/// The keys and sub-prefixes of the store directly under `prefix`.
pub(super) async fn zarr_listing(
    state: &AppState,
    caller: &Caller,
    ds: &str,
    prefix: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(ds, caller).await?;
    validate_key(prefix).map_err(ApiError::BadRequest)?;
    let (prefixes, keys) = dataset.list_keys(prefix).await?;
    if !prefix.is_empty() && prefixes.is_empty() && keys.is_empty() {
        return Err(ApiError::NotFound(format!("no prefix '{prefix}/' in dataset '{ds}'")));
    }
    let listing = Listing { prefixes, keys };
    let base = if prefix.is_empty() {
        format!("/v1/datasets/{ds}/zarr/")
    } else {
        format!("/v1/datasets/{ds}/zarr/{prefix}/")
    };
    Ok(listing_response(&listing, &base, method, headers))
}

/// Whether the client prefers JSON to HTML.
fn wants_json(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let quality = |wanted: &[&str]| {
        accept_items(accept)
            .filter(|(media, _)| wanted.contains(&media.as_str()))
            .map(|(_, q)| q)
            .fold(0.0f32, f32::max)
    };
    quality(&["application/json"]) > quality(&["text/html", "*/*", "text/*"])
}

/// The listing as JSON or as an HTML page of links under `base` (the
/// listing's own path, ending in `/`).
fn listing_response(listing: &Listing, base: &str, method: &Method, headers: &HeaderMap) -> Response {
    let (body, content_type) = if wants_json(headers) {
        let doc = json!({"prefixes": listing.prefixes, "keys": listing.keys});
        (doc.to_string(), "application/json")
    } else {
        (html_listing(listing, base), "text/html; charset=utf-8")
    };
    let body = Bytes::from(body);
    let etag = strong_etag(&[&body]);
    let mut response = respond(body, content_type, &etag, method, headers);
    response
        .headers_mut()
        .insert(header::VARY, header::HeaderValue::from_static("accept"));
    response
}

/// Links relative to `base`: sub-prefixes end in `/`, keys do not.
fn html_listing(listing: &Listing, base: &str) -> String {
    let title = escape(base);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<ul>\n"
    );
    for prefix in &listing.prefixes {
        let name = escape(prefix);
        out.push_str(&format!("<li><a href=\"{name}/\">{name}/</a></li>\n"));
    }
    for key in &listing.keys {
        let name = escape(key);
        out.push_str(&format!("<li><a href=\"{name}\">{name}</a></li>\n"));
    }
    out.push_str("</ul>\n</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_only_when_preferred() {
        let with = |accept: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, accept.parse().unwrap());
            wants_json(&h)
        };
        assert!(with("application/json"));
        assert!(!with("text/html,application/json;q=0.9"));
        assert!(!with("*/*"));
        assert!(!wants_json(&HeaderMap::new()));
    }

    #[test]
    fn html_links_are_relative_and_escaped() {
        let listing = Listing {
            prefixes: vec!["a".into()],
            keys: vec!["zarr.json".into(), "x<y".into()],
        };
        let html = html_listing(&listing, "/v1/datasets/d/zarr/");
        assert!(html.contains("<a href=\"a/\">a/</a>"));
        assert!(html.contains("<a href=\"zarr.json\">"));
        assert!(html.contains("x&lt;y") && !html.contains("x<y"));
    }
}
