//! OPeNDAP DAP2 (contract 3.4): one DAP2 dataset per group, at
//! `/v1/datasets/{ds}/dap` (the root group) and `/v1/datasets/{ds}/dap/G`,
//! answering `.dds`, `.das`, `.dods` and `.ascii` (`.asc`) as libdap-based
//! servers do, for netCDF-C, netCDF4-python, xarray and pydap.
//!
//! A thin adapter: [`model`] maps a group's arrays to DAP variables,
//! [`constraint`] turns a constraint expression into the engine's
//! selections, [`text`] writes the DDS, DAS and ASCII, and the `.dods`
//! body is the engine's slab stream encoded by [`crate::encode::xdr`].
//! Errors are DAP2 `Error { ... };` bodies with the contract's statuses.

mod constraint;
pub(crate) use constraint::check_projection;
mod model;
mod text;

/// The DAP2 datasets of groups, by dataset and group, kept for the
/// metadata TTL: clients ask for a dataset's DDS, DAS and data in turn,
/// and a group's listing is read once for them all.
pub(super) type Models = moka::future::Cache<(String, String), Arc<model::DapDataset>>;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use futures::StreamExt;

use self::constraint::{Leaf, Projection};
use self::model::{DapDataset, Variable};
use super::conditional::strong_etag;
use super::problem::ApiError;
use super::respond::{self as pipeline, Checked};
use super::AppState;
use crate::buffer_pool::BufferPool;
use crate::encode::xdr;
use crate::engine::{Dataset, Error, ReadPlan, Selection, Versions};
use crate::metrics::Metrics;

/// The answers a DAP2 dataset gives, by URL suffix.
const SUFFIXES: &str = ".dds, .das, .dods, .ascii (or .asc)";

/// The DAP2 routes. Text answers compress on request; `.dods` bodies
/// larger than `compress_max_bytes` are sent as they are.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/datasets/{ds}/dap", get(root).head(root))
        .route("/v1/datasets/{ds}/dap/", get(root).head(root))
        // `dap.dds`, `dap.html`, ...: any suffix gets a DAP2 answer.
        .route("/v1/datasets/{ds}/{file}", get(root_file).head(root_file))
        .route("/v1/datasets/{ds}/dap/{*rest}", get(group).head(group))
        .route_layer(axum::middleware::from_fn(|request, next| {
            super::admit(request, next, |e| dap_error(ApiError::Engine(e)))
        }))
        .layer(super::compression())
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Dds,
    Das,
    Dods,
    Ascii,
}

impl Answer {
    fn of(suffix: &str) -> Option<Self> {
        Some(match suffix {
            "dds" => Self::Dds,
            "das" => Self::Das,
            "dods" => Self::Dods,
            "ascii" | "asc" => Self::Ascii,
            _ => return None,
        })
    }

    /// `Content-Description`, as libdap names each answer.
    fn description(self) -> &'static str {
        match self {
            Self::Dds => "dods_dds",
            Self::Das => "dods_das",
            Self::Dods => "dods_data",
            Self::Ascii => "dods_ascii",
        }
    }
}

/// A request: the dataset, the group's path and the answer asked for.
struct Request<'a> {
    state: &'a AppState,
    ds: String,
    group: String,
    answer: Answer,
    query: Option<String>,
    method: Method,
    headers: HeaderMap,
}

/// `/v1/datasets/{ds}/dap`: the root group, without a suffix.
async fn root(
    State(state): State<Arc<AppState>>,
    Path(ds): Path<String>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
) -> Response {
    respond(&state, ds, String::new(), "", query, method, headers).await
}

/// `/v1/datasets/{ds}/dap.{suffix}`: the root group; any other file name
/// is no route.
async fn root_file(
    State(state): State<Arc<AppState>>,
    Path((ds, file)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
) -> Response {
    match file.strip_prefix("dap.") {
        Some(suffix) => respond(&state, ds, String::new(), suffix, query, method, headers).await,
        None => ApiError::NotFound("no such route; see /openapi.yaml".into()).into_response(),
    }
}

/// `/v1/datasets/{ds}/dap/{group}.{suffix}`.
async fn group(
    State(state): State<Arc<AppState>>,
    Path((ds, rest)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let (group, suffix) = match rest.rsplit_once('.') {
        Some((group, suffix)) if !suffix.contains('/') => (group.to_string(), suffix.to_string()),
        _ => (rest.clone(), String::new()),
    };
    respond(&state, ds, group, &suffix, query, method, headers).await
}

async fn respond(
    state: &AppState,
    ds: String,
    group: String,
    suffix: &str,
    query: Option<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let Some(answer) = Answer::of(suffix) else {
        let what = match suffix {
            "" => "no DAP2 answer named: append".to_string(),
            other => format!("'.{other}' is not a DAP2 answer this server gives; it gives"),
        };
        return dap_error(ApiError::NotFound(format!("{what} {SUFFIXES} to the dataset's URL")));
    };
    let request = Request {
        state,
        ds,
        group: group.trim_matches('/').to_string(),
        answer,
        query,
        method,
        headers,
    };
    match request.answer().await {
        Ok(response) => with_dap_headers(response, answer.description()),
        Err(e) => dap_error(e),
    }
}

impl Request<'_> {
    async fn answer(&self) -> Result<Response, ApiError> {
        let dataset = &self.state.dataset(&self.ds, &self.headers).await?;
        let key = (dataset.scope.to_string(), self.group.clone());
        let dap = self
            .state
            .dap_models
            .try_get_with(key, async {
                DapDataset::load(dataset, &self.group).await.map(Arc::new)
            })
            .await
            .map_err(|e| ApiError::Engine(e.as_ref().clone()))?;
        if self.answer == Answer::Das {
            return Ok(self.text(text::das(&dap)));
        }
        let projection = Projection::parse(self.query.as_deref(), &dap).map_err(ApiError::BadRequest)?;
        match self.answer {
            Answer::Dds => Ok(self.text(text::dds(&dap, &projection))),
            Answer::Ascii => self.ascii(dataset, &dap, &projection).await,
            _ => self.dods(dataset, &dap, &projection).await,
        }
    }

    /// A text answer, tagged by its bytes.
    fn text(&self, body: String) -> Response {
        let etag = strong_etag(&[body.as_bytes()]);
        super::conditional::respond(
            Bytes::from(body),
            "text/plain; charset=utf-8",
            &etag,
            &self.method,
            &self.headers,
        )
    }

    fn corrupt(&self, reason: String) -> ApiError {
        ApiError::Engine(Error::corrupt(self.group.clone(), reason))
    }

    /// `.ascii`: the DDS, a rule, then each array's values as text,
    /// streamed slab by slab like `.dods` (the same 413), each slab turned
    /// into text as it comes.
    async fn ascii(&self, dataset: &Dataset, dap: &DapDataset, projection: &Projection) -> Result<Response, ApiError> {
        let reads = Reads::plan(dataset, dap, projection, false).await?;
        let dds = text::dds(dap, projection);
        let described = self
            .describe(
                dataset,
                "text/plain; charset=utf-8",
                (projection.key(dap), &dds),
                &reads,
            )
            .streamed(true);
        let ready = match described.check(&self.method, &self.headers).await? {
            Checked::Answered(response) => return Ok(response),
            Checked::Read(ready) => ready,
        };
        let arrays: Vec<Streamed> = text::ascii_names(dap, projection)
            .into_iter()
            .zip(projection.members.iter().flat_map(|m| m.leaves()))
            .zip(reads.0)
            .map(|((name, leaf), read)| {
                let (rows, heading) = text::AsciiRows::new(&name, read.plan.output_shape());
                let var = Arc::new(dap.variables[leaf.var].clone());
                let writer = Writer::Ascii { var, rows, heading };
                let versions = own_versions(&read.plan, ready.versions());
                Streamed { read, versions, writer }
            })
            .collect();
        let header = Bytes::from(format!("{dds}{}", text::ASCII_RULE));
        let body = stream(self.state.metrics.clone(), dataset.clone(), header, arrays);
        Ok(ready.stream(body))
    }

    /// `.dods`: the constrained DDS, `Data:`, then each array in XDR, from
    /// memory for small reads, else streamed slab by slab.
    async fn dods(&self, dataset: &Dataset, dap: &DapDataset, projection: &Projection) -> Result<Response, ApiError> {
        let reads = Reads::plan(dataset, dap, projection, true).await?;
        let dds = text::dds(dap, projection);
        let header = format!("{dds}Data:\n").into_bytes();
        let xdr = reads.xdr_bytes();
        let length = xdr.exact.then_some(header.len() as u64 + xdr.bytes);
        let streamed = pipeline::streams(dataset, reads.0.iter().map(|r| &r.plan));
        let described = self
            .describe(dataset, "application/octet-stream", (projection.key(dap), &dds), &reads)
            .length(length)
            .streamed(streamed);
        let response = match described.check(&self.method, &self.headers).await? {
            Checked::Answered(response) => response,
            Checked::Read(ready) if !streamed => {
                let pinned = ready.versions();
                let mut body = header;
                for read in &reads.0 {
                    let (data, _) = dataset.read_pinned(&read.plan, Some(pinned)).await?;
                    read.encode_whole(&data, &mut body).map_err(|e| self.corrupt(e))?;
                }
                ready.whole(Bytes::from(body))
            }
            Checked::Read(ready) => {
                let pool = dataset.resources().buffers();
                let arrays = reads
                    .0
                    .into_iter()
                    .map(|read| Streamed {
                        versions: own_versions(&read.plan, ready.versions()),
                        read,
                        writer: Writer::Xdr(pool.clone()),
                    })
                    .collect();
                let body = stream(self.state.metrics.clone(), dataset.clone(), Bytes::from(header), arrays);
                ready.stream(body)
            }
        };
        let mut response = response;
        if length.is_none_or(|n| n > self.state.compress_max_bytes) {
            response.extensions_mut().insert(super::Uncompressed);
        }
        Ok(response)
    }

    /// The answer described to the response pipeline: named by the
    /// dataset, group, answer, projection (its `key` and its DDS, whose
    /// dimension names depend on the group's other arrays) and each
    /// array's read; its size the XDR body's (413 above the limit).
    fn describe<'a>(
        &'a self,
        dataset: &'a Dataset,
        content_type: &str,
        (key, dds): (String, &str),
        reads: &'a Reads,
    ) -> pipeline::Answer<'a> {
        let mut described = pipeline::Answer::new(self.state, dataset, self.answer.description(), content_type)
            .key(&self.group)
            .key(key)
            .key(dds)
            .bytes(reads.xdr_bytes().bytes);
        for read in &reads.0 {
            described = described.plan(&read.plan);
        }
        described
    }
}

/// The XDR body's size: exact, or (with strings) its estimate.
struct XdrBytes {
    bytes: u64,
    exact: bool,
}

/// One array of a response: its variable's types and its read.
struct Read {
    data_type: crate::engine::DataType,
    dap: xdr::DapType,
    scalar: bool,
    count: u64,
    /// The read gives the elements big-endian, as XDR sends them.
    big_endian: bool,
    plan: ReadPlan,
}

impl Read {
    /// Its XDR bytes, if known before reading (strings are not).
    fn xdr_bytes(&self) -> Option<u64> {
        match self.scalar {
            true => self.dap.scalar_bytes(),
            false => self.dap.array_bytes(self.count),
        }
    }

    /// Append the whole array, from all its elements.
    fn encode_whole(&self, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        if self.scalar {
            return xdr::append_scalar(self.data_type, data, out);
        }
        out.extend(xdr::array_header(self.dap, self.count));
        match self.big_endian {
            true => out.extend_from_slice(data),
            false => xdr::append_elements(self.data_type, data, out)?,
        }
        out.extend_from_slice(xdr::array_trailer(self.dap, self.count));
        Ok(())
    }
}

/// The arrays a projection reads, in the order they are sent.
struct Reads(Vec<Read>);

impl Reads {
    /// Plan each leaf's read; `for_xdr`: reads of what XDR sends as
    /// stored give it big-endian.
    async fn plan(
        dataset: &Dataset,
        dap: &DapDataset,
        projection: &Projection,
        for_xdr: bool,
    ) -> Result<Self, ApiError> {
        let mut reads = Vec::new();
        for member in &projection.members {
            for leaf in member.leaves() {
                let var = &dap.variables[leaf.var];
                reads.push(Self::read(dataset, var, leaf, for_xdr).await?);
            }
        }
        Ok(Self(reads))
    }

    async fn read(dataset: &Dataset, var: &Variable, leaf: &Leaf, for_xdr: bool) -> Result<Read, ApiError> {
        let slices: Vec<(u64, u64, u64)> = leaf.slices.iter().map(|s| s.strided()).collect();
        let plan = dataset.plan_node(var.node.clone(), &Selection::of_strided(&slices))?;
        // Arrays XDR sends as stored, big-endian: the read swaps them as it
        // assembles each slab, and the slabs are sent as they are.
        let big_endian = for_xdr && !var.dims.is_empty() && xdr::sent_as_stored(var.data_type);
        Ok(Read {
            data_type: var.data_type,
            dap: var.dap,
            scalar: var.dims.is_empty(),
            count: leaf.slices.iter().map(|s| s.count).product(),
            big_endian,
            plan: if big_endian { plan.with_big_endian() } else { plan },
        })
    }

    /// The XDR body's size (strings counted at 8 bytes an element, the
    /// size of their handles in a read).
    fn xdr_bytes(&self) -> XdrBytes {
        let mut total = XdrBytes { bytes: 0, exact: true };
        for read in &self.0 {
            total.bytes += read.xdr_bytes().unwrap_or_else(|| {
                total.exact = false;
                4 + 8 * read.count
            });
        }
        total
    }
}

/// The versions of the keys under `plan`'s array.
fn own_versions(plan: &ReadPlan, all: &Versions) -> Versions {
    let prefix = match plan.node().path.as_str() {
        "" => String::new(),
        path => format!("{path}/"),
    };
    all.range(prefix.clone()..)
        .take_while(|(key, _)| key.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One streamed array: its read, pinned to the versions of its keys, and
/// how its slabs are written.
struct Streamed {
    read: Read,
    versions: Versions,
    writer: Writer,
}

/// How a streamed array's slabs are written.
enum Writer {
    /// XDR (`.dods`): lengths, elements (into pooled buffers, unless the
    /// read already gives them big-endian), padding.
    Xdr(Arc<BufferPool>),
    /// Text rows (`.ascii`) under their heading.
    Ascii {
        var: Arc<Variable>,
        rows: text::AsciiRows,
        heading: String,
    },
}

impl Streamed {
    /// What comes before the elements.
    fn start(&mut self) -> Bytes {
        match &mut self.writer {
            Writer::Xdr(_) if self.read.scalar => Bytes::new(),
            Writer::Xdr(_) => Bytes::from(xdr::array_header(self.read.dap, self.read.count)),
            Writer::Ascii { heading, .. } => Bytes::from(std::mem::take(heading)),
        }
    }

    /// One slab, written; a large one off the async workers.
    async fn slab(&mut self, slab: Bytes) -> Result<Bytes, String> {
        let read = &self.read;
        let (data_type, scalar) = (read.data_type, read.scalar);
        if read.big_endian {
            return Ok(slab);
        }
        let large = slab.len() > pipeline::INLINE_ENCODE_BYTES;
        match &mut self.writer {
            Writer::Xdr(pool) => {
                let pool = pool.clone();
                let encode = move || {
                    let wide = xdr::DapType::of(data_type)
                        .and_then(xdr::DapType::element_bytes)
                        .unwrap_or(4) as usize;
                    let mut out = pool.take_empty((slab.len() / data_type.size().max(1)) * wide + 4);
                    match scalar {
                        true => xdr::append_scalar(data_type, &slab, &mut out),
                        false => xdr::append_elements(data_type, &slab, &mut out),
                    }
                    .map(|()| BufferPool::into_bytes(&pool, out))
                };
                off_the_workers(large, encode).await
            }
            Writer::Ascii { var, rows, .. } => {
                let var = var.clone();
                let texts = off_the_workers(large, move || text::value_texts(&var, &slab)).await?;
                let mut out = String::new();
                rows.push(&mut out, &texts);
                Ok(Bytes::from(out))
            }
        }
    }

    /// What comes after the elements.
    fn end(&self) -> Bytes {
        match &self.writer {
            Writer::Xdr(_) => Bytes::from_static(xdr::array_trailer(self.read.dap, self.read.count)),
            Writer::Ascii { rows, .. } => Bytes::from_static(rows.end().as_bytes()),
        }
    }
}

/// `work`'s answer, computed on a blocking thread when `large`.
async fn off_the_workers<T: Send + 'static>(
    large: bool,
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    match large {
        true => tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| format!("encoding failed: {e}"))?,
        false => work(),
    }
}

/// Stream `header`, then each array as its writer writes it, slab by slab
/// as they are read (one slab read ahead, as region reads do). An error
/// after the headers ends the connection short.
fn stream(metrics: Arc<Metrics>, dataset: Dataset, header: Bytes, arrays: Vec<Streamed>) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        if tx.send(Ok(header)).await.is_err() {
            return;
        }
        for array in arrays {
            let path = array.read.plan.node().path.clone();
            if let Err(e) = send_array(&dataset, array, &tx).await {
                metrics.stream_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(dataset = %dataset.name, path = %path, error = %e, "DAP2 stream aborted");
                let _ = tx.send(Err(std::io::Error::other(e))).await;
                return;
            }
        }
    });
    super::channel_body(rx)
}

/// One array of a stream. `Err` carries why it stopped; a closed
/// connection is not an error (the client went away).
async fn send_array(
    dataset: &Dataset,
    mut array: Streamed,
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) -> Result<(), String> {
    let start = array.start();
    if !start.is_empty() && tx.send(Ok(start)).await.is_err() {
        return Ok(());
    }
    let (plan, versions) = (array.read.plan.clone(), std::mem::take(&mut array.versions));
    let mut slabs = std::pin::pin!(dataset.slab_stream(plan, versions));
    loop {
        let slab = tokio::select! {
            _ = tx.closed() => return Ok(()),
            slab = slabs.next() => match slab {
                Some(slab) => slab.map_err(|e| e.to_string())?,
                None => break,
            },
        };
        let written = array.slab(slab).await?;
        if tx.send(Ok(written)).await.is_err() {
            return Ok(());
        }
    }
    let end = array.end();
    if !end.is_empty() {
        let _ = tx.send(Ok(end)).await;
    }
    Ok(())
}

/// The DAP2 headers clients look for.
fn with_dap_headers(mut response: Response, description: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert("content-description", HeaderValue::from_static(description));
    headers.insert("xdods-server", HeaderValue::from_static("dods/3.2"));
    headers.insert(
        "xopendap-server",
        HeaderValue::from_static(concat!("zarr-serve/", env!("CARGO_PKG_VERSION"))),
    );
    headers.insert("xdap", HeaderValue::from_static("2.0"));
    response
}

/// An error as DAP2 sends it: `Error { code = N; message = "..."; };`
/// with the contract's status (and its `Retry-After` or
/// `WWW-Authenticate`).
fn dap_error(error: ApiError) -> Response {
    let status = error.status();
    let message = text::quoted(&error.to_string());
    let mut response = error.into_response();
    let body = format!(
        "Error {{\n    code = {};\n    message = {message};\n}};\n",
        status.as_u16()
    );
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.remove(header::CONTENT_LENGTH);
    response.extensions_mut().insert(super::ProtocolError);
    *response.body_mut() = Body::from(body);
    with_dap_headers(response, "dods_error")
}
