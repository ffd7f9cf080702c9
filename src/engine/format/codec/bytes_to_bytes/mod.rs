//! Bytes -> bytes codecs.

pub mod blosc;
pub mod bz2;
pub(crate) mod checksum;
pub mod gzip;
pub mod lz4;
pub mod lzma;
pub(crate) mod shuffle;
pub mod zlib;
pub mod zstd;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use self::blosc::BloscCodec;
use self::bz2::Bz2Codec;
use self::checksum::ChecksumCodec;
use self::gzip::GzipCodec;
use self::lz4::Lz4Codec;
use self::lzma::LzmaCodec;
use self::shuffle::ShuffleCodec;
use self::zlib::ZlibCodec;
use self::zstd::ZstdCodec;
use crate::buffer_pool::BufferPool;
use crate::engine::error::{corrupt, Error, Result};

/// A bytes -> bytes codec.
#[derive(Debug, Clone)]
pub(crate) enum BytesToBytesCodec {
    /// `gzip`
    Gzip(GzipCodec),
    /// `zstd`
    Zstd(ZstdCodec),
    /// `blosc`
    Blosc(BloscCodec),
    /// `crc32c`
    Crc32c(ChecksumCodec),
    /// numcodecs `zlib` (Zarr v2)
    Zlib(ZlibCodec),
    /// numcodecs `bz2` (Zarr v2)
    Bz2(Bz2Codec),
    /// numcodecs `lzma` (Zarr v2)
    Lzma(LzmaCodec),
    /// numcodecs `lz4` (Zarr v2)
    Lz4(Lz4Codec),
    /// numcodecs `shuffle`
    Shuffle(ShuffleCodec),
    /// numcodecs checksums (`crc32`, `adler32`, `crc32c`, `fletcher32`,
    /// `jenkins_lookup3`)
    Checksum(ChecksumCodec),
}

impl BytesToBytesCodec {
    /// The codec named `name`, or `None` if it is not a bytes -> bytes codec.
    pub(crate) fn from_json(name: &str, config: Option<&Map<String, Value>>) -> Result<Option<Self>> {
        Ok(match name {
            "gzip" => Some(Self::Gzip(GzipCodec::from_json(config)?)),
            "zstd" => Some(Self::Zstd(ZstdCodec::from_json(config)?)),
            "blosc" => Some(Self::Blosc(BloscCodec::from_json(config)?)),
            "crc32c" => Some(Self::Crc32c(ChecksumCodec::from_config("crc32c", &Map::new())?)),
            _ => None,
        })
    }

    /// The numcodecs ids of bytes -> bytes codecs.
    pub(crate) const NUMCODECS_IDS: &'static [&'static str] = &[
        "blosc",
        "zstd",
        "gzip",
        "zlib",
        "bz2",
        "lzma",
        "lz4",
        "shuffle",
        "crc32",
        "adler32",
        "crc32c",
        "fletcher32",
        "jenkins_lookup3",
    ];

    /// The numcodecs codec `id` with its configuration `obj` (`{"id":
    /// "blosc", ...}`).
    pub(crate) fn from_numcodecs_config(id: &str, obj: &Map<String, Value>) -> Result<Self> {
        Ok(match id {
            // numcodecs' shuffle -1 (AUTOSHUFFLE) is parsed as such.
            "blosc" => Self::Blosc(BloscCodec::from_json(Some(obj))?),
            "zstd" => Self::Zstd(ZstdCodec::from_json(Some(obj))?),
            "gzip" => Self::Gzip(GzipCodec::from_json(Some(obj))?),
            "zlib" => Self::Zlib(ZlibCodec {
                // -1 is zlib's default level, 6.
                level: match int_field(Some(obj), "zlib", "level", -1..=9, Some(1))? {
                    -1 => 6,
                    n => n as u32,
                },
            }),
            "bz2" => Self::Bz2(Bz2Codec {
                level: int_field(Some(obj), "bz2", "level", 1..=9, Some(1))? as u32,
            }),
            "lzma" => Self::Lzma(LzmaCodec::from_json(obj)?),
            "lz4" => Self::Lz4(Lz4Codec),
            "shuffle" => Self::Shuffle(ShuffleCodec::from_json(obj)?),
            id if ChecksumCodec::IDS.contains(&id) => Self::Checksum(ChecksumCodec::from_config(id, obj)?),
            other => return Err(Error::Unsupported(format!("compressor \"{other}\""))),
        })
    }

    /// The encoded size of `decoded` bytes, when it is fixed.
    pub(crate) fn encoded_size(&self, decoded: usize) -> Option<usize> {
        match self {
            Self::Crc32c(_) | Self::Checksum(_) => Some(decoded + 4),
            Self::Shuffle(_) => Some(decoded),
            _ => None,
        }
    }

    /// Encode `decoded` as the configuration says; `element_size` is the
    /// size of the elements the bytes hold (blosc's default typesize).
    pub(crate) fn encode(&self, decoded: &[u8], element_size: usize) -> Result<Vec<u8>> {
        Ok(match self {
            Self::Gzip(c) => c.encode(decoded)?,
            Self::Zstd(c) => c.encode(decoded)?,
            Self::Blosc(c) => c.encode(decoded, element_size)?,
            Self::Zlib(c) => c.encode(decoded)?,
            Self::Bz2(c) => c.encode(decoded)?,
            Self::Lzma(c) => c.encode(decoded)?,
            Self::Lz4(c) => c.encode(decoded)?,
            Self::Shuffle(c) => c.encode(decoded),
            Self::Crc32c(c) | Self::Checksum(c) => c.encode(decoded),
        })
    }

    /// [`BytesToBytesCodec::encode`], the output in a buffer of `buffers`
    /// (when given) that goes back to it once the bytes are dropped: a
    /// write's multi-megabyte outputs then reuse memory instead of faulting
    /// in fresh pages (zstd writes into the pooled buffer; other codecs'
    /// outputs join the pool when dropped).
    pub(crate) fn encode_in(
        &self,
        decoded: &[u8],
        element_size: usize,
        buffers: Option<&Arc<BufferPool>>,
    ) -> Result<Bytes> {
        let Some(buffers) = buffers else {
            return self.encode(decoded, element_size).map(Bytes::from);
        };
        let encoded = match self {
            Self::Zstd(c) => {
                let mut out = buffers.take_empty(ZstdCodec::bound(decoded.len()));
                c.encode_into(decoded, &mut out)?;
                out
            }
            _ => self.encode(decoded, element_size)?,
        };
        Ok(BufferPool::into_bytes(buffers, encoded))
    }

    /// Decode; `expected` is the decoded size when the chain knows it.
    pub(crate) fn decode(&self, encoded: Bytes, expected: Option<usize>) -> Result<Bytes> {
        let decoded = match self {
            Self::Gzip(c) => c.decode(&encoded, expected)?,
            Self::Zstd(c) => c.decode(&encoded, expected)?,
            Self::Blosc(c) => c.decode(&encoded, expected)?,
            Self::Zlib(c) => c.decode(&encoded, expected)?,
            Self::Bz2(c) => c.decode(&encoded, expected)?,
            Self::Lzma(c) => c.decode(&encoded, expected)?,
            Self::Lz4(c) => c.decode(&encoded, expected)?,
            Self::Shuffle(c) => c.decode(&encoded),
            Self::Crc32c(c) | Self::Checksum(c) => return c.decode(encoded),
        };
        Ok(Bytes::from(decoded))
    }
}

/// An encoder's failure (an I/O error writing to memory: not expected).
pub(crate) fn encode_failed<E: std::fmt::Display>(codec: &'static str) -> impl Fn(E) -> Error {
    move |e| Error::Unsupported(format!("{codec} compression failed: {e}"))
}

/// Read a decompressor to the end, refusing more than `expected` bytes when
/// the size is known (a corrupt or hostile stream cannot exhaust memory).
pub(crate) fn read_limited(mut reader: impl std::io::Read, expected: Option<usize>, codec: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::with_capacity(expected.unwrap_or(0));
    let limit = expected.map_or(u64::MAX, |n| n as u64 + 1);
    (&mut reader)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| corrupt(format!("{codec} decompression failed: {e}")))?;
    check_size(out, expected, codec)
}

/// `out` if it has exactly the `expected` size (when known).
pub(crate) fn check_size(out: Vec<u8>, expected: Option<usize>, codec: &str) -> Result<Vec<u8>> {
    match expected {
        Some(n) if out.len() > n => Err(corrupt(format!("{codec} decompressed to more than {n} bytes"))),
        Some(n) if out.len() < n => Err(corrupt(format!(
            "{codec} decompressed to {} bytes, expected {n}",
            out.len()
        ))),
        _ => Ok(out),
    }
}

/// An integer configuration field in `range`, or its default.
pub(crate) fn int_field(
    config: Option<&Map<String, Value>>,
    codec: &str,
    field: &str,
    range: std::ops::RangeInclusive<i64>,
    default: Option<i64>,
) -> Result<i64> {
    match config.and_then(|c| c.get(field)) {
        None => default.ok_or_else(|| corrupt(format!("{codec} codec has no configuration.{field}"))),
        Some(v) => v
            .as_i64()
            .filter(|n| range.contains(n))
            .ok_or_else(|| corrupt(format!("{codec} codec {field} {v} is not an integer in {range:?}"))),
    }
}
