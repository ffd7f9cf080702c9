//! The one response pipeline of every route that reads array data
//! (api.md 4.1). A protocol adapter parses its request, plans its reads
//! and describes its answer ([`Answer`]: what names it, what it reads, its
//! headers and size); [`Answer::check`] then does, in this order and in
//! this one place, what surrounds every read:
//!
//! 1. size: 413 above `max_response_bytes` (and, for pictures of maps,
//!    above `tile_read_limit_bytes` of decoded chunks), nothing read;
//! 2. validators: the versions of every key the plans touch (shard indexes
//!    or HEADs, no chunk data), and from them and the representation the
//!    strong ETag; a matching `If-None-Match` is 304;
//! 3. HEAD: GET's headers, `Content-Length` included, no body. No chunk
//!    data is read when the length is known before reading (binary, npy,
//!    NetCDF), when GET streams without one, or when a GET of the same
//!    answer (the same ETag) has been sent; else (a JSON answer, a
//!    picture, never sent before) the answer is made to be measured.
//!
//! Only then does the adapter read, pinned to those versions (so the body
//! is the one the ETag names), and hand back the body whole or as a stream
//! ([`Ready::whole`], [`Ready::stream`]). The read slot is taken before the
//! handler runs, by the route layer [`super::read_slot`].

use axum::body::Body;
use axum::http::header::{self, HeaderName};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::conditional::{if_none_match, tag};
use super::problem::ApiError;
use super::AppState;
use crate::engine::{Dataset, ReadPlan, Versions};

/// Bytes of elements above which they are encoded off the async workers.
pub(crate) const INLINE_ENCODE_BYTES: usize = 1 << 20;

/// The one whole-or-stream rule (api.md 4.1, 4): an answer streams when
/// a read of it takes more than one slab, or all together decode more
/// than `slab_bytes`; else it is read whole.
pub(crate) fn streams<'p>(dataset: &Dataset, plans: impl IntoIterator<Item = &'p ReadPlan>) -> bool {
    let (mut several, mut bytes) = (false, 0u64);
    for plan in plans {
        several |= plan.slab_count() > 1;
        bytes = bytes.saturating_add(plan.output_bytes());
    }
    several || bytes > dataset.resources().read.slab_bytes
}

/// An answer described before anything of it is read.
pub(crate) struct Answer<'a> {
    state: &'a AppState,
    dataset: &'a Dataset,
    /// What names the representation besides the versions read.
    key: Sha256,
    plans: Vec<&'a ReadPlan>,
    headers: HeaderMap,
    /// The body's length, when known before reading.
    length: Option<u64>,
    /// The decoded size of the answer (api.md 4.1, 1).
    bytes: u64,
    /// Decoded chunk bytes of a map picture, and what to say above the limit.
    decodes: Option<(u64, String)>,
    /// Whether GET streams the answer (without a length when unknown).
    streamed: bool,
    /// Numbers as bytes: compressed on request only up to this length.
    compress_up_to: Option<u64>,
}

/// What [`Answer::check`] decided.
pub(crate) enum Checked {
    /// Answered without reading: 304, or a HEAD.
    Answered(Response),
    /// To read, pinned to [`Ready::versions`], then send.
    Read(Ready),
}

/// An answer whose validators are known: read, then send.
pub(crate) struct Ready {
    lengths: moka::sync::Cache<String, u64>,
    etag: String,
    headers: HeaderMap,
    length: Option<u64>,
    versions: Versions,
    /// A HEAD, made to be measured: the body is dropped.
    head: bool,
    compress_up_to: Option<u64>,
}

impl<'a> Answer<'a> {
    /// An answer of `dataset` in `content_type`, named by `route` (e.g.
    /// `"tile"`) and the parts given to [`Answer::key`].
    pub(crate) fn new(state: &'a AppState, dataset: &'a Dataset, route: &str, content_type: &str) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).expect("a valid media type"),
        );
        let answer = Answer {
            state,
            dataset,
            key: Sha256::new(),
            plans: Vec::new(),
            headers,
            length: None,
            bytes: 0,
            decodes: None,
            streamed: false,
            compress_up_to: None,
        };
        answer.key(dataset.scope.as_bytes()).key(route).key(content_type)
    }

    /// One more part of what names the representation (a selection, the
    /// format's options, a rendering).
    pub(crate) fn key(mut self, part: impl AsRef<[u8]>) -> Self {
        self.key.update(part.as_ref());
        self.key.update([0]);
        self
    }

    /// A read the answer makes: its node's metadata version and the
    /// versions of its keys name the answer.
    pub(crate) fn plan(mut self, plan: &'a ReadPlan) -> Self {
        self.plans.push(plan);
        self
    }

    /// A header sent with the answer (and with its 304 and HEAD).
    pub(crate) fn header(mut self, name: HeaderName, value: impl TryInto<HeaderValue>) -> Self {
        if let Ok(value) = value.try_into() {
            self.headers.append(name, value);
        }
        self
    }

    /// The body's length in bytes, known before reading.
    pub(crate) fn length(mut self, length: Option<u64>) -> Self {
        self.length = length;
        self
    }

    /// Whether GET streams the answer (a length unknown before reading is
    /// then not sent, and a HEAD needs none).
    pub(crate) fn streamed(mut self, streamed: bool) -> Self {
        self.streamed = streamed;
        self
    }

    /// The body is numbers as bytes (binary, npy, NetCDF, GeoTIFF, XDR):
    /// compressing them on the fly is several times slower than sending
    /// them, so one larger than `compress_max_bytes`, or of a length not
    /// known before it is sent, goes uncompressed whatever the client
    /// accepts (on GET and HEAD alike).
    pub(crate) fn numbers(mut self) -> Self {
        self.compress_up_to = Some(self.state.compress_max_bytes);
        self
    }

    /// The decoded size of the answer: elements times element size (8 a
    /// variable-length element), 4 bytes a pixel.
    pub(crate) fn bytes(mut self, bytes: u64) -> Self {
        self.bytes = bytes;
        self
    }

    /// The chunk bytes a map picture decodes; above `tile_read_limit_bytes`
    /// it is 413 with `hint` (what to ask for instead) after the limit.
    pub(crate) fn decodes(mut self, decoded: u64, hint: String) -> Self {
        self.decodes = Some((decoded, hint));
        self
    }

    /// 413 when the answer is larger than `max_response_bytes` or, for a
    /// map picture, decodes more than `tile_read_limit_bytes`: known from
    /// the plans alone. [`Answer::check`] asks first; an adapter with work
    /// to do before naming its answer (a default colour range) asks earlier.
    pub(crate) fn refuse_oversize(&self) -> Result<(), ApiError> {
        let limit = self.state.max_response_bytes;
        if self.bytes > limit {
            return Err(ApiError::TooLarge {
                requested: self.bytes,
                limit,
            });
        }
        if let Some((decoded, hint)) = &self.decodes {
            let limit = self.state.tile_read_limit_bytes;
            if *decoded > limit {
                return Err(ApiError::Rejected(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the answer would decode {decoded} bytes of chunks, more than tile_read_limit_bytes = {limit}; {hint}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The answer's ETag as the store is now (what a GET would send),
    /// without reading chunk data.
    /// The ETag the answer would carry now, and the object versions it
    /// was made of.
    pub(crate) async fn current_versions(&self) -> Result<(String, Versions), ApiError> {
        let versions = self.dataset.read_versions_of(&self.plans).await?;
        Ok((self.etag(&versions), versions))
    }

    /// Size, validators, 304 and HEAD, in the order of api.md 4.1.
    pub(crate) async fn check(self, method: &Method, request: &HeaderMap) -> Result<Checked, ApiError> {
        self.refuse_oversize()?;
        let versions = self.dataset.read_versions_of(&self.plans).await?;
        let etag = self.etag(&versions);
        let mut headers = self.headers;
        headers.insert(header::ETAG, HeaderValue::from_str(&etag).expect("hex"));
        if if_none_match(request, &etag) {
            headers.remove(header::CONTENT_TYPE);
            return Ok(Checked::Answered(reply(
                StatusCode::NOT_MODIFIED,
                headers,
                None,
                Body::empty(),
                None,
            )));
        }
        let head = method == Method::HEAD;
        let length = self.length.or_else(|| self.state.answer_lengths.get(&etag));
        if head && (length.is_some() || self.streamed) {
            let answer = reply(StatusCode::OK, headers, length, Body::empty(), self.compress_up_to);
            return Ok(Checked::Answered(answer));
        }
        Ok(Checked::Read(Ready {
            lengths: self.state.answer_lengths.clone(),
            etag,
            headers,
            length: self.length,
            versions,
            head,
            compress_up_to: self.compress_up_to,
        }))
    }

    /// The strong ETag: the representation, each plan's node and metadata
    /// version, and the version of every key read.
    fn etag(&self, versions: &Versions) -> String {
        let mut h = self.key.clone();
        for plan in &self.plans {
            let node = plan.node();
            for part in [node.path.as_bytes(), node.etag.as_deref().unwrap_or("").as_bytes()] {
                h.update(part);
                h.update([0]);
            }
        }
        for (key, version) in versions {
            h.update(key.as_bytes());
            h.update([0]);
            h.update(version.as_deref().unwrap_or("-").as_bytes());
            h.update([0]);
        }
        tag(h)
    }
}

impl Ready {
    /// The versions every read of the answer is pinned to.
    pub(crate) fn versions(&self) -> &Versions {
        &self.versions
    }

    /// The answer made in memory (its length kept for a later HEAD).
    pub(crate) fn whole(self, body: Bytes) -> Response {
        let length = body.len() as u64;
        debug_assert!(
            self.length.is_none_or(|l| l == length),
            "the length said before reading"
        );
        if self.length.is_none() {
            self.lengths.insert(self.etag, length);
        }
        let body = match self.head {
            true => Body::empty(),
            false => Body::from(body),
        };
        reply(StatusCode::OK, self.headers, Some(length), body, self.compress_up_to)
    }

    /// The body's length, when known once the answer is read (kept for a
    /// later HEAD).
    pub(crate) fn with_length(mut self, length: Option<u64>) -> Self {
        if let (None, Some(length)) = (self.length, length) {
            self.lengths.insert(self.etag.clone(), length);
            self.length = Some(length);
        }
        self
    }

    /// Whether the request is a HEAD (made to be measured: no body is sent).
    pub(crate) fn is_head(&self) -> bool {
        self.head
    }

    /// The answer streamed: cut short (an incomplete transfer) if a read
    /// fails after the status line.
    pub(crate) fn stream(self, body: Body) -> Response {
        let body = match self.head {
            true => Body::empty(),
            false => body,
        };
        reply(StatusCode::OK, self.headers, self.length, body, self.compress_up_to)
    }
}

fn reply(
    status: StatusCode,
    headers: HeaderMap,
    length: Option<u64>,
    body: Body,
    compress_up_to: Option<u64>,
) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    if let (Some(length), true) = (length, status == StatusCode::OK) {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    if compress_up_to.is_some_and(|most| length.is_none_or(|n| n > most)) {
        response.extensions_mut().insert(super::Uncompressed);
    }
    response
}
