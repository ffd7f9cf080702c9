//! The `zstd` codec.
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/zstd>.
//! Example: `{"name": "zstd", "configuration": {"level": 1, "checksum": false}}`.
//! Frames may lack the content size, so unknown sizes use a streaming decoder.

use serde_json::{Map, Value};
use zstd::zstd_safe::{CCtx, DCtx};

use super::{int_field, read_limited};
use crate::engine::error::{corrupt, Result};

/// Zstandard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ZstdCodec {
    level: i32,
    checksum: bool,
}

thread_local! {
    /// One decompression context per thread, reused by whole and prefix
    /// decodes: creating one per chunk showed up in profiles of large reads.
    static CONTEXT: std::cell::RefCell<Option<DCtx<'static>>> = const { std::cell::RefCell::new(None) };
    /// One compression context per thread, for writes.
    static ENCODER: std::cell::RefCell<Option<CCtx<'static>>> = const { std::cell::RefCell::new(None) };
}

/// Run `f` with this thread's decompression context.
fn with_context<T>(f: impl FnOnce(&mut DCtx<'static>) -> Result<T>) -> Result<T> {
    CONTEXT.with_borrow_mut(|slot| f(slot.get_or_insert_with(DCtx::create)))
}

fn failed(code: usize) -> crate::engine::error::Error {
    corrupt(format!(
        "zstd decompression failed: {}",
        zstd::zstd_safe::get_error_name(code)
    ))
}

impl ZstdCodec {
    /// Validate the configuration (`level`, optional `checksum`).
    pub(crate) fn from_json(config: Option<&Map<String, Value>>) -> Result<Self> {
        let level = int_field(config, "zstd", "level", -131072..=22, Some(0))? as i32;
        let checksum = match config.and_then(|c| c.get("checksum")) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => return Err(corrupt(format!("zstd codec checksum {v} is not a boolean"))),
        };
        Ok(Self { level, checksum })
    }

    /// One frame at the configured level, declaring its content size (as
    /// zarr-python's frames do), with a content checksum when configured.
    pub(crate) fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_into(decoded, &mut out)?;
        Ok(out)
    }

    /// [`ZstdCodec::encode`] into `out` (cleared; its capacity reused).
    pub(crate) fn encode_into(&self, decoded: &[u8], out: &mut Vec<u8>) -> Result<()> {
        use zstd::zstd_safe::{CParameter, ResetDirective};
        let failed = |code: usize| {
            crate::engine::error::Error::Unsupported(format!(
                "zstd compression failed: {}",
                zstd::zstd_safe::get_error_name(code)
            ))
        };
        out.clear();
        out.reserve(Self::bound(decoded.len()));
        // One compression context per thread, reused from chunk to chunk.
        ENCODER.with_borrow_mut(|slot| {
            let cctx = slot.get_or_insert_with(CCtx::create);
            cctx.reset(ResetDirective::SessionAndParameters).map_err(failed)?;
            cctx.set_parameter(CParameter::CompressionLevel(self.level))
                .map_err(failed)?;
            cctx.set_parameter(CParameter::ChecksumFlag(self.checksum))
                .map_err(failed)?;
            cctx.compress2(out, decoded).map_err(failed)?;
            Ok(())
        })
    }

    /// The most bytes a frame of `decoded` bytes takes.
    pub(crate) fn bound(decoded: usize) -> usize {
        zstd::zstd_safe::compress_bound(decoded)
    }

    /// Decompress one or more frames.
    pub(crate) fn decode(&self, encoded: &[u8], expected: Option<usize>) -> Result<Vec<u8>> {
        if let Some(n) = expected {
            // One-shot decode into an exactly sized buffer: works with or
            // without the content size in the frame header.
            let mut out = Vec::with_capacity(n);
            let written = with_context(|dctx| dctx.decompress(&mut out, encoded).map_err(failed))?;
            if written != n {
                return Err(corrupt(format!("zstd decompressed to {written} bytes, expected {n}")));
            }
            return Ok(out);
        }
        let decoder = zstd::stream::read::Decoder::with_buffer(encoded)
            .map_err(|e| corrupt(format!("zstd decompression failed: {e}")))?;
        read_limited(decoder, None, "zstd")
    }
}

impl ZstdCodec {
    /// Decompress into `out` (its old contents dropped, its capacity
    /// reused), which must then hold exactly `expected` bytes.
    pub(crate) fn decode_into(&self, encoded: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        out.reserve_exact(expected);
        let written = with_context(|dctx| dctx.decompress(out, encoded).map_err(failed))?;
        if written != expected {
            return Err(corrupt(format!(
                "zstd decompressed to {written} bytes, expected {expected}"
            )));
        }
        Ok(())
    }
}

/// The Content_Checksum_flag of a frame header's descriptor byte.
const CONTENT_CHECKSUM_FLAG: u8 = 0x04;

impl ZstdCodec {
    /// Decompress only the first `prefix` bytes of a chunk that decodes to
    /// `full` bytes, stopping there. `None` (decode it whole instead) unless
    /// the input is exactly one complete frame (so truncation is still an
    /// error) that declares `full` as its content size and carries no
    /// checksum (a checksum can only be verified by decoding to the end).
    pub(crate) fn decode_prefix(&self, encoded: &[u8], full: usize, prefix: usize) -> Result<Option<Vec<u8>>> {
        use zstd::zstd_safe::{
            find_frame_compressed_size, get_frame_content_size, InBuffer, OutBuffer, ResetDirective,
        };
        let complete_frame = find_frame_compressed_size(encoded).is_ok_and(|n| n == encoded.len());
        let declared = get_frame_content_size(encoded).ok().flatten();
        let checksum = encoded.get(4).is_none_or(|d| d & CONTENT_CHECKSUM_FLAG != 0);
        if prefix >= full || !complete_frame || declared != Some(full as u64) || checksum {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(prefix);
        with_context(|dctx| {
            // A stream starts from a clean session (an earlier one may have stopped early).
            dctx.reset(ResetDirective::SessionOnly).map_err(failed)?;
            let mut input = InBuffer::around(encoded);
            let mut output = OutBuffer::around(&mut out);
            while output.pos() < prefix {
                let before = (input.pos(), output.pos());
                let hint = dctx.decompress_stream(&mut output, &mut input).map_err(failed)?;
                if hint == 0 || (input.pos(), output.pos()) == before {
                    break; // the frame ended, or no progress: checked below
                }
            }
            Ok(())
        })?;
        if out.len() < prefix {
            return Err(corrupt(format!(
                "zstd decompressed to {} bytes, expected at least {prefix}",
                out.len()
            )));
        }
        out.truncate(prefix); // the buffer may have had room for more
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_frames_without_content_size() {
        let data: Vec<u8> = (0..10000u32).map(|i| (i % 13) as u8).collect();
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let encoded = enc.finish().unwrap();
        assert_eq!(
            ZstdCodec::from_json(None).unwrap().decode(&encoded, None).unwrap(),
            data
        );
        assert_eq!(
            ZstdCodec::from_json(None)
                .unwrap()
                .decode(&encoded, Some(10000))
                .unwrap(),
            data
        );
        assert!(ZstdCodec::from_json(None)
            .unwrap()
            .decode(&encoded, Some(9999))
            .is_err());
        assert!(ZstdCodec::from_json(None)
            .unwrap()
            .decode(&encoded[..encoded.len() / 2], Some(10000))
            .is_err());
        assert!(ZstdCodec::from_json(None)
            .unwrap()
            .decode(&encoded[..encoded.len() / 2], None)
            .is_err());
        // Into a reused buffer, larger or smaller than needed.
        for mut out in [Vec::new(), vec![7u8; 20000]] {
            ZstdCodec::from_json(None)
                .unwrap()
                .decode_into(&encoded, 10000, &mut out)
                .unwrap();
            assert_eq!(out, data);
            assert!(ZstdCodec::from_json(None)
                .unwrap()
                .decode_into(&encoded, 9999, &mut out)
                .is_err());
            assert!(ZstdCodec::from_json(None)
                .unwrap()
                .decode_into(&encoded, 10001, &mut out)
                .is_err());
            assert!(ZstdCodec::from_json(None)
                .unwrap()
                .decode_into(&encoded[..encoded.len() / 2], 10000, &mut out)
                .is_err());
        }
    }

    fn frame(data: &[u8], checksum: bool) -> Vec<u8> {
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_checksum(checksum).unwrap();
        enc.set_pledged_src_size(Some(data.len() as u64)).unwrap();
        std::io::Write::write_all(&mut enc, data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn prefixes_decode_only_from_complete_unchecksummed_frames() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let plain = frame(&data, false);
        for prefix in [1, 4096, 131_072, 299_999] {
            let got = ZstdCodec::from_json(None)
                .unwrap()
                .decode_prefix(&plain, data.len(), prefix)
                .unwrap()
                .unwrap();
            assert_eq!(got, &data[..prefix]);
        }
        // Whole chunk, checksummed frames, a wrong size: decoded whole instead.
        assert!(ZstdCodec::from_json(None)
            .unwrap()
            .decode_prefix(&plain, data.len(), data.len())
            .unwrap()
            .is_none());
        assert!(ZstdCodec::from_json(None)
            .unwrap()
            .decode_prefix(&frame(&data, true), data.len(), 10)
            .unwrap()
            .is_none());
        assert!(ZstdCodec::from_json(None)
            .unwrap()
            .decode_prefix(&plain, data.len() + 1, 10)
            .unwrap()
            .is_none());
        // A truncated frame is never decoded in part (the whole decode reports it).
        assert!(ZstdCodec::from_json(None)
            .unwrap()
            .decode_prefix(&plain[..plain.len() - 1], data.len(), 10)
            .unwrap()
            .is_none());
        // The thread's one context is reset between uses: a whole decode
        // after a stopped stream, and a stream after that, are right.
        assert_eq!(
            ZstdCodec::from_json(None)
                .unwrap()
                .decode(&plain, Some(data.len()))
                .unwrap(),
            data
        );
        let again = ZstdCodec::from_json(None)
            .unwrap()
            .decode_prefix(&plain, data.len(), 5)
            .unwrap()
            .unwrap();
        assert_eq!(again, &data[..5]);
    }
}
