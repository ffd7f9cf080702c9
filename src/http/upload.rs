//! Request bodies of writes (api.md 4.2): received whole before anything
//! is written (in memory up to `slab_bytes`, then spooled to an unnamed
//! file in `write_spool_dir` that is gone with the request), then read as
//! the region's elements by their `Content-Type`: the elements as
//! `format=binary` sends them, a `.npy` file, or JSON nested lists.

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use super::problem::ApiError;
use crate::engine::{DataType, InMemory, Items, RegionBody, Repeated};
use crate::storage::Payload;

/// How much a body may be, and where large ones go.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// `max_request_bytes`: larger is 413.
    pub(crate) max: u64,
    /// Bodies larger than this are spooled to disk (`slab_bytes`); JSON
    /// bodies larger than this are 413 (parsed in memory).
    pub(crate) in_memory: u64,
    /// `write_spool_dir`.
    pub(crate) spool_dir: PathBuf,
}

/// A body received whole.
#[derive(Debug, Clone)]
pub(crate) enum Upload {
    Memory(Bytes),
    /// An unnamed file (removed by the system once closed) and its length.
    File(Arc<std::fs::File>, u64),
}

impl Upload {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Upload::Memory(b) => b.len() as u64,
            Upload::File(_, len) => *len,
        }
    }

    /// `len` bytes from `offset` (the caller keeps inside the body).
    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Bytes> {
        match self {
            Upload::Memory(b) => Ok(b.slice(offset as usize..offset as usize + len)),
            Upload::File(file, _) => Mapped::new(file, offset, len).map(Bytes::from_owner),
        }
    }
}

/// Part of a spool file mapped into memory read-only: its bytes are read
/// where the page cache holds them, not copied. The mapping (and the
/// resident pages it counts) goes with the last `Bytes` made from it.
struct Mapped {
    at: *mut libc::c_void,
    mapped: usize,
    /// Where the bytes asked for start in the mapping (it starts on a page).
    skip: usize,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone.
unsafe impl Send for Mapped {}
// SAFETY: as above; `&Mapped` only reads.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// `len` bytes of `file` from `offset`, which the file holds.
    fn new(file: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return Ok(Self {
                at: std::ptr::null_mut(),
                mapped: 0,
                skip: 0,
                len: 0,
            });
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        let start = offset - offset % page;
        let skip = (offset - start) as usize;
        let mapped = skip + len;
        // SAFETY: a new private read-only mapping of a file this process
        // made, wrote whole and never shortens (an unnamed spool file), so
        // no access through it faults.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                file.as_raw_fd(),
                start as libc::off_t,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { at, mapped, skip, len })
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `skip + len` bytes are mapped readable from `at` while self lives.
        unsafe { std::slice::from_raw_parts((self.at as *const u8).add(self.skip), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.mapped > 0 {
            // SAFETY: unmaps exactly the mapping made in `new`, once.
            unsafe { libc::munmap(self.at, self.mapped) };
        }
    }
}

fn too_large(limit: u64) -> ApiError {
    ApiError::Rejected(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is larger than max_request_bytes = {limit}; nothing was written"),
    )
}

fn cut_short(e: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!(
        "the request body could not be received whole ({e}); nothing was written"
    ))
}

/// Receive `body` whole: 413 above `limits.max` (at once when
/// `Content-Length` says so), 400 when it ends early. Above
/// `limits.in_memory` the pieces received go to the spool file as they
/// come, a batch at a time on a blocking thread while the next arrives.
pub(crate) async fn receive(body: Body, headers: &HeaderMap, limits: &Limits) -> Result<Upload, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max) {
        return Err(too_large(limits.max));
    }
    let mut body = body;
    let mut pending: Vec<Bytes> = Vec::new();
    let mut spool: Option<Spool> = None;
    let mut total = 0u64;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(cut_short)?.into_data() else {
            continue;
        };
        total += data.len() as u64;
        if total > limits.max {
            return Err(too_large(limits.max));
        }
        match &mut spool {
            Some(spool) => spool.push(&data).await?,
            None => pending.push(data),
        }
        if spool.is_none() && total > limits.in_memory {
            let mut opened = Spool::new(&limits.spool_dir).await?;
            for part in pending.drain(..) {
                opened.push(&part).await?;
            }
            spool = Some(opened);
        }
    }
    if declared.is_some_and(|n| n != total) {
        return Err(cut_short(format!("{total} of {} bytes", declared.unwrap_or(0))));
    }
    match spool {
        None => Ok(Upload::Memory(Payload::from(pending).to_bytes())),
        Some(spool) => Ok(Upload::File(spool.close().await?, total)),
    }
}

/// Bytes of a body written to the spool file at once.
const SPOOL_BATCH: usize = 4 << 20;

/// A body's spool file being written: the pieces received are gathered
/// into a batch while the one before is written on a blocking thread. The
/// two batch buffers are used over and over (fresh memory for every piece
/// costs more in page faults than the copy into a warm buffer).
struct Spool {
    file: Arc<std::fs::File>,
    /// Bytes handed to the writer so far.
    sent: u64,
    filling: Vec<u8>,
    writing: Option<tokio::task::JoinHandle<std::io::Result<Vec<u8>>>>,
}

impl Spool {
    async fn new(dir: &std::path::Path) -> Result<Self, ApiError> {
        let dir = dir.to_path_buf();
        let file = tokio::task::spawn_blocking(move || tempfile::tempfile_in(dir))
            .await
            .map_err(|e| spool_failed(std::io::Error::other(e)))?
            .map_err(spool_failed)?;
        Ok(Self {
            file: Arc::new(file),
            sent: 0,
            filling: Vec::with_capacity(SPOOL_BATCH),
            writing: None,
        })
    }

    /// Add `data` to the body, writing the batch when it is full.
    async fn push(&mut self, mut data: &[u8]) -> Result<(), ApiError> {
        while !data.is_empty() {
            let room = SPOOL_BATCH - self.filling.len();
            let (now, rest) = data.split_at(room.min(data.len()));
            self.filling.extend_from_slice(now);
            data = rest;
            if self.filling.len() == SPOOL_BATCH {
                self.send().await?;
            }
        }
        Ok(())
    }

    /// Write the batch gathered, once the one in flight is written.
    async fn send(&mut self) -> Result<(), ApiError> {
        let spare = self.finish().await?.unwrap_or_else(|| Vec::with_capacity(SPOOL_BATCH));
        let batch = std::mem::replace(&mut self.filling, spare);
        let (file, at) = (self.file.clone(), self.sent);
        self.sent += batch.len() as u64;
        self.writing = Some(tokio::task::spawn_blocking(move || {
            file.write_all_at(&batch, at)?;
            Ok(batch)
        }));
        Ok(())
    }

    /// Wait for the batch in flight; its buffer, emptied.
    async fn finish(&mut self) -> Result<Option<Vec<u8>>, ApiError> {
        let Some(writing) = self.writing.take() else {
            return Ok(None);
        };
        let mut buffer = writing
            .await
            .map_err(|e| spool_failed(std::io::Error::other(e)))?
            .map_err(spool_failed)?;
        buffer.clear();
        Ok(Some(buffer))
    }

    /// Write what is left; the file, whole.
    async fn close(mut self) -> Result<Arc<std::fs::File>, ApiError> {
        if !self.filling.is_empty() {
            self.send().await?;
        }
        self.finish().await?;
        Ok(self.file)
    }
}

fn spool_failed(e: std::io::Error) -> ApiError {
    tracing::error!(error = %e, "cannot spool a request body to write_spool_dir");
    ApiError::Rejected(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the request body could not be spooled to disk ({e}); nothing was written"),
    )
}

/// The forms a write's body may take, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `application/octet-stream`: elements as `format=binary` sends them.
    Binary,
    /// `application/x-npy`.
    Npy,
    /// `application/json`: nested lists as `format=json`'s `data`.
    Json,
}

impl Kind {
    /// The form `Content-Type` names; 415 for any other.
    pub(crate) fn of(headers: &HeaderMap) -> Result<Self, ApiError> {
        let given = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
        match given.as_deref() {
            Some("application/octet-stream") => Ok(Kind::Binary),
            Some("application/x-npy") => Ok(Kind::Npy),
            Some("application/json") => Ok(Kind::Json),
            other => Err(ApiError::Rejected(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "a write's body is application/octet-stream, application/x-npy or application/json, not {}",
                    other.map_or("a body without Content-Type".to_string(), |t| format!("'{t}'"))
                ),
            )),
        }
    }
}

/// The region a body must fill: its shape as a read of it answers (no
/// dimension an integer selects), its shape in the array's rank, and the
/// element type.
pub(crate) struct Region<'a> {
    pub(crate) shape: &'a [u64],
    pub(crate) rank_shape: &'a [u64],
    pub(crate) data_type: DataType,
}

impl Region<'_> {
    fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Bytes of one position along the first dimension of `rank_shape`.
    fn row_bytes(&self) -> usize {
        self.rank_shape.iter().skip(1).product::<u64>() as usize * self.data_type.size()
    }

    fn describe(&self) -> String {
        format!("{:?} of {}", self.shape, self.data_type.name())
    }
}

/// The elements of `upload` (a body of `kind`) for `region`: 400 stating
/// what was expected and what came when they do not fit it.
pub(crate) async fn elements(
    kind: Kind,
    upload: Upload,
    region: &Region<'_>,
    limits: &Limits,
) -> Result<Arc<dyn RegionBody>, ApiError> {
    if region.data_type.is_variable() && kind != Kind::Json {
        return Err(ApiError::Rejected(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "elements of {} (variable length) are written as application/json",
                region.data_type.name()
            ),
        ));
    }
    match kind {
        Kind::Binary => {
            let expected = region.elements() * region.data_type.size() as u64;
            if upload.len() != expected {
                return Err(ApiError::BadRequest(format!(
                    "the body has {} bytes; the region {} takes {expected} ({} elements of {} bytes, little-endian, C order)",
                    upload.len(),
                    region.describe(),
                    region.elements(),
                    region.data_type.size()
                )));
            }
            Ok(Arc::new(Elements::new(upload, 0, region, 1)))
        }
        Kind::Npy => npy(upload, region),
        Kind::Json => {
            check_json_size(kind, &upload, limits)?;
            let data = upload.read_at(0, upload.len() as usize).map_err(cut_short)?;
            let value: Value = serde_json::from_slice(&data)
                .map_err(|e| ApiError::BadRequest(format!("the body is not valid JSON: {e}")))?;
            json(&value, region)
        }
    }
}

/// 413 for a JSON body larger than `slab_bytes` (JSON is parsed in memory).
pub(crate) fn check_json_size(kind: Kind, upload: &Upload, limits: &Limits) -> Result<(), ApiError> {
    if kind != Kind::Json || upload.len() <= limits.in_memory {
        return Ok(());
    }
    Err(ApiError::Rejected(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "a JSON body may be at most slab_bytes = {} bytes; send larger regions as application/octet-stream or application/x-npy",
            limits.in_memory
        ),
    ))
}

/// Elements read from an upload, from `offset`, byte order swapped in
/// units of `swap` bytes (1: as they are).
struct Elements {
    upload: Upload,
    offset: u64,
    row_bytes: usize,
    swap: usize,
}

impl Elements {
    fn new(upload: Upload, offset: u64, region: &Region<'_>, swap: usize) -> Self {
        Self {
            upload,
            offset,
            row_bytes: region.row_bytes(),
            swap,
        }
    }
}

impl RegionBody for Elements {
    fn rows(&self, rows: Range<u64>) -> std::io::Result<Bytes> {
        let start = self.offset + rows.start * self.row_bytes as u64;
        let data = self
            .upload
            .read_at(start, (rows.end - rows.start) as usize * self.row_bytes)?;
        if self.swap <= 1 {
            return Ok(data);
        }
        let mut swapped = data.to_vec();
        for unit in swapped.chunks_exact_mut(self.swap) {
            unit.reverse();
        }
        Ok(Bytes::from(swapped))
    }
}

/// A `.npy` body (versions 1 to 3) whose dtype is the array's in either
/// byte order, of the region's shape (or a scalar filling it).
fn npy(upload: Upload, region: &Region<'_>) -> Result<Arc<dyn RegionBody>, ApiError> {
    let (swap, shape, offset) = npy_header(&upload, region.data_type)?;
    let data_type = region.data_type;
    if shape.is_empty() {
        let mut element = upload.read_at(offset, data_type.size()).map_err(cut_short)?.to_vec();
        if swap > 1 {
            for unit in element.chunks_exact_mut(swap) {
                unit.reverse();
            }
        }
        return Ok(Arc::new(Repeated::new(element, region.row_bytes())));
    }
    if shape != region.shape {
        return Err(ApiError::BadRequest(format!(
            "the .npy body has shape {shape:?}; the region is {}",
            region.describe()
        )));
    }
    Ok(Arc::new(Elements::new(upload, offset, region, swap)))
}

/// A `.npy` body's header, checked: the byte swap its elements need (1:
/// none), its shape, and where its data starts.
fn npy_header(upload: &Upload, data_type: DataType) -> Result<(usize, Vec<u64>, u64), ApiError> {
    let bad = |what: String| ApiError::BadRequest(format!("the .npy body {what}"));
    let head = upload
        .read_at(0, upload.len().min(64 << 10) as usize)
        .map_err(cut_short)?;
    if head.len() < 10 || &head[..6] != b"\x93NUMPY" {
        return Err(bad("does not start with the .npy magic string".into()));
    }
    let (len_bytes, start) = match head[6] {
        1 => (2, 10),
        2 | 3 => (4, 12),
        v => return Err(bad(format!("has format version {v}; versions 1 to 3 are read"))),
    };
    let header_len = match len_bytes {
        2 => u16::from_le_bytes([head[8], head[9]]) as usize,
        _ if head.len() >= 12 => u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
        _ => return Err(bad("is cut short in its header".into())),
    };
    let header = head
        .get(start..start + header_len)
        .ok_or_else(|| bad("is cut short in its header".into()))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("has a header that is not text".into()))?;
    let descr = dict_field(header, "descr").ok_or_else(|| bad(format!("header has no 'descr': {header}")))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let fortran = dict_field(header, "fortran_order").ok_or_else(|| bad("header has no 'fortran_order'".into()))?;
    let shape_text = dict_field(header, "shape").ok_or_else(|| bad("header has no 'shape'".into()))?;
    let shape: Vec<u64> = shape_text
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad(format!("has shape {shape_text}")))?;
    let expected = data_type.numpy_dtype().unwrap_or_default();
    let (order, rest) = expected.split_at(1.min(expected.len()));
    let swap = match descr.split_at(1.min(descr.len())) {
        (o, r) if r == rest && (o == order || (data_type.swap_unit() == 1 && "<>|".contains(o))) => 1,
        (">", r) if r == rest => data_type.swap_unit(),
        _ => {
            return Err(bad(format!(
                "has dtype '{descr}'; the array's is '{expected}' (either byte order)"
            )))
        }
    };
    if fortran.trim() == "True" && shape.iter().filter(|&&n| n > 1).count() > 1 {
        return Err(bad(
            "is in Fortran order; send it in C order (numpy.ascontiguousarray)".into()
        ));
    }
    let offset = (start + header_len) as u64;
    let count: u64 = shape.iter().product();
    let data_len = upload.len().saturating_sub(offset);
    if data_len != count * data_type.size() as u64 {
        return Err(bad(format!(
            "holds {data_len} bytes of data; its header says {count} elements of {} bytes",
            data_type.size()
        )));
    }
    Ok((swap, shape, offset))
}

/// The length along `dim` of an append's body (`shape`: the array's, which
/// the body must equal along every other dimension): 400 when it has none.
pub(crate) fn free_length(
    kind: Kind,
    upload: &Upload,
    shape: &[u64],
    dim: usize,
    data_type: DataType,
) -> Result<u64, ApiError> {
    let other: Vec<u64> = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if d == dim { 0 } else { n })
        .collect();
    let expected = || format!("{other:?} with any length along dimension {dim}");
    let count = match kind {
        Kind::Binary => {
            let slice = other
                .iter()
                .enumerate()
                .filter(|(d, _)| *d != dim)
                .map(|(_, n)| n)
                .product::<u64>()
                * data_type.size() as u64;
            match slice > 0 && upload.len().is_multiple_of(slice) {
                true => upload.len() / slice,
                false => {
                    return Err(ApiError::BadRequest(format!(
                        "the body has {} bytes, not a whole number of {slice}-byte slices of {} along dimension {dim}",
                        upload.len(),
                        expected()
                    )))
                }
            }
        }
        Kind::Npy => {
            let (_, npy_shape, _) = npy_header(upload, data_type)?;
            let fits = npy_shape.len() == shape.len()
                && npy_shape
                    .iter()
                    .zip(&other)
                    .enumerate()
                    .all(|(d, (a, b))| d == dim || a == b);
            if !fits {
                return Err(ApiError::BadRequest(format!(
                    "the .npy body has shape {npy_shape:?}; an append takes {}",
                    expected()
                )));
            }
            npy_shape[dim]
        }
        Kind::Json => {
            let data = upload.read_at(0, upload.len() as usize).map_err(cut_short)?;
            let value: Value = serde_json::from_slice(&data)
                .map_err(|e| ApiError::BadRequest(format!("the body is not valid JSON: {e}")))?;
            let mut at = &value;
            for _ in 0..dim {
                at = at.as_array().and_then(|a| a.first()).unwrap_or(&Value::Null);
            }
            match at.as_array() {
                Some(items) => items.len() as u64,
                None => {
                    return Err(ApiError::BadRequest(format!(
                        "the JSON body is not nested lists of {}",
                        expected()
                    )))
                }
            }
        }
    };
    if count == 0 {
        return Err(ApiError::BadRequest("the body appends nothing (length 0)".into()));
    }
    Ok(count)
}

/// The text of `field`'s value in a `.npy` header (a Python dict literal).
fn dict_field<'h>(header: &'h str, field: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{field}'"))? + field.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = match rest.chars().next()? {
        '(' => rest.find(')')? + 1,
        q @ ('\'' | '"') => rest[1..].find(q)? + 2,
        _ => rest.find([',', '}']).unwrap_or(rest.len()),
    };
    Some(&rest[..end])
}

/// A JSON body: nested lists of the region's shape, or one value filling it.
fn json(value: &Value, region: &Region<'_>) -> Result<Arc<dyn RegionBody>, ApiError> {
    let data_type = region.data_type;
    if data_type.is_variable() {
        return variable(value, region);
    }
    if !region.shape.is_empty() && !value.is_array() {
        let element = element(value, data_type, &[])?;
        return Ok(Arc::new(Repeated::new(element, region.row_bytes())));
    }
    let mut out = Vec::with_capacity(region.elements() as usize * data_type.size());
    let mut at = Vec::new();
    walk(value, region.shape, data_type, &mut at, &mut out)?;
    Ok(Arc::new(InMemory::new(Bytes::from(out), region.row_bytes())))
}

/// A JSON body of strings (or bytes): handles into the elements, which
/// are kept apart (see [`Items`]).
fn variable(value: &Value, region: &Region<'_>) -> Result<Arc<dyn RegionBody>, ApiError> {
    let mut encoded = Vec::new();
    if !region.shape.is_empty() && !value.is_array() {
        encoded.extend(element(value, region.data_type, &[])?);
        let item = split_items(&encoded).pop().expect("one element");
        return Ok(Arc::new(Items::repeated(item, region.row_bytes())));
    }
    walk(value, region.shape, region.data_type, &mut Vec::new(), &mut encoded)?;
    Ok(Arc::new(Items::listed(split_items(&encoded), region.row_bytes())))
}

/// Elements each encoded as a `u32` length and their bytes, apart.
fn split_items(encoded: &[u8]) -> Vec<Vec<u8>> {
    crate::engine::vlen::items(encoded)
        .expect("encoded here")
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect()
}

fn walk(
    value: &Value,
    shape: &[u64],
    data_type: DataType,
    at: &mut Vec<usize>,
    out: &mut Vec<u8>,
) -> Result<(), ApiError> {
    let Some((&n, inner)) = shape.split_first() else {
        out.extend(element(value, data_type, at)?);
        return Ok(());
    };
    let items = value.as_array().filter(|a| a.len() as u64 == n).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "the JSON body at {at:?} is {}; expected a list of {n} (the region's shape)",
            describe(value)
        ))
    })?;
    for (i, item) in items.iter().enumerate() {
        at.push(i);
        walk(item, inner, data_type, at, out)?;
        at.pop();
    }
    Ok(())
}

fn element(value: &Value, data_type: DataType, at: &[usize]) -> Result<Vec<u8>, ApiError> {
    let text_expected = matches!(data_type, DataType::String | DataType::FixedUtf32(_));
    let parsed = match text_expected && !value.is_string() {
        true => Err(()),
        false => data_type.fill_value_from_json(value).map_err(|_| ()),
    };
    parsed.map_err(|_| {
        ApiError::BadRequest(format!(
            "the JSON body's element at {at:?} is {}: not a value of {}",
            describe(value),
            data_type.name()
        ))
    })
}

fn describe(value: &Value) -> String {
    let text = value.to_string();
    match text.len() > 40 {
        true => format!("{}...", &text[..text.floor_char_boundary(40)]),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_headers_are_read() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
        assert_eq!(dict_field(header, "descr"), Some("'<f4'"));
        assert_eq!(dict_field(header, "fortran_order"), Some("False"));
        assert_eq!(dict_field(header, "shape"), Some("(3, 4)"));
        let scalar = "{'descr': '>i8', 'fortran_order': True, 'shape': (), }";
        assert_eq!(dict_field(scalar, "shape"), Some("()"));
        assert_eq!(dict_field(scalar, "fortran_order"), Some("True"));
    }

    /// A body received in uneven pieces, larger than the in-memory limit
    /// and than a spool batch, reads back byte for byte at offsets that
    /// fall inside pages and across batches; one in memory too.
    #[tokio::test]
    async fn bodies_read_back_as_sent_from_memory_and_from_the_spool() {
        let dir = tempfile::tempdir().expect("temp dir");
        let sent: Vec<u8> = (0..SPOOL_BATCH * 2 + 12_345).map(|i| (i * 7 % 251) as u8).collect();
        for in_memory in [sent.len() as u64, 100_000] {
            let limits = Limits {
                max: 1 << 30,
                in_memory,
                spool_dir: dir.path().to_path_buf(),
            };
            let pieces: Vec<Result<Bytes, std::io::Error>> =
                sent.chunks(70_001).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
            let body = Body::from_stream(futures::stream::iter(pieces));
            let upload = receive(body, &HeaderMap::new(), &limits).await.expect("received");
            assert_eq!(upload.len(), sent.len() as u64);
            assert_eq!(matches!(upload, Upload::File(..)), in_memory < sent.len() as u64);
            for (offset, len) in [
                (0, sent.len()),
                (1, 4095),
                (4097, SPOOL_BATCH),
                (sent.len() - 3, 3),
                (10, 0),
            ] {
                let read = upload.read_at(offset as u64, len).expect("read");
                assert_eq!(&read[..], &sent[offset..offset + len], "{offset}+{len}");
            }
        }
    }
}
