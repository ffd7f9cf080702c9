//! The `blosc` codec (c-blosc 1.x through the `blosc-src` bindings).
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/blosc/index.html>.
//! Example: `{"name": "blosc", "configuration": {"cname": "zstd", "clevel": 5,
//! "shuffle": "bitshuffle", "typesize": 2, "blocksize": 0}}`. Blosc frames are
//! self-describing, so decoding needs only the configuration's validation.

use std::os::raw::{c_int, c_void};

use serde_json::{Map, Value};

use super::int_field;
use crate::engine::error::{corrupt, Error, Result};

/// Blosc with one of the compressors built in (blosclz, lz4, lz4hc, zlib, zstd).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BloscCodec {
    /// The compressor inside blosc.
    cname: &'static str,
    clevel: i32,
    /// 0 none, 1 bytes, 2 bits; `None`: numcodecs' AUTOSHUFFLE (bits for
    /// 1-byte elements, else bytes).
    shuffle: Option<i32>,
    /// `None`: the element size of the array.
    typesize: Option<usize>,
    blocksize: usize,
}

/// Largest decoded size accepted when the chain does not know the size.
const MAX_UNKNOWN_SIZE: usize = 1 << 31;

/// What a blosc frame may add to its data (`BLOSC_MAX_OVERHEAD`).
const BLOSC_MAX_OVERHEAD: usize = 16;

impl BloscCodec {
    /// Validate the configuration.
    pub(crate) fn from_json(config: Option<&Map<String, Value>>) -> Result<Self> {
        let cname = config.and_then(|c| c.get("cname"));
        let cname = match cname.and_then(Value::as_str) {
            None => "lz4",
            Some("blosclz") => "blosclz",
            Some("lz4") => "lz4",
            Some("lz4hc") => "lz4hc",
            Some("zlib") => "zlib",
            Some("zstd") => "zstd",
            Some("snappy") => return Err(Error::Unsupported("blosc cname \"snappy\"".into())),
            Some(_) => return Err(corrupt(format!("blosc codec cname {}", cname.unwrap_or(&Value::Null)))),
        };
        let shuffle = match config.and_then(|c| c.get("shuffle")) {
            None => Some(1),
            Some(Value::String(s)) if s == "noshuffle" => Some(0),
            Some(Value::String(s)) if s == "shuffle" => Some(1),
            Some(Value::String(s)) if s == "bitshuffle" => Some(2),
            Some(Value::Number(n)) if n.as_i64() == Some(-1) => None,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n <= 2) => n.as_i64().map(|n| n as i32),
            Some(other) => return Err(corrupt(format!("blosc codec shuffle {other}"))),
        };
        let clevel = int_field(config, "blosc", "clevel", 0..=9, Some(5))? as i32;
        let typesize = match config.and_then(|c| c.get("typesize")) {
            None | Some(Value::Null) => None,
            Some(_) => Some(int_field(config, "blosc", "typesize", 0..=255, None)? as usize),
        };
        let blocksize = int_field(config, "blosc", "blocksize", 0..=i64::MAX, Some(0))? as usize;
        Ok(Self {
            cname,
            clevel,
            shuffle,
            typesize,
            blocksize,
        })
    }

    /// One blosc frame; `element_size` is the typesize when the
    /// configuration gives none (numcodecs takes the array's).
    pub(crate) fn encode(&self, decoded: &[u8], element_size: usize) -> Result<Vec<u8>> {
        let typesize = self.typesize.filter(|&t| t > 0).unwrap_or(element_size).max(1);
        let shuffle = self.shuffle.unwrap_or(if typesize == 1 { 2 } else { 1 });
        let mut out = vec![0u8; decoded.len() + BLOSC_MAX_OVERHEAD];
        let name = std::ffi::CString::new(self.cname).expect("no NUL");
        // SAFETY: the source and destination are valid for the lengths
        // given; blosc writes at most `out.len()` bytes.
        let written = unsafe {
            blosc_src::blosc_compress_ctx(
                self.clevel as c_int,
                shuffle as c_int,
                typesize,
                decoded.len(),
                decoded.as_ptr() as *const c_void,
                out.as_mut_ptr() as *mut c_void,
                out.len(),
                name.as_ptr(),
                self.blocksize,
                1 as c_int,
            )
        };
        if written <= 0 {
            return Err(Error::Unsupported(format!("blosc compression failed ({written})")));
        }
        out.truncate(written as usize);
        Ok(out)
    }

    /// Decompress a blosc frame.
    pub(crate) fn decode(&self, encoded: &[u8], expected: Option<usize>) -> Result<Vec<u8>> {
        let mut nbytes = 0usize;
        // SAFETY: validate reads at most `encoded.len()` bytes of `encoded`.
        let valid =
            unsafe { blosc_src::blosc_cbuffer_validate(encoded.as_ptr() as *const c_void, encoded.len(), &mut nbytes) };
        if valid < 0 {
            return Err(corrupt("blosc: not a valid blosc frame"));
        }
        match expected {
            Some(n) if n != nbytes => {
                return Err(corrupt(format!("blosc frame holds {nbytes} bytes, expected {n}")));
            }
            None if nbytes > MAX_UNKNOWN_SIZE => {
                return Err(corrupt(format!("blosc frame claims {nbytes} bytes")));
            }
            _ => {}
        }
        let mut out = vec![0u8; nbytes];
        // SAFETY: `out` has room for `nbytes`, the size the frame was
        // validated to decode to; the frame was checked against its length.
        let written = unsafe {
            blosc_src::blosc_decompress_ctx(
                encoded.as_ptr() as *const c_void,
                out.as_mut_ptr() as *mut c_void,
                nbytes,
                1 as c_int,
            )
        };
        if written < 0 || written as usize != nbytes {
            return Err(corrupt(format!("blosc decompression failed ({written})")));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    fn compress(data: &[u8], cname: &str, shuffle: c_int, typesize: usize) -> Vec<u8> {
        let mut out = vec![0u8; data.len() + 16];
        let name = CString::new(cname).unwrap();
        // SAFETY: buffers are sized per the c-blosc contract (src + 16 bytes of overhead).
        let n = unsafe {
            blosc_src::blosc_compress_ctx(
                5,
                shuffle,
                typesize,
                data.len(),
                data.as_ptr() as *const c_void,
                out.as_mut_ptr() as *mut c_void,
                out.len(),
                name.as_ptr(),
                0,
                1,
            )
        };
        assert!(n > 0, "{cname}");
        out.truncate(n as usize);
        out
    }

    #[test]
    fn every_compressor_and_shuffle() {
        let data: Vec<u8> = (0..4000u32).flat_map(|i| (i / 3).to_le_bytes()).collect();
        for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"] {
            for shuffle in [0, 1, 2] {
                let enc = compress(&data, cname, shuffle, 4);
                assert_eq!(
                    BloscCodec::from_json(None)
                        .unwrap()
                        .decode(&enc, Some(data.len()))
                        .unwrap(),
                    data,
                    "{cname} {shuffle}"
                );
                assert!(BloscCodec::from_json(None)
                    .unwrap()
                    .decode(&enc[..enc.len() / 2], Some(data.len()))
                    .is_err());
            }
        }
        assert!(BloscCodec::from_json(None)
            .unwrap()
            .decode(b"garbage!garbage!garbage!", None)
            .is_err());
    }
}
