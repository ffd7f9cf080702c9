//! Writes of variable-length elements (`string`, `bytes`; Zarr v2 object
//! arrays with `vlen-utf8`/`vlen-bytes`).
//!
//! As on the read path ([`crate::engine::format::vlen`]), a chunk being
//! changed is an array of 8-byte handles, so the region geometry
//! ([`super::region::scatter`]) moves them like any fixed-size element:
//! a handle below [`BODY_HANDLE`] names an element the chunk held, one
//! with that bit set an element of the body, and `u64::MAX` the fill value.
//! The handles are resolved into the chunk's encoding (a `u32` length and
//! the bytes of each element) only to encode it.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use super::{InMemory, RegionBody, Repeated};
use crate::engine::error::Result;
use crate::engine::format::codec::CodecChain;
use crate::engine::format::vlen::{encode_item, ranges, FILL_HANDLE};

/// The bit marking a handle that names an element of the body.
const BODY_HANDLE: u64 = 1 << 63;

/// The handle of the body's element `index`.
fn body_handle(index: usize) -> Vec<u8> {
    (BODY_HANDLE | index as u64).to_le_bytes().to_vec()
}

/// A body of variable-length elements (their bytes, UTF-8 for strings):
/// handles in the region's order, naming `items`.
pub struct Items {
    handles: Arc<dyn RegionBody>,
    items: Arc<Vec<Vec<u8>>>,
}

impl Items {
    /// `items` in the region's C order, in rows of `row_bytes` bytes of
    /// handles.
    pub fn listed(items: Vec<Vec<u8>>, row_bytes: usize) -> Self {
        let handles: Vec<u8> = (0..items.len()).flat_map(body_handle).collect();
        Self {
            handles: Arc::new(InMemory::new(Bytes::from(handles), row_bytes)),
            items: Arc::new(items),
        }
    }

    /// `item` in every position.
    pub fn repeated(item: Vec<u8>, row_bytes: usize) -> Self {
        Self {
            handles: Arc::new(Repeated::new(body_handle(0), row_bytes)),
            items: Arc::new(vec![item]),
        }
    }
}

impl RegionBody for Items {
    fn rows(&self, rows: Range<u64>) -> std::io::Result<Bytes> {
        self.handles.rows(rows)
    }

    fn items(&self) -> Option<Arc<Vec<Vec<u8>>>> {
        Some(self.items.clone())
    }
}

/// A stored chunk (or none) of `count` variable-length elements as
/// handles, and the elements they name.
pub(super) fn chunk_handles(old: Option<Bytes>, codecs: &CodecChain, count: usize) -> Result<(Vec<u8>, Vec<Bytes>)> {
    let Some(old) = old else {
        return Ok((FILL_HANDLE.repeat(count), Vec::new()));
    };
    let decoded = codecs.decode(old)?;
    let held: Vec<Bytes> = ranges(&decoded, Some(count))?
        .into_iter()
        .map(|r| decoded.slice(r))
        .collect();
    let handles = (0..count as u64).flat_map(u64::to_le_bytes).collect();
    Ok((handles, held))
}

/// The decoded chunk the handles name (each element's `u32` length and
/// bytes, in order), or `None` when every element is the fill value and
/// `keep_fill` is off. `fill` is the fill value's encoding.
pub(super) fn resolve(
    handles: &[u8],
    held: &[Bytes],
    body: &[Vec<u8>],
    fill: &[u8],
    keep_fill: bool,
) -> Option<Vec<u8>> {
    let fill_bytes = fill.get(4..).unwrap_or_default();
    let element = |handle: &[u8]| -> &[u8] {
        let h = u64::from_le_bytes(handle.try_into().expect("8 bytes"));
        match h {
            u64::MAX => fill_bytes,
            h if h & BODY_HANDLE != 0 => &body[(h & !BODY_HANDLE) as usize],
            h => &held[h as usize],
        }
    };
    let mut out = Vec::new();
    let mut all_fill = true;
    for h in handles.chunks_exact(8) {
        let element = element(h);
        all_fill &= element == fill_bytes;
        out.extend(encode_item(element));
    }
    (keep_fill || !all_fill).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_resolve_to_held_body_and_fill_elements() {
        let held = vec![Bytes::from_static(b"old0"), Bytes::from_static(b"old1")];
        let body = vec![b"new".to_vec()];
        let fill = encode_item(b"");
        let mut handles = Vec::new();
        handles.extend(1u64.to_le_bytes());
        handles.extend(body_handle(0));
        handles.extend(FILL_HANDLE);
        let out = resolve(&handles, &held, &body, &fill, false).unwrap();
        let want: Vec<u8> = [&b"old1"[..], b"new", b""]
            .iter()
            .flat_map(|e| encode_item(e))
            .collect();
        assert_eq!(out, want);
        assert!(resolve(&FILL_HANDLE.repeat(3), &held, &body, &fill, false).is_none());
        assert!(resolve(&FILL_HANDLE.repeat(3), &held, &body, &fill, true).is_some());
    }
}
