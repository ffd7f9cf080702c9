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

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;

use self::constraint::{Leaf, Projection};
use self::model::{DapDataset, Variable};
use super::body::{own_versions, stream_parts, Part};
use super::conditional::strong_etag;
use super::opendap::Sent;
use super::problem::ApiError;
use super::respond::{self as pipeline, Checked};
use super::AppState;
use crate::buffer_pool::BufferPool;
use crate::encode::ascii::AsciiArray;
use crate::encode::xdr;
use crate::encode::xdr::XdrArray;
use crate::encode::Encoder;
use crate::engine::{Dataset, Error, ReadPlan, Selection, Versions};
use crate::identity::Caller;

/// The answers a DAP2 dataset gives, by URL suffix.
const SUFFIXES: &str = ".dds, .das, .dods, .ascii (or .asc)";

/// The DAP2 routes. Text answers compress on request; `.dods` bodies
/// larger than `compress_max_bytes` are sent as they are.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/datasets/{ds}/dap", get(root).head(root))
        .route("/v1/datasets/{ds}/dap/", get(root).head(root))
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
    caller: Caller,
}

/// `/v1/datasets/{ds}/dap`: the root group, without a suffix.
async fn root(State(state): State<Arc<AppState>>, Path(ds): Path<String>, sent: Sent) -> Response {
    respond(&state, ds, String::new(), "", sent).await
}

/// `/v1/datasets/{ds}/dap.{suffix}`: the root group (`dap.dds`,
/// `dap.html`, ...: any suffix gets a DAP2 answer); any other file name is
/// no route.
pub(super) async fn root_file(
    State(state): State<Arc<AppState>>,
    Path((ds, file)): Path<(String, String)>,
    sent: Sent,
) -> Response {
    match file.strip_prefix("dap.") {
        Some(suffix) => respond(&state, ds, String::new(), suffix, sent).await,
        None => ApiError::NotFound("no such route; see /openapi.yaml".into()).into_response(),
    }
}

/// `/v1/datasets/{ds}/dap/{group}.{suffix}`.
async fn group(State(state): State<Arc<AppState>>, Path((ds, rest)): Path<(String, String)>, sent: Sent) -> Response {
    let (group, suffix) = match rest.rsplit_once('.') {
        Some((group, suffix)) if !suffix.contains('/') => (group.to_string(), suffix.to_string()),
        _ => (rest.clone(), String::new()),
    };
    respond(&state, ds, group, &suffix, sent).await
}

async fn respond(state: &AppState, ds: String, group: String, suffix: &str, sent: Sent) -> Response {
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
        query: sent.query,
        method: sent.method,
        headers: sent.headers,
        caller: sent.caller,
    };
    match request.answer().await {
        Ok(response) => with_dap_headers(response, answer.description()),
        Err(e) => dap_error(e),
    }
}

impl Request<'_> {
    async fn answer(&self) -> Result<Response, ApiError> {
        let dataset = &self.state.dataset(&self.ds, &self.caller).await?;
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
        let parts: Vec<Part> = text::ascii_names(dap, projection)
            .into_iter()
            .zip(reads.0)
            .map(|(name, read)| {
                let encoder = AsciiArray::new(&name, read.data_type, read.dap, read.plan.output_shape());
                read.part(ready.versions(), Arc::new(encoder))
            })
            .collect();
        let header = Bytes::from(format!("{dds}{}", text::ASCII_RULE));
        let body = stream_parts(self.state.metrics.clone(), dataset.clone(), header, parts);
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
            .streamed(streamed)
            .numbers();
        let response = match described.check(&self.method, &self.headers).await? {
            Checked::Answered(response) => response,
            Checked::Read(ready) if !streamed => {
                let pinned = ready.versions();
                let mut body = header;
                for read in &reads.0 {
                    let (data, _) = dataset.read_pinned(&read.plan, Some(pinned)).await?;
                    let xdr = read.xdr(dataset.resources().buffers());
                    body.extend_from_slice(&xdr.whole(data).map_err(|e| self.corrupt(e))?);
                }
                ready.whole(Bytes::from(body))
            }
            Checked::Read(ready) => {
                let buffers = dataset.resources().buffers();
                let parts = reads
                    .0
                    .into_iter()
                    .map(|read| {
                        let xdr = read.xdr(buffers.clone());
                        read.part(ready.versions(), Arc::new(xdr))
                    })
                    .collect();
                let body = stream_parts(self.state.metrics.clone(), dataset.clone(), Bytes::from(header), parts);
                ready.stream(body)
            }
        };
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

    /// Its writer in `.dods`.
    fn xdr(&self, buffers: Arc<BufferPool>) -> XdrArray {
        XdrArray::new(
            self.data_type,
            self.dap,
            self.count,
            self.scalar,
            self.big_endian,
            buffers,
        )
    }

    /// This read, pinned to the versions of its own keys among `all`, written by `encoder`.
    fn part(self, all: &Versions, encoder: Arc<dyn Encoder>) -> Part {
        Part {
            versions: own_versions(&self.plan, all),
            plan: self.plan,
            encoder,
        }
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
pub(super) fn dap_error(error: ApiError) -> Response {
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
