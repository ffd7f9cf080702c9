//! OPeNDAP DAP4 (contract 4.5): one DAP4 dataset per group, at
//! `/v1/datasets/{ds}/dap4` (the root group) and
//! `/v1/datasets/{ds}/dap4/G`, answering `.dmr` (also `.dmr.xml`), `.dap`
//! and `.dsr` as the DAP4 specification defines them, for netCDF-C
//! (`dap4://` URLs), pydap and xarray.
//!
//! A thin adapter: [`model`] maps the hierarchy below a group to DAP4
//! groups, dimensions and variables, [`constraint`] turns `dap4.ce` into
//! the engine's selections, [`dmr`] writes the DMR and DSR, and the `.dap`
//! body is the DMR's chunk then the engine's slab stream encoded by
//! [`crate::encode::dap4`], through the one response pipeline. Errors are
//! DAP4 `<Error>` documents with the contract's statuses.

mod constraint;
pub(crate) use constraint::check_dap4_constraint;
mod dmr;
mod model;

/// The DAP4 datasets of groups, by dataset scope and group, kept for the
/// metadata TTL: clients ask for the DMR and then data.
pub(super) type Models = moka::future::Cache<(String, String), Arc<model::Dap4Dataset>>;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::{Bytes, BytesMut};

use self::constraint::Projection;
use self::model::Dap4Dataset;
use super::body::{own_versions, stream_parts, Part};
use super::conditional::strong_etag;
use super::opendap::Sent;
use super::problem::ApiError;
use super::respond::{self as pipeline, Checked};
use super::AppState;
use crate::encode::dap4::{self as encoding, Dap4Array};
use crate::encode::xml::escape;
use crate::encode::Encoder;
use crate::engine::{Dataset, ReadPlan, Selection};

/// The DMR's media type.
const DMR_TYPE: &str = "application/vnd.opendap.dap4.dataset-metadata+xml";
/// The data response's media type.
const DAP_TYPE: &str = "application/vnd.opendap.dap4.data";
/// The DSR's media type.
const DSR_TYPE: &str = "application/vnd.opendap.dap4.dataset-services+xml";
/// An error's media type.
const ERROR_TYPE: &str = "application/vnd.opendap.dap4.error+xml";

/// The answers a DAP4 dataset gives, by URL suffix.
const SUFFIXES: &str = ".dmr (or .dmr.xml), .dap, .dsr";

/// The DAP4 routes (the root group's `dap4.{suffix}` comes through
/// [`root_file`]). XML answers compress on request; `.dap` bodies larger
/// than `compress_max_bytes` are sent as they are.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/datasets/{ds}/dap4", get(root).head(root))
        .route("/v1/datasets/{ds}/dap4/", get(root).head(root))
        .route("/v1/datasets/{ds}/dap4/{*rest}", get(group).head(group))
        .route_layer(axum::middleware::from_fn(|request, next| {
            super::admit(request, next, |e| dap4_error(ApiError::Engine(e)))
        }))
        .layer(super::compression())
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Dmr,
    Dap,
    Dsr,
}

impl Answer {
    /// The answer and group named by the end of a URL path: `G.dmr`,
    /// `G.dmr.xml`, `G.dap`, `G.dsr`, or `G` alone (the DSR).
    fn split(rest: &str) -> (String, Option<Self>) {
        for (suffix, answer) in [
            (".dmr.xml", Self::Dmr),
            (".dmr", Self::Dmr),
            (".dap", Self::Dap),
            (".dsr.xml", Self::Dsr),
            (".dsr", Self::Dsr),
        ] {
            if let Some(group) = rest.strip_suffix(suffix) {
                return (group.to_string(), Some(answer));
            }
        }
        match rest.rsplit_once('/').map_or(rest, |(_, last)| last).contains('.') {
            true => (rest.to_string(), None),
            false => (rest.to_string(), Some(Self::Dsr)),
        }
    }

    /// The name metrics and ETags give it.
    fn route(self) -> &'static str {
        match self {
            Self::Dmr => "dap4_dmr",
            Self::Dap => "dap4_data",
            Self::Dsr => "dap4_dsr",
        }
    }
}

/// `/v1/datasets/{ds}/dap4`: the root group's DSR.
async fn root(State(state): State<Arc<AppState>>, Path(ds): Path<String>, sent: Sent) -> Response {
    respond(&state, ds, String::new(), Some(Answer::Dsr), sent).await
}

/// `/v1/datasets/{ds}/dap4.{suffix}`: the root group (through the route
/// of `{ds}/{file}` that DAP2's `dap.{suffix}` shares).
pub(super) async fn root_file(
    State(state): State<Arc<AppState>>,
    Path((ds, file)): Path<(String, String)>,
    sent: Sent,
) -> Response {
    let (rest, answer) = Answer::split(file.strip_prefix("dap4").unwrap_or(&file));
    let answer = answer.filter(|_| rest.is_empty());
    respond(&state, ds, String::new(), answer, sent).await
}

/// `/v1/datasets/{ds}/dap4/{group}.{suffix}`.
async fn group(State(state): State<Arc<AppState>>, Path((ds, rest)): Path<(String, String)>, sent: Sent) -> Response {
    let (group, answer) = Answer::split(&rest);
    respond(&state, ds, group, answer, sent).await
}

async fn respond(state: &AppState, ds: String, group: String, answer: Option<Answer>, sent: Sent) -> Response {
    let Some(answer) = answer else {
        return dap4_error(ApiError::NotFound(format!(
            "not a DAP4 answer this server gives; append {SUFFIXES} to the dataset's URL"
        )));
    };
    let request = Request {
        state,
        ds,
        group: group.trim_matches('/').to_string(),
        answer,
        sent,
    };
    match request.answer().await {
        Ok(response) => with_dap4_headers(response),
        Err(e) => dap4_error(e),
    }
}

/// What `dap4.ce` and `dap4.checksum` ask (other parameters are ignored,
/// as DAP4 servers do).
struct Query {
    ce: String,
    checksum: bool,
}

impl Query {
    fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let mut out = Self {
            ce: String::new(),
            checksum: true,
        };
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(&value.replace('+', " "))
                .decode_utf8()
                .map_err(|_| ApiError::BadRequest(format!("'{key}' is not UTF-8 once percent-decoded")))?
                .into_owned();
            match key {
                "dap4.ce" => out.ce = value,
                "dap4.checksum" => {
                    out.checksum = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        other => {
                            return Err(ApiError::BadRequest(format!(
                                "dap4.checksum is true or false, not '{other}'"
                            )))
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// A request: the dataset, the group's path and the answer asked for.
struct Request<'a> {
    state: &'a AppState,
    ds: String,
    group: String,
    answer: Answer,
    sent: Sent,
}

impl Request<'_> {
    async fn answer(&self) -> Result<Response, ApiError> {
        let dataset = &self.state.dataset(&self.ds, &self.sent.caller).await?;
        let key = (dataset.scope.to_string(), self.group.clone());
        let dap = self
            .state
            .dap4_models
            .try_get_with(key, async {
                Dap4Dataset::load(dataset, &self.group).await.map(Arc::new)
            })
            .await
            .map_err(|e| ApiError::Engine(e.as_ref().clone()))?;
        let query = Query::parse(self.sent.query.as_deref())?;
        if self.answer == Answer::Dsr {
            let base = self.sent.path.trim_end_matches('/');
            let base = [".dsr.xml", ".dsr"]
                .iter()
                .fold(base, |b, s| b.strip_suffix(s).unwrap_or(b));
            return Ok(self.text(dmr::dsr(base), DSR_TYPE));
        }
        let projection = Projection::parse(&query.ce, &dap).map_err(ApiError::BadRequest)?;
        let text = dmr::dmr(&dap, &projection);
        match self.answer {
            Answer::Dap => self.data(dataset, &dap, &projection, text, query.checksum).await,
            _ => Ok(self.text(text, DMR_TYPE)),
        }
    }

    /// An XML answer, tagged by its bytes.
    fn text(&self, body: String, media: &str) -> Response {
        let etag = strong_etag(&[body.as_bytes()]);
        super::conditional::respond(
            Bytes::from(body),
            &format!("{media}; charset=utf-8"),
            &etag,
            &self.sent.method,
            &self.sent.headers,
        )
    }

    /// `.dap`: the DMR's chunk, then each variable's chunks (and checksum),
    /// from memory for small reads, else streamed slab by slab.
    async fn data(
        &self,
        dataset: &Dataset,
        dap: &Dap4Dataset,
        projection: &Projection,
        dmr: String,
        checksum: bool,
    ) -> Result<Response, ApiError> {
        let mut reads = Vec::new();
        for pick in &projection.picks {
            let var = &dap.variables[pick.var];
            let slices: Vec<(u64, u64, u64)> = pick.slices.iter().map(|s| s.strided()).collect();
            reads.push((
                var.data_type,
                dataset.plan_node(var.node.clone(), &Selection::of_strided(&slices))?,
            ));
        }
        let head = encoding::dmr_chunk(&dmr, reads.is_empty(), checksum).ok_or_else(|| {
            ApiError::Rejected(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the DMR of this answer is {} bytes, more than a DAP4 chunk holds; project fewer variables with dap4.ce",
                    dmr.len()
                ),
            )
        })?;
        let streamed = pipeline::streams(dataset, reads.iter().map(|(_, plan)| plan));
        // Read whole, each variable is one run of chunks: its length is
        // known before reading (but for text).
        let count = reads.len();
        let length = reads
            .iter()
            .enumerate()
            .try_fold(head.len() as u64, |total, (i, (data_type, plan))| {
                let last = i + 1 == count;
                Some(total + Dap4Array::whole_length(*data_type, plan.output_elements(), checksum, last)?)
            });
        let mut described = pipeline::Answer::new(self.state, dataset, self.answer.route(), DAP_TYPE)
            .key(&self.group)
            .key(projection.key(dap))
            .key(&dmr)
            .key(if checksum { "crc32" } else { "-" })
            .bytes(head.len() as u64 + reads.iter().map(|(_, plan)| answer_bytes(plan)).sum::<u64>())
            .length(length.filter(|_| !streamed))
            .streamed(streamed)
            .numbers();
        for (_, plan) in &reads {
            described = described.plan(plan);
        }
        let ready = match described.check(&self.sent.method, &self.sent.headers).await? {
            Checked::Answered(response) => return Ok(response),
            Checked::Read(ready) => ready,
        };
        let encoder = |i: usize, data_type| Dap4Array::new(data_type, checksum, i + 1 == count);
        if !streamed {
            let mut body = BytesMut::from(&head[..]);
            for (i, (data_type, plan)) in reads.iter().enumerate() {
                let (data, _) = dataset.read_pinned(plan, Some(ready.versions())).await?;
                // Framed as a stream frames a slab: copied once, into the body.
                let array = encoder(i, *data_type);
                let pieces = array
                    .element_pieces(0, data)
                    .map_err(|e| ApiError::Engine(crate::engine::Error::corrupt(plan.node().path.clone(), e)))?;
                for piece in pieces.iter().chain([&array.tail()]) {
                    body.extend_from_slice(piece);
                }
            }
            return Ok(ready.whole(body.freeze()));
        }
        let parts = reads
            .into_iter()
            .enumerate()
            .map(|(i, (data_type, plan))| Part {
                versions: own_versions(&plan, ready.versions()),
                plan,
                encoder: Arc::new(encoder(i, data_type)),
            })
            .collect();
        Ok(ready.stream(stream_parts(self.state.metrics.clone(), dataset.clone(), head, parts)))
    }
}

/// The decoded size of a read's answer (api.md 4.1, 1): its elements at
/// their size, 8 bytes a variable-length one; a checksum's 4 bytes.
fn answer_bytes(plan: &ReadPlan) -> u64 {
    plan.output_bytes() + 4
}

/// The headers DAP4 clients look for.
fn with_dap4_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert("xdap", HeaderValue::from_static("4.0"));
    headers.insert(
        "xopendap-server",
        HeaderValue::from_static(concat!("zarr-serve/", env!("CARGO_PKG_VERSION"))),
    );
    response
}

/// An error as DAP4 sends it: `<Error httpcode="N"><Message>...`, with
/// the contract's status (and its `Retry-After` or `WWW-Authenticate`).
pub(super) fn dap4_error(error: ApiError) -> Response {
    let status = error.status();
    let message = escape(&error.to_string());
    let mut response = error.into_response();
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error httpcode=\"{}\">\n  <Message>{message}</Message>\n</Error>\n",
        status.as_u16()
    );
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&format!("{ERROR_TYPE}; charset=utf-8")).expect("a valid media type"),
    );
    headers.remove(header::CONTENT_LENGTH);
    response.extensions_mut().insert(super::ProtocolError);
    *response.body_mut() = Body::from(body);
    with_dap4_headers(response)
}
