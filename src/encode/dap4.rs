//! OPeNDAP DAP4's data response (the DAP4 specification, volume 1,
//! "chunked" serialization): the DAP4 type of each Zarr data type, and the
//! body of a `.dap` answer as DAP4 chunks.
//!
//! A body is a sequence of chunks, each a 4-byte header (one byte of
//! flags, then the payload's length in 3 bytes, big-endian) and its
//! payload. The first chunk is the DMR ending in `\r\n`; the variables'
//! data follows in later chunks, in the DMR's order, little-endian (the
//! [`LITTLE_ENDIAN`] flag on every chunk); the last chunk carries [`END`].
//! A fixed-size element is its bytes; a string is its length as 8 bytes
//! then its UTF-8 bytes. With checksums, each variable's data is followed
//! by the CRC-32 (zlib's) of its bytes, 4 bytes little-endian.

use std::sync::Mutex;

use bytes::{BufMut, Bytes, BytesMut};

use super::Encoder;
use crate::engine::{values, DataType, Unit};

/// The chunk that ends the body.
pub const END: u8 = 0x01;
/// A chunk holding an error (`<Error>` XML) instead of data.
pub const ERROR: u8 = 0x02;
/// The payload's numbers are little-endian.
pub const LITTLE_ENDIAN: u8 = 0x04;
/// On the DMR's chunk: no checksums follow the variables. Not in the DAP4
/// specification, but netCDF-C 4.9.0 assumes checksums unless it is set
/// (its `CHECKSUMHACK`); later netCDF-C and pydap ignore it.
pub const NO_CHECKSUMS: u8 = 0x08;
/// The largest payload of one chunk (its length has 24 bits).
pub const MAX_CHUNK: usize = (1 << 24) - 1;
/// The payload of the chunks a run of elements is cut into: 8 MiB, so
/// that a slab of 16 MiB is two chunks.
const PIECE: usize = 1 << 23;
const _: () = assert!(PIECE <= MAX_CHUNK);

/// A DAP4 atomic type (those this server sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dap4Type {
    /// Unsigned 8-bit (DAP4's alias of `UInt8`; bool here).
    Byte,
    /// Signed 8-bit.
    Int8,
    /// Unsigned 8-bit.
    UInt8,
    /// Signed 16-bit.
    Int16,
    /// Unsigned 16-bit.
    UInt16,
    /// Signed 32-bit.
    Int32,
    /// Unsigned 32-bit.
    UInt32,
    /// Signed 64-bit (datetimes and durations too).
    Int64,
    /// Unsigned 64-bit.
    UInt64,
    /// IEEE single (float16 too).
    Float32,
    /// IEEE double.
    Float64,
    /// UTF-8 text of any length.
    String,
}

impl Dap4Type {
    /// The DAP4 type of elements of `data_type`, if DAP4 carries them (bytes,
    /// complex and raw elements it does not; nor durations in calendar years
    /// or months, which have no count). Bool is `Byte`, float16 `Float32`,
    /// datetimes and durations `Int64` counts of a CF unit.
    pub fn of(data_type: DataType) -> Option<Self> {
        Some(match data_type {
            DataType::Bool => Self::Byte,
            DataType::Int8 => Self::Int8,
            DataType::UInt8 => Self::UInt8,
            DataType::Int16 => Self::Int16,
            DataType::UInt16 => Self::UInt16,
            DataType::Int32 => Self::Int32,
            DataType::UInt32 => Self::UInt32,
            DataType::Int64 | DataType::DateTime64(_) => Self::Int64,
            DataType::TimeDelta64(u) if !matches!(u.unit, Unit::Year | Unit::Month) => Self::Int64,
            DataType::UInt64 => Self::UInt64,
            DataType::Float16 | DataType::Float32 => Self::Float32,
            DataType::Float64 => Self::Float64,
            DataType::String | DataType::FixedUtf32(_) => Self::String,
            _ => return None,
        })
    }

    /// The type's name in a DMR.
    pub fn name(self) -> &'static str {
        match self {
            Self::Byte => "Byte",
            Self::Int8 => "Int8",
            Self::UInt8 => "UInt8",
            Self::Int16 => "Int16",
            Self::UInt16 => "UInt16",
            Self::Int32 => "Int32",
            Self::UInt32 => "UInt32",
            Self::Int64 => "Int64",
            Self::UInt64 => "UInt64",
            Self::Float32 => "Float32",
            Self::Float64 => "Float64",
            Self::String => "String",
        }
    }

    /// Bytes of one element (`None` for strings, whose size depends on
    /// their text).
    pub fn element_bytes(self) -> Option<u64> {
        match self {
            Self::Byte | Self::Int8 | Self::UInt8 => Some(1),
            Self::Int16 | Self::UInt16 => Some(2),
            Self::Int32 | Self::UInt32 | Self::Float32 => Some(4),
            Self::Int64 | Self::UInt64 | Self::Float64 => Some(8),
            Self::String => None,
        }
    }
}

/// Whether DAP4 sends elements of `data_type` as the engine gives them
/// (little-endian, the same width): nothing to convert.
pub fn sent_as_stored(data_type: DataType) -> bool {
    match data_type {
        DataType::DateTime64(u) | DataType::TimeDelta64(u) => {
            u.scale == 1
                && matches!(
                    u.unit,
                    Unit::Day | Unit::Hour | Unit::Minute | Unit::Second | Unit::Milli | Unit::Micro | Unit::Nano
                )
        }
        DataType::Float16 | DataType::Bool => false,
        other => Dap4Type::of(other).is_some_and(|t| t != Dap4Type::String),
    }
}

/// `payload` as chunks of at most [`PIECE`] bytes flagged `flags`
/// (and [`LITTLE_ENDIAN`]), appended to `out`; an empty payload is one
/// empty chunk only when `flags` says something ([`END`]).
pub fn append_chunks(payload: &[u8], flags: u8, out: &mut BytesMut) {
    if payload.is_empty() {
        if flags != 0 {
            put_header(out, flags | LITTLE_ENDIAN, 0);
        }
        return;
    }
    let mut pieces = payload.chunks(PIECE).peekable();
    while let Some(piece) = pieces.next() {
        let last = pieces.peek().is_none();
        let flags = LITTLE_ENDIAN | if last { flags } else { 0 };
        put_header(out, flags, piece.len());
        out.put_slice(piece);
    }
}

fn put_header(out: &mut BytesMut, flags: u8, length: usize) {
    let n = (length as u32).to_be_bytes();
    out.put_slice(&[flags, n[1], n[2], n[3]]);
}

/// The first chunk of a `.dap` body: the DMR, `\r\n`, in one chunk (clients
/// read the DMR from the first chunk alone: `None` when it is larger than a
/// chunk); [`END`] too when no variable follows, [`NO_CHECKSUMS`] without
/// checksums.
pub fn dmr_chunk(dmr: &str, last: bool, checksums: bool) -> Option<Bytes> {
    let text = format!("{dmr}\r\n");
    if text.len() > MAX_CHUNK {
        return None;
    }
    let mut flags = LITTLE_ENDIAN;
    if last {
        flags |= END;
    }
    if !checksums {
        flags |= NO_CHECKSUMS;
    }
    let mut out = BytesMut::with_capacity(text.len() + 4);
    put_header(&mut out, flags, text.len());
    out.put_slice(text.as_bytes());
    Some(out.freeze())
}

/// Append the elements of `data` (little-endian `data_type`, or the
/// engine's layout of text) to `out` as DAP4 sends them. Damaged text is
/// an error naming what is wrong.
pub fn append_elements(data_type: DataType, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let i64_of = |b: &[u8]| i64::from_le_bytes(b.try_into().expect("8 bytes"));
    match data_type {
        _ if sent_as_stored(data_type) => out.extend_from_slice(data),
        DataType::Bool => out.extend(data.iter().map(|&b| u8::from(b != 0))),
        DataType::Float16 => {
            for b in data.chunks_exact(2) {
                out.extend_from_slice(&half::f16::from_le_bytes([b[0], b[1]]).to_f32().to_le_bytes());
            }
        }
        DataType::DateTime64(unit) | DataType::TimeDelta64(unit) => {
            let instant = matches!(data_type, DataType::DateTime64(_));
            for b in data.chunks_exact(8) {
                let value = i64_of(b);
                let count = match value {
                    crate::engine::NAT => value,
                    v => unit
                        .cf_count(v, instant)
                        .map_or(crate::engine::NAT, |c| c.round() as i64),
                };
                out.extend_from_slice(&count.to_le_bytes());
            }
        }
        DataType::String | DataType::FixedUtf32(_) => {
            let texts = values::text_values(data_type, data)
                .expect("text types have text values")
                .map_err(|e| e.to_string())?;
            for text in texts {
                out.extend_from_slice(&(text.len() as u64).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
        other => return Err(format!("{} elements have no DAP4 type", other.name())),
    }
    Ok(())
}

/// One variable of a `.dap` answer: its elements in chunks, then (with
/// checksums) the CRC-32 of them; the last variable's last chunk ends the
/// body.
pub struct Dap4Array {
    data_type: DataType,
    /// The CRC-32 of the bytes sent so far, when checksums are asked for.
    checksum: Option<Mutex<crc32fast::Hasher>>,
    /// The body's last variable.
    last: bool,
}

impl Dap4Array {
    /// A variable of `data_type`; `checksum`: followed by its CRC-32;
    /// `last`: the body's last.
    pub fn new(data_type: DataType, checksum: bool, last: bool) -> Self {
        Self {
            data_type,
            checksum: checksum.then(|| Mutex::new(crc32fast::Hasher::new())),
            last,
        }
    }
}

impl Dap4Array {
    /// The bytes [`Encoder::whole`] gives for `count` elements of `data_type`
    /// (`None` for text, whose size depends on it).
    pub fn whole_length(data_type: DataType, count: u64, checksum: bool, last: bool) -> Option<u64> {
        let payload = Dap4Type::of(data_type)?.element_bytes()? * count;
        let chunks = payload.div_ceil(PIECE as u64);
        let tail = match (checksum, last) {
            (true, _) => 8,
            (false, true) => 4,
            (false, false) => 0,
        };
        Some(payload + 4 * chunks + tail)
    }
}

impl Encoder for Dap4Array {
    fn elements(&self, _start: u64, data: Bytes) -> Result<Bytes, String> {
        let converted;
        let payload: &[u8] = match sent_as_stored(self.data_type) {
            true => &data,
            false => {
                let mut out = Vec::with_capacity(data.len() * 2);
                append_elements(self.data_type, &data, &mut out)?;
                converted = out;
                &converted
            }
        };
        if let Some(sum) = &self.checksum {
            sum.lock().expect("not poisoned").update(payload);
        }
        let mut out = BytesMut::with_capacity(payload.len() + 4 * (1 + payload.len() / PIECE));
        append_chunks(payload, 0, &mut out);
        Ok(out.freeze())
    }

    /// Elements sent as they are: each chunk's header, then a slice of
    /// `data` (nothing copied); others as [`Encoder::elements`] makes them.
    fn element_pieces(&self, start: u64, data: Bytes) -> Result<Vec<Bytes>, String> {
        if !sent_as_stored(self.data_type) {
            return Ok(vec![self.elements(start, data)?]);
        }
        if let Some(sum) = &self.checksum {
            sum.lock().expect("not poisoned").update(&data);
        }
        let mut out = Vec::with_capacity(2 * data.len().div_ceil(PIECE));
        for at in (0..data.len()).step_by(PIECE) {
            let piece = data.slice(at..data.len().min(at + PIECE));
            let mut header = BytesMut::with_capacity(4);
            put_header(&mut header, LITTLE_ENDIAN, piece.len());
            out.extend([header.freeze(), piece]);
        }
        Ok(out)
    }

    fn tail(&self) -> Bytes {
        let flags = if self.last { END } else { 0 };
        let sum = self
            .checksum
            .as_ref()
            .map(|sum| sum.lock().expect("not poisoned").clone().finalize().to_le_bytes());
        let mut out = BytesMut::with_capacity(8);
        append_chunks(sum.as_ref().map_or(&[][..], |s| &s[..]), flags, &mut out);
        out.freeze()
    }

    /// Unknown before reading: chunks follow the slabs read.
    fn length(&self) -> Option<u64> {
        None
    }

    /// Elements that must be converted (float16, counts of another unit,
    /// fixed-size text) go in pieces off the async workers; variable-length
    /// strings, whose items a fixed cut would split, as the slab comes.
    fn piece_elements(&self) -> Option<u64> {
        let pieces = !sent_as_stored(self.data_type) && self.data_type != DataType::String;
        pieces.then_some(1 << 18)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TimeUnit;

    /// The payloads and flags of the chunks of `body`.
    fn chunks(body: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < body.len() {
            let (flags, n) = (
                body[at],
                u32::from_be_bytes([0, body[at + 1], body[at + 2], body[at + 3]]) as usize,
            );
            out.push((flags, body[at + 4..at + 4 + n].to_vec()));
            at += 4 + n;
        }
        out
    }

    #[test]
    fn a_variable_is_its_chunks_then_its_checksum_and_the_end() {
        let array = Dap4Array::new(DataType::Int16, true, true);
        let data: Vec<u8> = [1i16, -2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let body = array.whole(Bytes::from(data.clone())).unwrap();
        let got = chunks(&body);
        assert_eq!(got[0], (LITTLE_ENDIAN, data.clone()));
        assert_eq!(
            got[1],
            (LITTLE_ENDIAN | END, crc32fast::hash(&data).to_le_bytes().to_vec())
        );
        assert_eq!(got.len(), 2);
        // Without checksums, not last: the data alone.
        let plain = Dap4Array::new(DataType::Int16, false, false);
        assert_eq!(
            chunks(&plain.whole(Bytes::from(data.clone())).unwrap()),
            [(LITTLE_ENDIAN, data.clone())]
        );
        // The last without checksums ends with an empty chunk.
        let last = Dap4Array::new(DataType::Int16, false, true);
        assert_eq!(chunks(&last.tail()), [(LITTLE_ENDIAN | END, vec![])]);
        for (checksum, last) in [(true, true), (false, true), (false, false)] {
            let whole = Dap4Array::new(DataType::Int16, checksum, last)
                .whole(Bytes::from(data.clone()))
                .unwrap();
            assert_eq!(
                Dap4Array::whole_length(DataType::Int16, 3, checksum, last),
                Some(whole.len() as u64)
            );
        }
        assert_eq!(Dap4Array::whole_length(DataType::String, 3, true, true), None);
        // Variable-length strings are never cut at a fixed size.
        assert_eq!(Dap4Array::new(DataType::String, true, true).piece_elements(), None);
        assert!(Dap4Array::new(DataType::Float16, true, true).piece_elements().is_some());
        // The DMR is one chunk, flagged when no checksums follow.
        let dmr = dmr_chunk("<Dataset/>", false, false).unwrap();
        assert_eq!(
            chunks(&dmr),
            [(LITTLE_ENDIAN | NO_CHECKSUMS, b"<Dataset/>\r\n".to_vec())]
        );
        assert!(dmr_chunk(&"x".repeat(MAX_CHUNK), false, true).is_none());
    }

    #[test]
    fn payloads_larger_than_a_piece_are_split() {
        let mut out = BytesMut::new();
        append_chunks(&vec![7u8; PIECE + 5], END, &mut out);
        let got = chunks(&out);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0, got[0].1.len()), (LITTLE_ENDIAN, PIECE));
        assert_eq!((got[1].0, got[1].1.len()), (LITTLE_ENDIAN | END, 5));
        // The pieces a stream sends are the same bytes, the data not copied.
        let data = Bytes::from(vec![3u8; 2 * PIECE + 8]);
        let array = Dap4Array::new(DataType::Float64, true, true);
        let pieces = array.element_pieces(0, data.clone()).unwrap();
        assert_eq!(pieces.len(), 6);
        assert_eq!(pieces[1].as_ptr(), data.as_ptr());
        let joined: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
        let whole = Dap4Array::new(DataType::Float64, false, false)
            .elements(0, data)
            .unwrap();
        assert_eq!(joined, whole.to_vec());
    }

    #[test]
    fn elements_are_converted_where_dap4_has_no_such_type() {
        let mut out = Vec::new();
        append_elements(DataType::Float16, &half::f16::from_f32(0.5).to_le_bytes(), &mut out).unwrap();
        assert_eq!(out, 0.5f32.to_le_bytes());
        out.clear();
        append_elements(DataType::Bool, &[0, 7], &mut out).unwrap();
        assert_eq!(out, [0, 1]);
        out.clear();
        let week = TimeUnit::parse("W").unwrap();
        let data = [2i64, crate::engine::NAT].map(i64::to_le_bytes).concat();
        append_elements(DataType::DateTime64(week), &data, &mut out).unwrap();
        assert_eq!(out, [14i64, crate::engine::NAT].map(i64::to_le_bytes).concat());
        assert!(sent_as_stored(DataType::DateTime64(TimeUnit::parse("s").unwrap())));
        assert!(!sent_as_stored(DataType::DateTime64(week)));
        assert!(Dap4Type::of(DataType::Complex64).is_none());
    }

    #[test]
    fn strings_are_eight_byte_lengths_and_their_bytes() {
        let mut vlen = Vec::new();
        for s in ["ab", "", "é"] {
            vlen.extend((s.len() as u32).to_le_bytes());
            vlen.extend(s.as_bytes());
        }
        let mut out = Vec::new();
        append_elements(DataType::String, &vlen, &mut out).unwrap();
        let want = [
            &2u64.to_le_bytes()[..],
            b"ab",
            &0u64.to_le_bytes(),
            &2u64.to_le_bytes(),
            "é".as_bytes(),
        ]
        .concat();
        assert_eq!(out, want);
    }
}
