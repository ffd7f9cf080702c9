//! Variable-length elements (`string`, `variable_length_bytes`) in memory.
//!
//! A decoded chunk or result of such a type is its elements in C order,
//! each as a little-endian `u32` byte length followed by the bytes: the
//! body of the `vlen-utf8`/`vlen-bytes` encoding without its leading
//! count. Such a buffer is self-contained, so it is cached, sliced and
//! concatenated like fixed-size data. Inside a slab being assembled, an
//! element is an 8-byte handle ([`Gather`]) naming its chunk and index, so
//! the strided block copy of fixed-size data places it.

use std::ops::Range;

use bytes::Bytes;

use crate::engine::error::{corrupt, Result};

/// The handle of an element that is the fill value.
pub(crate) const FILL_HANDLE: [u8; 8] = u64::MAX.to_le_bytes();

/// One element's encoding.
pub(crate) fn encode_item(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + bytes.len());
    out.extend((bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
    out
}

/// The byte range of each element of `data`, which must hold exactly
/// `count` elements when given.
pub(crate) fn ranges(data: &[u8], count: Option<usize>) -> Result<Vec<Range<usize>>> {
    let mut out = Vec::with_capacity(count.unwrap_or(0));
    let mut at = 0;
    while at < data.len() {
        let len = data
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| corrupt(format!("a variable-length element's length is cut off at byte {at}")))?;
        let range = at + 4..at + 4 + len;
        if range.end > data.len() {
            return Err(corrupt(format!(
                "a variable-length element of {len} bytes at byte {at} runs past the end ({} bytes)",
                data.len()
            )));
        }
        at = range.end;
        out.push(range);
    }
    if let Some(count) = count.filter(|c| *c != out.len()) {
        return Err(corrupt(format!(
            "{} variable-length elements where {count} were expected",
            out.len()
        )));
    }
    Ok(out)
}

/// The elements of `data`, in order.
pub fn items(data: &[u8]) -> Result<Vec<&[u8]>> {
    Ok(ranges(data, None)?.into_iter().map(|r| &data[r]).collect())
}

/// Reorder the elements of `data`: element `i` of the result is element
/// `order[i]` of `data`.
pub(crate) fn permute(data: &[u8], order: impl Iterator<Item = usize>, count: usize) -> Result<Bytes> {
    let ranges = ranges(data, Some(count))?;
    let mut out = Vec::with_capacity(data.len());
    for i in order {
        let r = &ranges[i];
        out.extend_from_slice(&data[r.start - 4..r.end]);
    }
    Ok(Bytes::from(out))
}

/// The chunks whose elements a slab being assembled refers to by handle:
/// the chunk's number in the high 32 bits, the element's index in the low.
#[derive(Default)]
pub(crate) struct Gather {
    chunks: Vec<(Bytes, Vec<Range<usize>>)>,
}

impl Gather {
    /// Keep a decoded chunk of `count` elements; its handles, in its order.
    pub(crate) fn add(&mut self, data: Bytes, count: usize) -> Result<Vec<u8>> {
        let ranges = ranges(&data, Some(count))?;
        let chunk = (self.chunks.len() as u64) << 32;
        self.chunks.push((data, ranges));
        Ok((0..count as u64).flat_map(|i| (chunk | i).to_le_bytes()).collect())
    }

    /// The elements that `handles` name, in their encoding; [`FILL_HANDLE`]
    /// is `fill` (an element's encoding).
    pub(crate) fn resolve(&self, handles: &[u8], fill: &[u8]) -> Bytes {
        let mut out = Vec::new();
        for handle in handles.chunks_exact(8) {
            let handle = u64::from_le_bytes(handle.try_into().expect("8 bytes"));
            if handle == u64::MAX {
                out.extend_from_slice(fill);
                continue;
            }
            let (data, ranges) = &self.chunks[(handle >> 32) as usize];
            let r = &ranges[(handle & 0xffff_ffff) as usize];
            out.extend_from_slice(&data[r.start - 4..r.end]);
        }
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(items: &[&[u8]]) -> Vec<u8> {
        items.iter().flat_map(|i| encode_item(i)).collect()
    }

    #[test]
    fn round_trips_and_rejects_truncation() {
        let data = encode(&[b"ab", b"", "é".as_bytes()]);
        assert_eq!(items(&data).unwrap(), vec![&b"ab"[..], b"", "é".as_bytes()]);
        assert!(ranges(&data, Some(2)).is_err());
        assert!(ranges(&data[..data.len() - 1], None).is_err());
        assert!(ranges(&data[..7], None).is_err());
    }

    #[test]
    fn gathers_by_handle() {
        let mut gather = Gather::default();
        let a = gather.add(Bytes::from(encode(&[b"a", b"bb"])), 2).unwrap();
        let b = gather.add(Bytes::from(encode(&[b"ccc"])), 1).unwrap();
        let mut handles = b[..8].to_vec();
        handles.extend_from_slice(&FILL_HANDLE);
        handles.extend_from_slice(&a[8..]);
        let out = gather.resolve(&handles, &encode_item(b"-"));
        assert_eq!(items(&out).unwrap(), vec![&b"ccc"[..], b"-", b"bb"]);
        let permuted = permute(&encode(&[b"x", b"yy", b"z"]), [2, 0, 1].into_iter(), 3).unwrap();
        assert_eq!(items(&permuted).unwrap(), vec![&b"z"[..], b"x", b"yy"]);
    }
}
