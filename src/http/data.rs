//! Region reads: `GET|HEAD /v1/datasets/{ds}/data/{path}?select=&format=`.
//!
//! The answer is described to the response pipeline ([`respond`]: size,
//! versions, ETag, 304, HEAD), then read pinned to the versions its ETag
//! names: whole when it is one slab (or a reduction or picture), else
//! streamed slab after slab with one slab read ahead. An error after the
//! headers aborts the connection short of `Content-Length`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;

use super::body::{stream_parts, Part};
use super::encoders::{encoder_for, EncoderRequest};
use super::format::Format;
use super::problem::ApiError;
use super::query::Query;
use super::respond::{self, Checked};
use super::AppState;
use crate::encode::json::ResultLabels;
use crate::encode::Encoder;
use crate::engine::reduce::Reduction;
use crate::engine::render::{self, Render, RenderRequest};
use crate::engine::{DataType, Dataset, Error, ReadPlan};
use crate::identity::Caller;

/// `GET|HEAD|POST /v1/datasets/{ds}/data`: the root node.
pub(super) async fn read_root(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if method == Method::POST && super::write::appends(query.as_deref()) {
        return super::write::append(&state, &caller, &ds, "", query.as_deref(), &headers, body).await;
    }
    let body = small_body(body).await?;
    let query = parse(query.as_deref(), &method, &body)?;
    region(&state, &caller, &ds, "", query, &method, &headers).await
}

/// `GET|HEAD|POST /v1/datasets/{ds}/data/{path}`; a POST carries the
/// selection in a JSON body.
pub(super) async fn read(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, path)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if method == Method::POST && super::write::appends(query.as_deref()) {
        return super::write::append(&state, &caller, &ds, &path, query.as_deref(), &headers, body).await;
    }
    let body = small_body(body).await?;
    let query = parse(query.as_deref(), &method, &body)?;
    region(&state, &caller, &ds, &path, query, &method, &headers).await
}

/// A read's body (a POST's selection or points), at most 1 MiB.
async fn small_body(body: Body) -> Result<Bytes, ApiError> {
    let limit = super::middleware::MAX_BODY_BYTES;
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::Rejected(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {limit} bytes, or was cut short"),
        )
    })
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
    caller: &Caller,
    ds: &str,
    path: &str,
    query: Query,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(ds, caller).await?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let plan = dataset.plan_query(path, &query.read).await?;
    let reduction = query
        .reduce
        .resolve(&plan.output_shape(), &plan.result_dimension_names())?;
    let answer = RegionResult::of(&plan, reduction.as_ref())?;
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
    // Reductions are read whole and little-endian; other NetCDF reads are
    // made big-endian as the slabs are assembled.
    let plan = match (format, &reduction) {
        (Format::NetCdf, None) => plan.with_big_endian(),
        _ => plan,
    };
    let streamed = reduction.is_none()
        && render.is_none()
        && respond::streams(dataset, [&plan])
        && !answer.data_type.is_text_or_bytes();
    // Checked (400) before any of the result's data is read.
    let encoder = match render {
        Some(_) => None,
        None => {
            let request = EncoderRequest {
                dataset,
                plan: &plan,
                answer: &answer,
                reduction: reduction.as_ref(),
                streamed,
            };
            Some(encoder_for(format, &request).await?)
        }
    };
    let computed = format!("{}|{}", query.reduce.key(), query.render.key());
    // Known before reading for fixed-size elements (binary, npy, NetCDF).
    let length = match answer.data_type.is_text_or_bytes() {
        true => None,
        false => encoder.as_ref().and_then(|e| e.length()),
    };
    let mut described = respond::Answer::new(state, dataset, "region", format.media_type())
        .key(plan.selection_key())
        .key(&computed)
        .key(format.name())
        .plan(&plan)
        .bytes(requested)
        .length(length)
        .streamed(streamed)
        .header(
            HeaderName::from_static("zarr-shape"),
            answer.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        )
        .header(HeaderName::from_static("zarr-data-type"), answer.data_type.name())
        // Without `format=`, the `Accept` header picks the representation.
        .header(header::VARY, HeaderValue::from_static("accept"));
    if matches!(format, Format::Binary | Format::Npy | Format::NetCdf | Format::GeoTiff) {
        described = described.numbers();
    }
    let ready = match described.check(method, headers).await? {
        Checked::Answered(response) => return Ok(response),
        Checked::Read(ready) => ready,
    };
    let response = match (streamed, encoder) {
        (true, Some(encoder)) => {
            let part = Part {
                plan,
                versions: ready.versions().clone(),
                encoder,
            };
            let body = stream_parts(state.metrics.clone(), Dataset::clone(dataset), Bytes::new(), vec![part]);
            ready.stream(body)
        }
        (_, encoder) => {
            let pinned = Some(ready.versions());
            let data = match &reduction {
                Some(r) => dataset.read_reduced(&plan, r, ready.versions().clone()).await?,
                None => dataset.read_pinned(&plan, pinned).await?.0,
            };
            let body = match (&render, encoder) {
                (Some(render), _) => draw(render.clone(), &answer, data).await?,
                (None, Some(encoder)) => encode_whole(encoder, data)
                    .await
                    .map_err(|e| Error::corrupt(plan.node().path.clone(), e))?,
                (None, None) => unreachable!("a picture or an encoder"),
            };
            ready.whole(body)
        }
    };
    Ok(response)
}

/// The ETag `GET ...?select=SEL&format=binary` sends for `plan` now (what
/// a write's `If-Match` names, and what it answers with), and the object
/// versions it is made of.
pub(super) async fn binary_etag(
    state: &AppState,
    dataset: &Dataset,
    plan: &ReadPlan,
) -> Result<(String, crate::engine::Versions), ApiError> {
    let plain = Query::default();
    let computed = format!("{}|{}", plain.reduce.key(), plain.render.key());
    respond::Answer::new(state, dataset, "region", Format::Binary.media_type())
        .key(plan.selection_key())
        .key(&computed)
        .key(Format::Binary.name())
        .plan(plan)
        .current_versions()
        .await
}

/// What the answer holds: the read's result, or its reduction.
pub(super) struct RegionResult {
    pub(super) data_type: DataType,
    pub(super) shape: Vec<u64>,
    /// Which of the result's dimensions the answer keeps, and which of
    /// those are coarsened (their labels are not the result's).
    pub(super) kept: Vec<bool>,
    pub(super) coarsened: Vec<bool>,
}

impl RegionResult {
    fn of(plan: &ReadPlan, reduction: Option<&Reduction>) -> Result<Self, ApiError> {
        let rank = plan.output_shape().len();
        Ok(match reduction {
            None => RegionResult {
                data_type: plan.data_type(),
                shape: plan.output_shape(),
                kept: vec![true; rank],
                coarsened: vec![false; rank],
            },
            Some(r) => RegionResult {
                data_type: r.output_type(plan.data_type())?,
                shape: r.output_shape(),
                kept: r.kept(),
                coarsened: (0..rank).map(|d| r.coarsened(d).is_some()).collect(),
            },
        })
    }

    pub(super) fn bytes(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.data_type.size() as u64
    }

    /// The result's names and labels, for the dimensions the answer keeps
    /// (coarsened ones keep their name, not their labels).
    pub(super) fn labels(&self, (names, mut coords): ResultLabels) -> ResultLabels {
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
fn picture(format: Format, request: &RenderRequest, answer: &RegionResult) -> Result<Option<Render>, ApiError> {
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

/// The answer drawn as a PNG.
async fn draw(render: Render, answer: &RegionResult, data: Bytes) -> Result<Bytes, ApiError> {
    let (data_type, height, width) = (answer.data_type, answer.shape[0] as u32, answer.shape[1] as u32);
    Ok(super::picture::png(width, height, move || render.picture(data_type, &data)).await?)
}

/// A result read whole, encoded (text formats off the async workers when large).
async fn encode_whole(encoder: Arc<dyn Encoder>, data: Bytes) -> Result<Bytes, String> {
    if encoder.piece_elements().is_none() || data.len() <= respond::INLINE_ENCODE_BYTES {
        return encoder.whole(data);
    }
    tokio::task::spawn_blocking(move || encoder.whole(data))
        .await
        .map_err(|e| format!("encoding failed: {e}"))?
}
