//! Region reads: `GET|HEAD /v1/datasets/{ds}/data/{path}?select=&format=`.
//!
//! Small results are read whole, then answered with an ETag computed from
//! the versions of every key read. Results of several slabs are streamed:
//! the versions are gathered first (shard indexes, or HEADs of chunks), the
//! headers sent, then slab after slab is read pinned to those versions with
//! one slab read ahead. An error after the headers aborts the connection
//! short of `Content-Length`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;

use super::conditional::{if_none_match, strong_etag};
use super::format::{json_body, npy_header, npy_text, streamable, Format, ResultLabels};
use super::problem::ApiError;
use super::query::Query;
use super::AppState;
use crate::engine::{Dataset, Error, ReadPlan, Versions};
use crate::metrics::Metrics;

/// `/v1/datasets/{ds}/data`: the root node.
pub(super) async fn read_root(
    State(state): State<Arc<AppState>>,
    Path(ds): Path<String>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let query = Query::from_query_string(query.as_deref())?;
    region(&state, &ds, "", query, &method, &headers).await
}

/// `/v1/datasets/{ds}/data/{path}`
pub(super) async fn read(
    State(state): State<Arc<AppState>>,
    Path((ds, path)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let query = Query::from_query_string(query.as_deref())?;
    region(&state, &ds, &path, query, &method, &headers).await
}

/// `POST /v1/datasets/{ds}/data`: the root node, selection in the body.
pub(super) async fn post_root(
    State(state): State<Arc<AppState>>,
    Path(ds): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut query = Query::from_query_string(query.as_deref())?;
    query.add_body(&body)?;
    region(&state, &ds, "", query, &Method::POST, &headers).await
}

/// `POST /v1/datasets/{ds}/data/{path}`: selection in the JSON body.
pub(super) async fn post(
    State(state): State<Arc<AppState>>,
    Path((ds, path)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut query = Query::from_query_string(query.as_deref())?;
    query.add_body(&body)?;
    region(&state, &ds, &path, query, &Method::POST, &headers).await
}

async fn region(
    state: &AppState,
    ds: &str,
    path: &str,
    query: Query,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = state.dataset(ds, headers)?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let plan = dataset.plan_query(path, &query.read).await?;
    let data_type = plan.data_type();
    let format = Format::negotiate(query.format.as_deref(), accept, data_type)?;
    // For text and bytes this counts 8 bytes an element; the answer is
    // measured again once built.
    let requested = plan.output_bytes();
    if requested > state.max_response_bytes {
        return Err(ApiError::TooLarge {
            requested,
            limit: state.max_response_bytes,
        });
    }
    let permit = dataset.resources().admit_read().await.inspect_err(|_| {
        state.metrics.overloaded.fetch_add(1, Ordering::Relaxed);
    })?;
    let (payload, length, versions) = if streamable(format, data_type) && plan.slab_count() > 1 {
        let versions = dataset.read_versions(&plan).await?;
        let prefix = if format == Format::Npy {
            npy_header(data_type, &plan.output_shape())
        } else {
            vec![]
        };
        let length = prefix.len() as u64 + requested;
        (Payload::Stream(prefix), length, versions)
    } else {
        let (data, versions) = dataset.read_all(&plan).await?;
        let labels = match format {
            Format::Json => Some(dataset.result_coords(&plan).await?),
            _ => None,
        };
        let body = encode(format, &plan, data, labels)?;
        let length = body.len() as u64;
        if length > state.max_response_bytes {
            return Err(ApiError::TooLarge {
                requested: length,
                limit: state.max_response_bytes,
            });
        }
        (Payload::Whole(body), length, versions)
    };
    let etag = etag_for(dataset, &plan, format, &versions);
    let response = Response::builder()
        .header(header::ETAG, &etag)
        .header(
            "zarr-shape",
            plan.output_shape()
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        )
        .header("zarr-data-type", data_type.name())
        // Without `format=`, the `Accept` header picks the representation.
        .header(header::VARY, "accept");
    if if_none_match(headers, &etag) {
        return Ok(response
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .expect("valid response"));
    }
    let mut response = response
        .header(header::CONTENT_TYPE, format.media_type())
        .header(header::CONTENT_LENGTH, length);
    if format != Format::Json && length > state.compress_max_bytes {
        // Compressing numbers on the fly is several times slower than
        // sending them; see `compress_max_bytes`.
        response = response.extension(super::Uncompressed);
    }
    let body = match payload {
        _ if method == Method::HEAD => Body::empty(),
        Payload::Whole(bytes) => Body::from(bytes),
        Payload::Stream(prefix) => stream(state.metrics.clone(), dataset.clone(), plan, versions, prefix, permit),
    };
    Ok(response.body(body).expect("valid response"))
}

/// A response body: in memory, or streamed after a prefix (the npy header).
enum Payload {
    Whole(Bytes),
    Stream(Vec<u8>),
}

/// The whole answer in `format`; damaged text is a corrupt-data error.
/// JSON carries the result's dimension names and coordinate labels.
fn encode(format: Format, plan: &ReadPlan, data: Bytes, labels: Option<ResultLabels>) -> Result<Bytes, ApiError> {
    let data_type = plan.data_type();
    let shape = plan.output_shape();
    let corrupt = |reason: String| ApiError::from(Error::corrupt(plan.node().path.clone(), reason));
    Ok(match format {
        Format::Binary => data,
        Format::Npy if data_type.is_text_or_bytes() => {
            Bytes::from(npy_text(data_type, &shape, &data).map_err(corrupt)?)
        }
        Format::Npy => {
            let mut out = npy_header(data_type, &shape);
            out.extend_from_slice(&data);
            Bytes::from(out)
        }
        Format::Json => Bytes::from(json_body(data_type, &shape, &data, labels.as_ref()).map_err(corrupt)?),
    })
}

/// Stream the slabs after `prefix`, reading the next while the previous
/// is written.
fn stream(
    metrics: Arc<Metrics>,
    dataset: Dataset,
    plan: ReadPlan,
    versions: Versions,
    prefix: Vec<u8>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let (name, path) = (dataset.name.clone(), plan.node().path.clone());
    let slabs = dataset.slab_stream(plan, versions);
    tokio::spawn(async move {
        let _permit = permit;
        if !prefix.is_empty() && tx.send(Ok(Bytes::from(prefix))).await.is_err() {
            return;
        }
        let mut slabs = std::pin::pin!(slabs);
        loop {
            let read = tokio::select! {
                // The client went away: stop reading (dropping `slabs` aborts them).
                _ = tx.closed() => return,
                read = slabs.next() => match read {
                    Some(read) => read,
                    None => return,
                },
            };
            match read {
                Ok(frame) => {
                    // A client that stops reading is cut off by the
                    // connection's stall guard, which ends this send too.
                    if tx.send(Ok(frame)).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    metrics.stream_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(dataset = %name, path = %path, error = %e, "region stream aborted");
                    let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                    return;
                }
            }
        }
    });
    Body::from_stream(tokio_stream(rx))
}

fn tokio_stream(
    mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A strong ETag naming the representation: dataset, node metadata
/// version, selection, format, and the version of every key read.
fn etag_for(dataset: &Dataset, plan: &ReadPlan, format: Format, versions: &Versions) -> String {
    let selection = plan.selection_key();
    let node = plan.node();
    let mut parts: Vec<&[u8]> = vec![
        dataset.name.as_bytes(),
        node.path.as_bytes(),
        node.etag.as_deref().unwrap_or("").as_bytes(),
        selection.as_bytes(),
        format.name().as_bytes(),
    ];
    for (key, version) in versions {
        parts.push(key.as_bytes());
        parts.push(version.as_deref().unwrap_or("-").as_bytes());
    }
    strong_etag(&parts)
}
