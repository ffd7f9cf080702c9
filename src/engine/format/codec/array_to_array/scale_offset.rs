//! The `scale_offset` codec (zarr-extensions).
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/scale_offset>.
//! Example: `{"name": "scale_offset", "configuration": {"offset": -0.1,
//! "scale": 10000}}`. Encoding stores `(x - offset) * scale` in the same
//! data type; decoding computes `x / scale + offset` in that type (float32
//! arithmetic for float32). For integers the division must be exact and the
//! result in range, else the chunk is corrupt.

use serde_json::{Map, Value};

use super::scalar::{is_real, Scalar};
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::codec::ChunkRepr;
use crate::engine::format::data_type::DataType;

/// `x / scale + offset` on decode.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScaleOffsetCodec {
    offset: Scalar,
    scale: Scalar,
}

impl ScaleOffsetCodec {
    /// Parse the configuration for chunks of `repr` (scale and offset in
    /// the fill-value form of its data type).
    pub(crate) fn from_json(config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        let data_type = repr.data_type;
        if !is_real(data_type) {
            return Err(Error::Unsupported(format!("scale_offset on {}", data_type.name())));
        }
        let empty = Map::new();
        let config = config.unwrap_or(&empty);
        if let Some(key) = config.keys().find(|k| *k != "offset" && *k != "scale") {
            return Err(corrupt(format!("scale_offset has an unknown field \"{key}\"")));
        }
        let field = |name: &str, default: i64| match config.get(name) {
            None | Some(Value::Null) => Scalar::from_json(&Value::from(default), data_type),
            Some(v) => Scalar::from_json(v, data_type),
        };
        let (offset, scale) = (field("offset", 0)?, field("scale", 1)?);
        if scale == Scalar::Int(0) || scale == Scalar::Float(0.0) {
            return Err(corrupt("scale_offset scale is 0"));
        }
        Ok(Self { offset, scale })
    }

    /// The fill value of the encoded chunks: `(fill - offset) * scale`.
    pub(crate) fn encoded_fill(&self, repr: &ChunkRepr) -> Vec<u8> {
        let fill = Scalar::read(&repr.fill_value, repr.data_type);
        let encoded = match (fill, self.offset, self.scale) {
            (Scalar::Int(x), Scalar::Int(o), Scalar::Int(s)) => Scalar::Int((x - o) * s),
            _ => Scalar::Float(float_op(
                repr.data_type,
                as_f64(fill) - as_f64(self.offset),
                as_f64(self.scale),
                |a, b| a * b,
            )),
        };
        let mut out = Vec::new();
        encoded.write(repr.data_type, &mut out);
        out
    }

    /// Decode elements of `repr`'s data type in place.
    pub(crate) fn decode(&self, encoded: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>> {
        let data_type = repr.data_type;
        let size = data_type.size();
        let mut out = Vec::with_capacity(encoded.len());
        for element in encoded.chunks_exact(size) {
            let decoded = match (Scalar::read(element, data_type), self.scale, self.offset) {
                (Scalar::Int(x), Scalar::Int(s), Scalar::Int(o)) => {
                    if x % s != 0 {
                        return Err(corrupt(format!("scale_offset: {x} is not a multiple of the scale {s}")));
                    }
                    Scalar::Int(x / s + o)
                        .cast(
                            data_type,
                            super::scalar::Rounding::NearestEven,
                            super::scalar::OutOfRange::Error,
                        )
                        .map_err(|_| corrupt(format!("scale_offset: {x} / {s} + {o} is out of range")))?
                }
                (x, s, o) => {
                    let divided = float_op(data_type, as_f64(x), as_f64(s), |a, b| a / b);
                    Scalar::Float(float_op(data_type, divided, as_f64(o), |a, b| a + b))
                }
            };
            decoded.write(data_type, &mut out);
        }
        Ok(out)
    }

    /// Encode elements of `repr`: `(x - offset) * scale` in the data type
    /// (integers out of its range are a bad request).
    pub(crate) fn encode(&self, decoded: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>> {
        let data_type = repr.data_type;
        let mut out = Vec::with_capacity(decoded.len());
        for element in decoded.chunks_exact(data_type.size()) {
            let encoded = match (Scalar::read(element, data_type), self.offset, self.scale) {
                (Scalar::Int(x), Scalar::Int(o), Scalar::Int(s)) => Scalar::Int((x - o) * s)
                    .cast(
                        data_type,
                        super::scalar::Rounding::NearestEven,
                        super::scalar::OutOfRange::Error,
                    )
                    .map_err(|_| {
                        Error::InvalidRequest(format!(
                            "scale_offset: ({x} - {o}) * {s} is out of the range of {}",
                            data_type.name()
                        ))
                    })?,
                (x, o, s) => {
                    let shifted = float_op(data_type, as_f64(x), as_f64(o), |a, b| a - b);
                    Scalar::Float(float_op(data_type, shifted, as_f64(s), |a, b| a * b))
                }
            };
            encoded.write(data_type, &mut out);
        }
        Ok(out)
    }
}

fn as_f64(s: Scalar) -> f64 {
    match s {
        Scalar::Int(i) => i as f64,
        Scalar::Float(f) => f,
    }
}

/// `op(a, b)` in the arithmetic of `data_type`: each operation rounded to
/// float32 for float32 (and float16) arrays, as NumPy computes.
fn float_op(data_type: DataType, a: f64, b: f64, op: impl Fn(f64, f64) -> f64) -> f64 {
    match data_type {
        DataType::Float32 => f64::from(op(f64::from(a as f32), f64::from(b as f32)) as f32),
        DataType::Float16 => {
            let h = |x: f64| half::f16::from_f64(x).to_f64();
            h(op(h(a), h(b)))
        }
        _ => op(a, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec(config: Value, dt: DataType) -> (ScaleOffsetCodec, ChunkRepr) {
        let repr = ChunkRepr::new(vec![4], dt, vec![0; dt.size()]);
        (ScaleOffsetCodec::from_json(config.as_object(), &repr).unwrap(), repr)
    }

    #[test]
    fn decodes_in_the_array_type() {
        // The notes' vector: int32 [10,12,14,16], offset 10, scale 2 -> [0,4,8,12].
        let (c, r) = codec(json!({"offset": 10, "scale": 2}), DataType::Int32);
        let stored: Vec<u8> = [0i32, 4, 8, 12].iter().flat_map(|v| v.to_le_bytes()).collect();
        let want: Vec<u8> = [10i32, 12, 14, 16].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(c.decode(&stored, &r).unwrap(), want);
        let odd: Vec<u8> = [1i32, 0, 0, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(c.decode(&odd, &r).is_err(), "not a multiple of the scale");
        let (c, r) = codec(json!({"offset": -0.1, "scale": 10000}), DataType::Float32);
        let stored: Vec<u8> = [1000.0f32, 2234.0, 0.0, 1.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let want: Vec<u8> = [1000.0f32, 2234.0, 0.0, 1.0]
            .iter()
            .flat_map(|v| (v / 10000.0f32 + -0.1f32).to_le_bytes())
            .collect();
        assert_eq!(c.decode(&stored, &r).unwrap(), want);
        let bad = ScaleOffsetCodec::from_json(json!({"scale": 0}).as_object(), &r);
        assert!(bad.is_err());
    }
}
