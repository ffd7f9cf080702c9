//! The `cast_value` codec (zarr-extensions).
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/cast_value>.
//! Example: `{"name": "cast_value", "configuration": {"data_type": "uint16",
//! "rounding": "nearest-even", "out_of_range": "clamp", "scalar_map":
//! {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}}`. The encoded
//! elements are of `data_type`; decoding casts each back to the array's
//! type: a value the `decode` map names becomes its mapped value, else it
//! is converted, rounded by `rounding` and kept in range by `out_of_range`
//! (absent: a value out of range is an error, as is NaN into integers).

use serde_json::{Map, Value};

use super::scalar::{is_real, OutOfRange, Rounding, Scalar};
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::codec::ChunkRepr;
use crate::engine::format::data_type::DataType;

/// A cast between real data types.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CastValueCodec {
    /// The encoded (stored) type.
    to: DataType,
    rounding: Rounding,
    out_of_range: OutOfRange,
    /// (stored value, array value) pairs applied on decode.
    decode_map: Vec<(Scalar, Scalar)>,
    /// (array value, stored value) pairs applied on encode (the fill value).
    encode_map: Vec<(Scalar, Scalar)>,
}

impl CastValueCodec {
    /// Parse the configuration for chunks of `repr`.
    pub(crate) fn from_json(config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        let config = config.ok_or_else(|| corrupt("cast_value without configuration"))?;
        const FIELDS: [&str; 4] = ["data_type", "rounding", "out_of_range", "scalar_map"];
        if let Some(key) = config.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(corrupt(format!("cast_value has an unknown field \"{key}\"")));
        }
        let from = repr.data_type;
        let to = DataType::from_json(
            config
                .get("data_type")
                .ok_or_else(|| corrupt("cast_value has no data_type"))?,
        )?;
        for dt in [from, to] {
            if !is_real(dt) {
                return Err(Error::Unsupported(format!("cast_value of {}", dt.name())));
            }
        }
        let out_of_range = OutOfRange::parse(config.get("out_of_range"))?;
        if out_of_range == OutOfRange::Wrap && matches!(to, DataType::Float16 | DataType::Float32 | DataType::Float64) {
            return Err(corrupt("cast_value out_of_range \"wrap\" needs an integer data_type"));
        }
        let map = config.get("scalar_map");
        let pairs = |direction: &str, key_type: DataType, value_type: DataType| -> Result<Vec<(Scalar, Scalar)>> {
            let Some(list) = map.and_then(|m| m.get(direction)) else {
                return Ok(Vec::new());
            };
            let bad = || corrupt(format!("cast_value scalar_map.{direction} {list}"));
            list.as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|pair| match pair.as_array().map(Vec::as_slice) {
                    Some([k, v]) => Ok((Scalar::from_json(k, key_type)?, Scalar::from_json(v, value_type)?)),
                    _ => Err(bad()),
                })
                .collect()
        };
        Ok(Self {
            to,
            rounding: Rounding::parse(config.get("rounding"))?,
            out_of_range,
            decode_map: pairs("decode", to, from)?,
            encode_map: pairs("encode", from, to)?,
        })
    }

    /// The encoded representation: the same shape, elements of `data_type`,
    /// the fill value cast as encoding would.
    pub(crate) fn encoded_repr(&self, repr: &ChunkRepr) -> ChunkRepr {
        let fill = Scalar::read(&repr.fill_value, repr.data_type);
        let cast = lookup(&self.encode_map, fill)
            .map(Ok)
            .unwrap_or_else(|| fill.cast(self.to, self.rounding, self.out_of_range));
        let mut bytes = Vec::new();
        // A fill value that does not cast is invalid metadata; its chunks
        // are never missing then, so any placeholder does.
        cast.unwrap_or(Scalar::Int(0)).write(self.to, &mut bytes);
        ChunkRepr::new(repr.shape.clone(), self.to, bytes)
    }

    /// Decode elements of `data_type` into elements of `decoded`.
    pub(crate) fn decode(&self, encoded: &[u8], decoded: &ChunkRepr) -> Result<Vec<u8>> {
        let size = self.to.size();
        let mut out = Vec::with_capacity(encoded.len() / size * decoded.data_type.size());
        for element in encoded.chunks_exact(size) {
            let stored = Scalar::read(element, self.to);
            let value = match lookup(&self.decode_map, stored) {
                Some(mapped) => mapped,
                None => stored.cast(decoded.data_type, self.rounding, self.out_of_range)?,
            };
            value.write(decoded.data_type, &mut out);
        }
        Ok(out)
    }

    /// Encode elements of `decoded` into elements of `data_type`: a value
    /// the `encode` map names becomes its mapped value, else it is cast
    /// under `rounding` and `out_of_range` (a value that does not cast is
    /// a bad request).
    pub(crate) fn encode(&self, array: &[u8], decoded: &ChunkRepr) -> Result<Vec<u8>> {
        let from = decoded.data_type;
        let mut out = Vec::with_capacity(array.len() / from.size() * self.to.size());
        for element in array.chunks_exact(from.size()) {
            let value = Scalar::read(element, from);
            let stored = match lookup(&self.encode_map, value) {
                Some(mapped) => mapped,
                None => value
                    .cast(self.to, self.rounding, self.out_of_range)
                    .map_err(|e| match e {
                        Error::Corrupt { reason, .. } => Error::InvalidRequest(reason),
                        other => other,
                    })?,
            };
            stored.write(self.to, &mut out);
        }
        Ok(out)
    }
}

/// The value the first pair whose key matches `v` maps it to.
fn lookup(map: &[(Scalar, Scalar)], v: Scalar) -> Option<Scalar> {
    map.iter().find(|(k, _)| k.same(v)).map(|(_, m)| *m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_with_the_scalar_map_and_rounding() {
        let repr = ChunkRepr::new(vec![3], DataType::Float32, f32::NAN.to_le_bytes().to_vec());
        let config = json!({"data_type": "uint16", "out_of_range": "clamp",
            "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}});
        let codec = CastValueCodec::from_json(config.as_object(), &repr).unwrap();
        let inner = codec.encoded_repr(&repr);
        assert_eq!(
            (inner.data_type, inner.fill_value.clone()),
            (DataType::UInt16, vec![0, 0])
        );
        let out = codec.decode(&[0, 0, 0xe8, 0x03, 0xff, 0xff], &repr).unwrap();
        let got: Vec<f32> = out
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert!(got[0].is_nan());
        assert_eq!(&got[1..], [1000.0, 65535.0]);
        // Into integers: out of range without a rule is an error.
        let ints = ChunkRepr::new(vec![1], DataType::Int8, vec![0]);
        let strict = CastValueCodec::from_json(json!({"data_type": "int32"}).as_object(), &ints).unwrap();
        assert!(strict.decode(&300i32.to_le_bytes(), &ints).is_err());
        assert_eq!(strict.decode(&(-5i32).to_le_bytes(), &ints).unwrap(), vec![251]);
        for bad in [
            json!({}),
            json!({"data_type": "uint8", "extra": 1}),
            json!({"data_type": "float32", "out_of_range": "wrap"}),
        ] {
            assert!(CastValueCodec::from_json(bad.as_object(), &ints).is_err(), "{bad}");
        }
    }
}
