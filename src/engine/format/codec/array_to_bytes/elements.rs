//! Codecs that encode typed elements into self-describing bytes:
//! numcodecs' `pcodec` (Zarr v2 compressor; `numcodecs.pcodec` in v3),
//! zarr-extensions' `pcodec`, and numcodecs' `zfpy` (read only).
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/compression/pcodec.html>,
//! <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/pcodec>.
//! Example: `{"id": "pcodec", "level": 8, "mode_spec": "auto",
//! "delta_spec": "auto", "paging_spec": "equal_pages_up_to", ...}`. The
//! encoded form is a standalone pco file holding the elements in C order;
//! the configuration only tuned the encoder, so decoding reads the file's
//! own header. `zfpy` chunks are zfp streams with zfp's full header
//! (`zfpy.compress_numpy`): <https://numcodecs.readthedocs.io/en/stable/compression/zfpy.html>,
//! decoded by [`super::zfp`].

use serde_json::{Map, Value};

use super::zfp::{self, Scalar};
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::data_type::DataType;

/// `$numbers!(T)` for the pco number type `T` that holds elements of
/// `$data_type`. As zarrs writes them, a complex number is two floats (its
/// real part, then its imaginary part) and an instant or duration its
/// 64-bit count; other types are unsupported.
macro_rules! by_pco_number {
    ($data_type:expr, $numbers:ident) => {
        match $data_type {
            DataType::UInt8 => $numbers!(u8),
            DataType::Int8 => $numbers!(i8),
            DataType::UInt16 => $numbers!(u16),
            DataType::UInt32 => $numbers!(u32),
            DataType::UInt64 => $numbers!(u64),
            DataType::Int16 => $numbers!(i16),
            DataType::Int32 => $numbers!(i32),
            DataType::Int64 => $numbers!(i64),
            DataType::Float16 => $numbers!(half::f16),
            DataType::Float32 | DataType::Complex64 => $numbers!(f32),
            DataType::Float64 | DataType::Complex128 => $numbers!(f64),
            DataType::DateTime64(_) | DataType::TimeDelta64(_) => $numbers!(i64),
            other => {
                return Err(Error::Unsupported(format!(
                    "pcodec of {} (pco has no such numbers)",
                    other.name()
                )))
            }
        }
    };
}

/// A codec of typed elements.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ElementsCodec {
    /// A standalone pco file.
    Pcodec {
        /// Compression level when encoding (numcodecs' default 8).
        level: usize,
    },
    /// A zfp stream with its header (its own mode and shape), written
    /// with the configured mode (none: numcodecs cannot write it either).
    Zfpy(Option<zfp::Config>),
}

impl ElementsCodec {
    /// The numcodecs ids of element codecs.
    pub(crate) const IDS: &'static [&'static str] = &["pcodec", "zfpy"];

    /// The codec numcodecs names `id`.
    pub(crate) fn from_numcodecs(id: &str, config: &Map<String, Value>) -> Result<Self> {
        match id {
            "pcodec" => Ok(Self::Pcodec {
                level: config.get("level").and_then(Value::as_u64).map_or(8, |l| l as usize),
            }),
            "zfpy" => Ok(Self::Zfpy(zfp::Config::of_zfpy(config))),
            other => Err(Error::Unsupported(format!("codec \"{other}\""))),
        }
    }

    /// The elements of `data_type` that `encoded` holds, little-endian, and
    /// how many there are (when the caller knows, it is checked).
    pub(crate) fn decode(&self, encoded: &[u8], data_type: DataType, count: Option<usize>) -> Result<Vec<u8>> {
        let out = match self {
            Self::Pcodec { .. } => pcodec(encoded, data_type)?,
            Self::Zfpy(_) => zfpy(encoded, data_type, count)?,
        };
        if let Some(count) = count.filter(|&n| n * data_type.size() != out.len()) {
            return Err(corrupt(format!(
                "{} decoded {} bytes, expected {count} {} elements",
                self.name(),
                out.len(),
                data_type.name()
            )));
        }
        Ok(out)
    }

    fn name(&self) -> &'static str {
        match self {
            Self::Pcodec { .. } => "pcodec",
            Self::Zfpy(_) => "zfpy",
        }
    }

    /// The zfp mode this codec encodes with, if it is a writable zfpy.
    pub(crate) fn zfp_config(&self) -> Option<&zfp::Config> {
        match self {
            Self::Zfpy(config) => config.as_ref(),
            Self::Pcodec { .. } => None,
        }
    }

    /// 501 unless [`ElementsCodec::encode`] can encode.
    pub(crate) fn check_writable(&self) -> Result<()> {
        match self {
            Self::Pcodec { .. } | Self::Zfpy(Some(_)) => Ok(()),
            Self::Zfpy(None) => Err(zfpy_without_mode()),
        }
    }

    /// Compress little-endian elements of `data_type`, a chunk of `shape`
    /// (zfpy records it).
    pub(crate) fn encode(&self, decoded: &[u8], data_type: DataType, shape: &[u64]) -> Result<Vec<u8>> {
        let level = match self {
            Self::Pcodec { level } => level,
            Self::Zfpy(None) => return Err(zfpy_without_mode()),
            Self::Zfpy(Some(config)) => {
                let field = zfp::Field::of_shape(zfpy_scalar(data_type)?, shape)?;
                return zfp::encode(decoded, &field, &config.mode(&field, field.sizes.len()), true);
            }
        };
        let config = pco::ChunkConfig::default().with_compression_level((*level).min(12));
        let failed = |e: pco::errors::PcoError| Error::Internal(format!("pcodec compression failed: {e}"));
        macro_rules! numbers {
            ($t:ty) => {{
                let size = std::mem::size_of::<$t>();
                let values: Vec<$t> = decoded
                    .chunks_exact(size)
                    .map(|b| <$t>::from_le_bytes(b.try_into().expect("element size")))
                    .collect();
                pco::standalone::simple_compress(&values, &config).map_err(failed)?
            }};
        }
        Ok(by_pco_number!(data_type, numbers))
    }
}

/// The elements of `data_type` a zfpy chunk holds, little-endian: the
/// stream's header must name the type, and `count` elements when given
/// (it is needed: the header alone could claim any size).
fn zfpy(encoded: &[u8], data_type: DataType, count: Option<usize>) -> Result<Vec<u8>> {
    let scalar = zfpy_scalar(data_type)?;
    let Some(count) = count else {
        return Err(Error::Unsupported(
            "zfpy after a filter that changes the element count".into(),
        ));
    };
    zfp::decode_with_header(encoded, |field| {
        if field.scalar != scalar || field.len() != count {
            return Err(corrupt(format!(
                "zfpy stream holds {} {} values, the chunk {count} {}",
                field.len(),
                field.scalar.name(),
                data_type.name()
            )));
        }
        Ok(())
    })
}

/// Writing a `zfpy` whose configuration names no mode numcodecs writes.
fn zfpy_without_mode() -> Error {
    crate::engine::format::codec::cannot_write("zfpy without a numcodecs mode (2, 3, 4 or 5)")
}

/// The zfp scalar zfpy stores elements of `data_type` as.
fn zfpy_scalar(data_type: DataType) -> Result<Scalar> {
    Ok(match data_type {
        DataType::Int32 => Scalar::Int32,
        DataType::Int64 => Scalar::Int64,
        DataType::Float32 => Scalar::Float,
        DataType::Float64 => Scalar::Double,
        other => {
            return Err(Error::Unsupported(format!(
                "zfpy of {} (zfpy holds int32, int64, float32, float64)",
                other.name()
            )))
        }
    })
}

/// A standalone pco file's numbers of `data_type`, little-endian.
fn pcodec(encoded: &[u8], data_type: DataType) -> Result<Vec<u8>> {
    let failed = |e: pco::errors::PcoError| corrupt(format!("pcodec decompression failed: {e}"));
    macro_rules! numbers {
        ($t:ty) => {
            pco::standalone::simple_decompress::<$t>(encoded)
                .map_err(failed)?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect()
        };
    }
    Ok(by_pco_number!(data_type, numbers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcodec_round_trips_and_checks() {
        let values: Vec<i32> = (0..1000).map(|i| i * i - 500).collect();
        let encoded = pco::standalone::simple_compress(&values, &pco::ChunkConfig::default()).unwrap();
        let want: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let codec = ElementsCodec::Pcodec { level: 8 };
        assert_eq!(codec.decode(&encoded, DataType::Int32, Some(1000)).unwrap(), want);
        assert!(codec.decode(&encoded, DataType::Int32, Some(999)).is_err());
        assert!(codec.decode(&encoded, DataType::Float32, None).is_err());
        assert!(codec
            .decode(&encoded[..encoded.len() / 2], DataType::Int32, None)
            .is_err());
        // Complex numbers as pairs of floats; instants as their counts.
        let parts: Vec<f32> = vec![1.5, -2.0, 0.25, 8.0];
        let encoded = pco::standalone::simple_compress(&parts, &pco::ChunkConfig::default()).unwrap();
        let want: Vec<u8> = parts.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(codec.decode(&encoded, DataType::Complex64, Some(2)).unwrap(), want);
        assert!(codec.decode(&encoded, DataType::Complex64, Some(4)).is_err());
        let counts: Vec<i64> = vec![0, 86_400, crate::engine::NAT];
        let encoded = pco::standalone::simple_compress(&counts, &pco::ChunkConfig::default()).unwrap();
        let unit = crate::engine::TimeUnit::parse("s").unwrap();
        let want: Vec<u8> = counts.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            codec.decode(&encoded, DataType::DateTime64(unit), Some(3)).unwrap(),
            want
        );
        assert_eq!(
            codec.decode(&encoded, DataType::TimeDelta64(unit), Some(3)).unwrap(),
            want
        );
        for (dt, n) in [(DataType::Int32, 1000usize), (DataType::Complex64, 2)] {
            let raw: Vec<u8> = (0..n * dt.size()).map(|i| (i % 7) as u8).collect();
            let raw = match dt {
                DataType::Complex64 => parts.iter().flat_map(|v| v.to_le_bytes()).collect(),
                _ => raw,
            };
            let packed = codec.encode(&raw, dt, &[n as u64]).unwrap();
            assert_eq!(codec.decode(&packed, dt, Some(n)).unwrap(), raw, "{dt:?}");
        }
        let zfpy = ElementsCodec::from_numcodecs("zfpy", &Map::new()).unwrap();
        // Without a numcodecs mode it cannot be written (nor can numcodecs).
        assert!(zfpy.check_writable().is_err() && zfpy.encode(&[0; 4], DataType::Float32, &[1]).is_err());
        let config = serde_json::json!({"mode": 4, "tolerance": 0.5});
        let accurate = ElementsCodec::from_numcodecs("zfpy", config.as_object().unwrap()).unwrap();
        let values: Vec<u8> = (0..12).flat_map(|i| (i as f64 * 1.5).to_le_bytes()).collect();
        let packed = accurate.encode(&values, DataType::Float64, &[3, 4]).unwrap();
        let back = accurate.decode(&packed, DataType::Float64, Some(12)).unwrap();
        for (a, b) in back.chunks(8).zip(values.chunks(8)) {
            let (a, b) = (
                f64::from_le_bytes(a.try_into().unwrap()),
                f64::from_le_bytes(b.try_into().unwrap()),
            );
            assert!((a - b).abs() <= 0.5, "{a} vs {b}");
        }
        let stream = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/zfp/float32_2d_reversible.zfp"
        ))
        .unwrap();
        assert_eq!(zfpy.decode(&stream, DataType::Float32, Some(63)).unwrap().len(), 63 * 4);
        for (dt, n) in [(DataType::Float32, Some(62)), (DataType::Float64, Some(63))] {
            let e = zfpy.decode(&stream, dt, n).unwrap_err();
            assert!(e.to_string().contains("holds 63 float32 values"), "{e}");
        }
        assert!(matches!(
            zfpy.decode(&stream, DataType::Float32, None),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            zfpy.decode(&stream, DataType::UInt8, Some(63)),
            Err(Error::Unsupported(_))
        ));
    }
}
