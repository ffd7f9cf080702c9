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
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;

use super::conditional::{if_none_match, strong_etag};
use super::format::{json_body, npy_header, npy_text, png_picture, streamable, Format, JsonSlabs, ResultLabels};
use super::problem::ApiError;
use super::query::Query;
use super::AppState;
use crate::engine::reduce::Reduction;
use crate::engine::render::{self, Render, RenderRequest};
use crate::engine::{DataType, Dataset, Error, ReadPlan, Versions};
use crate::metrics::Metrics;

/// `GET|HEAD|POST /v1/datasets/{ds}/data`: the root node.
pub(super) async fn read_root(
    State(state): State<Arc<AppState>>,
    Path(ds): Path<String>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let query = parse(query.as_deref(), &method, &body)?;
    region(&state, &ds, "", query, &method, &headers).await
}

/// `GET|HEAD|POST /v1/datasets/{ds}/data/{path}`; a POST carries the
/// selection in a JSON body.
pub(super) async fn read(
    State(state): State<Arc<AppState>>,
    Path((ds, path)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let query = parse(query.as_deref(), &method, &body)?;
    region(&state, &ds, &path, query, &method, &headers).await
}

/// The query string, and for a POST the body.
fn parse(query: Option<&str>, method: &Method, body: &[u8]) -> Result<Query, ApiError> {
    let mut query = Query::from_query_string(query)?;
    if method == Method::POST {
        query.add_body(body)?;
    }
    Ok(query)
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
    let reduction = query
        .reduce
        .resolve(&plan.output_shape(), &plan.result_dimension_names())?;
    let answer = Answer::of(&plan, reduction.as_ref())?;
    let format = Format::negotiate(query.format.as_deref(), accept, answer.data_type)?;
    let render = picture(format, &query.render, &answer)?;
    // The decoded result, the same for every format and slab layout and
    // known before any data is read (api.md 3.6): elements times element
    // size (8 for variable-length elements, the size of their handles), 4
    // bytes a pixel for a picture. Headers and text are not counted.
    let requested = match render {
        Some(_) => answer.shape.iter().product::<u64>() * 4,
        None => answer.bytes(),
    };
    if requested > state.max_response_bytes {
        return Err(ApiError::TooLarge {
            requested,
            limit: state.max_response_bytes,
        });
    }
    let permit = dataset.resources().admit_read().await.inspect_err(|_| {
        state.metrics.overloaded.fetch_add(1, Ordering::Relaxed);
    })?;
    // JSON of numbers streams too (its length unknown: chunked encoding).
    let json_streams = format == Format::Json && !answer.data_type.is_text_or_bytes();
    let streamed = reduction.is_none()
        && render.is_none()
        && plan.slab_count() > 1
        && (streamable(format, answer.data_type) || json_streams);
    let (payload, length, versions) = if streamed {
        let versions = dataset.read_versions(&plan).await?;
        let (prefix, length, encoder) = match format {
            Format::Json => {
                let labels = answer.labels(dataset.result_coords(&plan).await?);
                let slab_dim = plan
                    .slab_result_dim()
                    .expect("a read of several slabs has a slab dimension");
                let (json, head, tail) = JsonSlabs::new(answer.data_type, &answer.shape, slab_dim, Some(&labels));
                (
                    head.into_bytes(),
                    None,
                    SlabEncoder::Json(Arc::new(json), Bytes::from(tail)),
                )
            }
            Format::Npy => {
                let header = npy_header(answer.data_type, &answer.shape);
                let length = header.len() as u64 + requested;
                (header, Some(length), SlabEncoder::Raw)
            }
            _ => (vec![], Some(requested), SlabEncoder::Raw),
        };
        (Payload::Stream(prefix, encoder), length, versions)
    } else {
        let (data, versions) = match &reduction {
            Some(r) => {
                let versions = dataset.read_versions(&plan).await?;
                (dataset.read_reduced(&plan, r, versions.clone()).await?, versions)
            }
            None => dataset.read_all(&plan).await?,
        };
        let labels = match format {
            Format::Json => Some(answer.labels(dataset.result_coords(&plan).await?)),
            _ => None,
        };
        let body = match &render {
            Some(render) => draw(render.clone(), &answer, data).await?,
            None => encode(format, &answer, data, labels)
                .map_err(|reason| Error::corrupt(plan.node().path.clone(), reason))?,
        };
        let length = body.len() as u64;
        (Payload::Whole(body), Some(length), versions)
    };
    let computed = format!("{}|{}", query.reduce.key(), query.render.key());
    let etag = etag_for(dataset, &plan, &computed, format, &versions);
    let response = Response::builder()
        .header(header::ETAG, &etag)
        .header(
            "zarr-shape",
            answer.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        )
        .header("zarr-data-type", answer.data_type.name())
        // Without `format=`, the `Accept` header picks the representation.
        .header(header::VARY, HeaderValue::from_static("accept"));
    if if_none_match(headers, &etag) {
        return Ok(response
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .expect("valid response"));
    }
    let mut response = response.header(header::CONTENT_TYPE, HeaderValue::from_static(format.media_type()));
    if let Some(length) = length {
        response = response.header(header::CONTENT_LENGTH, length);
    }
    if matches!(format, Format::Binary | Format::Npy) && length.unwrap_or(0) > state.compress_max_bytes {
        // Compressing numbers on the fly is several times slower than
        // sending them; see `compress_max_bytes`.
        response = response.extension(super::Uncompressed);
    }
    let body = match payload {
        _ if method == Method::HEAD => Body::empty(),
        Payload::Whole(bytes) => Body::from(bytes),
        Payload::Stream(prefix, encoder) => stream(
            state.metrics.clone(),
            dataset.clone(),
            (plan, versions),
            (prefix, encoder),
            permit,
        ),
    };
    Ok(response.body(body).expect("valid response"))
}

/// What the answer holds: the read's result, or its reduction.
struct Answer {
    data_type: DataType,
    shape: Vec<u64>,
    /// Which of the result's dimensions the answer keeps, and which of
    /// those are coarsened (their labels are not the result's).
    kept: Vec<bool>,
    coarsened: Vec<bool>,
}

impl Answer {
    fn of(plan: &ReadPlan, reduction: Option<&Reduction>) -> Result<Self, ApiError> {
        let rank = plan.output_shape().len();
        Ok(match reduction {
            None => Answer {
                data_type: plan.data_type(),
                shape: plan.output_shape(),
                kept: vec![true; rank],
                coarsened: vec![false; rank],
            },
            Some(r) => Answer {
                data_type: r.output_type(plan.data_type())?,
                shape: r.output_shape(),
                kept: r.kept(),
                coarsened: (0..rank).map(|d| r.coarsened(d).is_some()).collect(),
            },
        })
    }

    fn bytes(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.data_type.size() as u64
    }

    /// The result's names and labels, for the dimensions the answer keeps
    /// (coarsened ones keep their name, not their labels).
    fn labels(&self, (names, mut coords): ResultLabels) -> ResultLabels {
        let mut kept_names = Vec::new();
        for ((name, &keep), &coarsened) in names.into_iter().zip(&self.kept).zip(&self.coarsened) {
            if !keep || coarsened {
                coords.remove(name.as_str().unwrap_or_default());
            }
            if keep {
                kept_names.push(name);
            }
        }
        (kept_names, coords)
    }
}

/// For `format=png`, the checked rendering parameters; they are 400
/// with any other format. A picture is 2-D and real, at most
/// [`render::MAX_SIDE`] pixels a side (413).
fn picture(format: Format, request: &RenderRequest, answer: &Answer) -> Result<Option<Render>, ApiError> {
    if format != Format::Png {
        return match request.is_empty() {
            true => Ok(None),
            false => Err(ApiError::BadRequest(
                "rescale, colormap and nodata apply to format=png only".into(),
            )),
        };
    }
    let render = request.resolve()?;
    render::check(answer.data_type, &answer.shape)?;
    if answer.shape.contains(&0) {
        return Err(ApiError::BadRequest(format!(
            "the picture would be empty (shape {:?}): a PNG has at least one pixel",
            answer.shape
        )));
    }
    if let Some(side) = answer.shape.iter().find(|&&n| n > render::MAX_SIDE) {
        return Err(ApiError::Rejected(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the picture would be {} pixels on a side, more than {}; select a smaller region or coarsen",
                side,
                render::MAX_SIDE
            ),
        ));
    }
    Ok(Some(render))
}

/// The answer drawn as a PNG; a large picture off the async workers.
async fn draw(render: Render, answer: &Answer, data: Bytes) -> Result<Bytes, ApiError> {
    const INLINE_PIXELS: u64 = 512 * 512;
    let (data_type, height, width) = (answer.data_type, answer.shape[0] as u32, answer.shape[1] as u32);
    let picture = move || -> Result<Vec<u8>, ApiError> {
        let picture = render.picture(data_type, &data)?;
        png_picture(width, height, &picture)
            .map_err(|e| ApiError::Engine(Error::Internal(format!("PNG encoding: {e}"))))
    };
    let png = if u64::from(width) * u64::from(height) <= INLINE_PIXELS {
        picture()?
    } else {
        tokio::task::spawn_blocking(picture)
            .await
            .map_err(|e| ApiError::Engine(Error::Internal(format!("drawing failed: {e}"))))??
    };
    Ok(Bytes::from(png))
}

/// Elements turned into JSON text at a time when JSON streams.
const JSON_PIECE_BYTES: usize = 1 << 20;

/// A response body: in memory, or streamed after a prefix (the npy
/// header, the JSON head).
enum Payload {
    Whole(Bytes),
    Stream(Vec<u8>, SlabEncoder),
}

/// What a streamed slab becomes: its bytes, or JSON items (then the
/// document's tail ends the stream).
enum SlabEncoder {
    Raw,
    Json(Arc<JsonSlabs>, Bytes),
}

/// The whole answer in `format`; damaged text is an error naming what is wrong.
/// JSON carries the answer's dimension names and coordinate labels.
fn encode(format: Format, answer: &Answer, data: Bytes, labels: Option<ResultLabels>) -> Result<Bytes, String> {
    let (data_type, shape) = (answer.data_type, &answer.shape);
    Ok(match format {
        Format::Binary => data,
        Format::Npy if data_type.is_text_or_bytes() => Bytes::from(npy_text(data_type, shape, &data)?),
        Format::Npy => {
            let mut out = npy_header(data_type, shape);
            out.extend_from_slice(&data);
            Bytes::from(out)
        }
        Format::Json => Bytes::from(json_body(data_type, shape, &data, labels.as_ref())?),
        Format::Png => unreachable!("pictures are drawn, not encoded"),
    })
}

/// Stream the slabs after `prefix`, reading the next while the previous
/// is written (and, for JSON, turned into text off the async workers).
fn stream(
    metrics: Arc<Metrics>,
    dataset: Dataset,
    (plan, versions): (ReadPlan, Versions),
    (prefix, encoder): (Vec<u8>, SlabEncoder),
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
        let mut first = true;
        loop {
            let read = tokio::select! {
                // The client went away: stop reading (dropping `slabs` aborts them).
                _ = tx.closed() => return,
                read = slabs.next() => match read {
                    Some(read) => read,
                    None => break,
                },
            };
            if let (SlabEncoder::Json(json, _), Ok(frame)) = (&encoder, &read) {
                // Text in pieces of about JSON_PIECE_BYTES of elements, each
                // sent before the next is written: memory stays bounded.
                let step = (JSON_PIECE_BYTES / json.item_bytes().max(1)).max(1) * json.item_bytes().max(1);
                for start in (0..frame.len()).step_by(step) {
                    let piece = frame.slice(start..frame.len().min(start + step));
                    let (json, was_first) = (json.clone(), first);
                    first = false;
                    let text = tokio::task::spawn_blocking(move || Bytes::from(json.slab(&piece, was_first))).await;
                    let Ok(text) = text else {
                        let _ = tx.send(Err(std::io::Error::other("JSON encoding failed"))).await;
                        return;
                    };
                    if tx.send(Ok(text)).await.is_err() {
                        return;
                    }
                }
                continue;
            }
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
        if let SlabEncoder::Json(_, tail) = encoder {
            let _ = tx.send(Ok(tail)).await;
        }
    });
    super::channel_body(rx)
}

/// A strong ETag naming the representation: dataset, node metadata
/// version, selection, reduction, format, and the version of every key read.
fn etag_for(dataset: &Dataset, plan: &ReadPlan, reduction: &str, format: Format, versions: &Versions) -> String {
    let selection = format!("{}|{reduction}", plan.selection_key());
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
