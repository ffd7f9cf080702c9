//! numcodecs' element filters: Zarr v2 `filters`, and in Zarr v3 the
//! array -> array codecs `numcodecs.<id>`.
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/filter/index.html>.
//! Examples: `{"id": "delta", "dtype": "<i4", "astype": "<i2"}`,
//! `{"id": "fixedscaleoffset", "scale": 100, "offset": 0, "dtype": "<f8",
//! "astype": "<i4"}`, `{"id": "packbits"}`. Each filter turns the bytes it
//! encoded back into the bytes it was given, exactly as numcodecs'
//! `decode` does. (`shuffle`, which moves bytes and knows no type, is a
//! bytes -> bytes codec.)

use serde_json::{Map, Value};

use super::num::{NumType, Values};
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::codec::cannot_write;
use crate::engine::format::data_type::DataType;

/// One filter of a v2 array's `filters` list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Filter {
    /// `delta`: encoded differences (as `astype`) summed back in `dtype`.
    Delta { dtype: NumType, astype: NumType },
    /// `fixedscaleoffset`: `encoded / scale + offset`, cast to `dtype`.
    FixedScaleOffset {
        dtype: NumType,
        astype: NumType,
        scale: f64,
        offset: f64,
    },
    /// `quantize` and `astype`: a cast from the encoded type to `dtype`;
    /// `quantize` keeps `digits` decimal digits when it encodes.
    Cast {
        from: NumType,
        to: NumType,
        id: &'static str,
        digits: Option<i32>,
    },
    /// `bitround`: rounded mantissas decode as they are; encoding keeps
    /// `keepbits` bits of each float's mantissa.
    BitRound { keepbits: Option<u32> },
    /// `packbits`: booleans eight to a byte, most significant bit first,
    /// after a byte giving the number of padding bits at the end.
    PackBits,
}

fn typestr(config: &Map<String, Value>, id: &str, field: &str, default: Option<&str>) -> Result<NumType> {
    match config.get(field).and_then(Value::as_str).or(default) {
        Some(s) => NumType::parse(s),
        None => Err(corrupt(format!("{id} filter has no {field}"))),
    }
}

fn number(config: &Map<String, Value>, id: &str, field: &str, default: Option<f64>) -> Result<f64> {
    match config.get(field) {
        None | Some(Value::Null) => default.ok_or_else(|| corrupt(format!("{id} filter has no {field}"))),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| corrupt(format!("{id} filter {field} {v} is not a number"))),
    }
}

impl Filter {
    /// The ids of the filters numcodecs has and this module decodes.
    pub(crate) const IDS: &'static [&'static str] = &[
        "delta",
        "fixedscaleoffset",
        "quantize",
        "astype",
        "bitround",
        "packbits",
    ];

    /// The filter's numcodecs id.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Delta { .. } => "delta",
            Self::FixedScaleOffset { .. } => "fixedscaleoffset",
            Self::Cast { id, .. } => id,
            Self::BitRound { .. } => "bitround",
            Self::PackBits => "packbits",
        }
    }

    /// The filter a numcodecs configuration names.
    #[cfg(test)]
    pub(crate) fn from_json(config: &Value) -> Result<Self> {
        let (id, obj) = crate::engine::format::json::numcodecs_id(config, "filter")?;
        Self::from_config(id, obj)
    }

    /// The filter `id` with its numcodecs configuration `obj`.
    pub(crate) fn from_config(id: &str, obj: &Map<String, Value>) -> Result<Self> {
        Ok(match id {
            "delta" => {
                let dtype = typestr(obj, id, "dtype", None)?;
                let astype = match obj.get("astype").and_then(Value::as_str) {
                    Some(s) => NumType::parse(s)?,
                    None => dtype,
                };
                Filter::Delta { dtype, astype }
            }
            "fixedscaleoffset" => {
                let dtype = typestr(obj, id, "dtype", None)?;
                let astype = match obj.get("astype").and_then(Value::as_str) {
                    Some(s) => NumType::parse(s)?,
                    None => dtype,
                };
                let scale = number(obj, id, "scale", Some(1.0))?;
                let offset = number(obj, id, "offset", Some(0.0))?;
                Filter::FixedScaleOffset {
                    dtype,
                    astype,
                    scale,
                    offset,
                }
            }
            "quantize" => {
                let to = typestr(obj, id, "dtype", None)?;
                let from = match obj.get("astype").and_then(Value::as_str) {
                    Some(s) => NumType::parse(s)?,
                    None => to,
                };
                Filter::Cast {
                    from,
                    to,
                    id: "quantize",
                    digits: Some(number(obj, id, "digits", None)? as i32),
                }
            }
            "astype" => Filter::Cast {
                from: typestr(obj, id, "encode_dtype", None)?,
                to: typestr(obj, id, "decode_dtype", None)?,
                id: "astype",
                digits: None,
            },
            "bitround" => Filter::BitRound {
                keepbits: obj.get("keepbits").and_then(Value::as_u64).map(|k| k as u32),
            },
            "packbits" => Filter::PackBits,
            other => return Err(Error::Unsupported(format!("filter \"{other}\""))),
        })
    }

    /// The element type this filter encodes `decoded` elements into.
    pub(crate) fn encoded_type(&self, decoded: DataType) -> DataType {
        match self {
            Filter::Delta { astype, .. } | Filter::FixedScaleOffset { astype, .. } => astype.data_type,
            Filter::Cast { from, .. } => from.data_type,
            Filter::BitRound { .. } => decoded,
            Filter::PackBits => DataType::UInt8,
        }
    }

    /// The encoded size of `decoded` bytes, when the filter fixes it.
    pub(crate) fn encoded_size(&self, decoded: usize) -> Option<usize> {
        let resized = |from: &NumType, to: &NumType| decoded / from.data_type.size() * to.data_type.size();
        Some(match self {
            Filter::Delta { dtype, astype } | Filter::FixedScaleOffset { dtype, astype, .. } => resized(dtype, astype),
            Filter::Cast { from, to, .. } => resized(to, from),
            Filter::BitRound { .. } => decoded,
            Filter::PackBits => 1 + decoded.div_ceil(8),
        })
    }

    /// The bytes this filter was given, from the bytes it produced.
    pub(crate) fn decode(&self, encoded: &[u8]) -> Result<Vec<u8>> {
        match self {
            Filter::BitRound { .. } => Ok(encoded.to_vec()),
            Filter::PackBits => unpack_bits(encoded),
            Filter::Cast { from, to, id, .. } => to.write(&from.read(encoded, id)?, id),
            Filter::Delta { dtype, astype } => {
                let sums = match astype.read(encoded, "delta")? {
                    Values::Int(diffs) if !dtype.is_float() => {
                        let mut total = 0i128;
                        Values::Int(
                            diffs
                                .into_iter()
                                .map(|d| {
                                    total = dtype.wrap(total + d);
                                    total
                                })
                                .collect(),
                        )
                    }
                    diffs => {
                        let diffs = match diffs {
                            Values::Int(v) => v.into_iter().map(|d| d as f64).collect(),
                            Values::Float(v) => v,
                        };
                        let mut total = 0.0;
                        Values::Float(
                            diffs
                                .into_iter()
                                .map(|d| {
                                    total = dtype.round(total + d);
                                    total
                                })
                                .collect(),
                        )
                    }
                };
                dtype.write(&sums, "delta")
            }
            Filter::FixedScaleOffset {
                dtype,
                astype,
                scale,
                offset,
            } => {
                let encoded = floats(astype.read(encoded, "fixedscaleoffset")?);
                let decoded = encoded.into_iter().map(|x| x / scale + offset).collect();
                dtype.write(&Values::Float(decoded), "fixedscaleoffset")
            }
        }
    }

    /// 501 unless [`Filter::encode`] can encode elements of `data_type`:
    /// `bitround` needs `keepbits` and floats.
    pub(crate) fn check_writable(&self, data_type: DataType) -> Result<()> {
        match self {
            Filter::BitRound { keepbits: None } => Err(cannot_write("bitround without keepbits")),
            Filter::BitRound { .. } if mantissa_bits(data_type).is_none() => {
                Err(cannot_write(&format!("bitround of {}", data_type.name())))
            }
            _ => Ok(()),
        }
    }

    /// The bytes this filter produces from `decoded` elements of
    /// `data_type` (little-endian), as numcodecs' `encode` computes them:
    /// differences in `dtype`, `around((x - offset) * scale)`, mantissas
    /// rounded to a power of two, casts, packed bits.
    pub(crate) fn encode(&self, decoded: &[u8], data_type: DataType) -> Result<Vec<u8>> {
        let id = self.name();
        match self {
            Filter::PackBits => Ok(pack_bits(decoded)),
            Filter::BitRound { keepbits } => {
                self.check_writable(data_type)?;
                bit_round(decoded, data_type, keepbits.unwrap_or_default())
            }
            Filter::Cast {
                from, to, digits: None, ..
            } => from.write(&to.read(decoded, id)?, id),
            Filter::Cast {
                from,
                to,
                digits: Some(digits),
                ..
            } => {
                let scale = quantize_scale(*digits);
                let values = floats(to.read(decoded, id)?);
                let rounded = values
                    .into_iter()
                    .map(|x| to.round(scale * x).round_ties_even() / scale)
                    .collect();
                from.write(&Values::Float(rounded), id)
            }
            Filter::Delta { dtype, astype } => {
                // Differences in `dtype`; writing them as `astype` wraps them.
                let diffs = match dtype.read(decoded, id)? {
                    Values::Int(v) => Values::Int(differences(&v, |a, b| dtype.wrap(a - b))),
                    Values::Float(v) => Values::Float(differences(&v, |a, b| dtype.round(a - b))),
                };
                astype.write(&diffs, id)
            }
            Filter::FixedScaleOffset {
                dtype,
                astype,
                scale,
                offset,
            } => {
                let values = floats(dtype.read(decoded, id)?);
                let scaled = values
                    .into_iter()
                    .map(|x| dtype.round(dtype.round(x - offset) * scale).round_ties_even())
                    .collect();
                astype.write(&Values::Float(scaled), id)
            }
        }
    }
}

/// The first element, then each element minus the one before.
fn differences<T: Copy>(values: &[T], minus: impl Fn(T, T) -> T) -> Vec<T> {
    let mut out = Vec::with_capacity(values.len());
    out.extend(values.first().copied());
    out.extend(values.windows(2).map(|w| minus(w[1], w[0])));
    out
}

fn floats(values: Values) -> Vec<f64> {
    match values {
        Values::Int(v) => v.into_iter().map(|x| x as f64).collect(),
        Values::Float(v) => v,
    }
}

/// numcodecs' `quantize` scale: the power of two at least `10^digits`.
fn quantize_scale(digits: i32) -> f64 {
    let exponent = (10f64.powi(-digits)).log10();
    let exponent = if exponent < 0.0 {
        exponent.floor()
    } else {
        exponent.ceil()
    };
    let bits = 10f64.powf(-exponent).log2().ceil();
    2f64.powf(bits)
}

/// numcodecs' `bitround`: round each float's mantissa to `keepbits` bits
/// (ties to even), the rest zero.
fn bit_round(decoded: &[u8], data_type: DataType, keepbits: u32) -> Result<Vec<u8>> {
    let mantissa = mantissa_bits(data_type).expect("checked by Filter::check_writable");
    if keepbits > mantissa {
        return Err(corrupt(format!("bitround keepbits {keepbits} above {mantissa}")));
    }
    if keepbits == mantissa {
        return Ok(decoded.to_vec());
    }
    let drop = mantissa - keepbits;
    let size = data_type.size();
    let mut out = Vec::with_capacity(decoded.len());
    for element in decoded.chunks_exact(size) {
        let mut word = [0u8; 8];
        word[..size].copy_from_slice(element);
        let bits = u64::from_le_bytes(word);
        let width_mask = if size == 8 { u64::MAX } else { (1u64 << (8 * size)) - 1 };
        let half_quantum = (1u64 << (drop - 1)) - 1;
        let rounded = bits.wrapping_add(((bits >> drop) & 1) + half_quantum) & width_mask;
        let kept = rounded & (width_mask >> drop << drop);
        out.extend_from_slice(&kept.to_le_bytes()[..size]);
    }
    Ok(out)
}

/// The explicit mantissa bits of a float type (`None` for other types).
fn mantissa_bits(data_type: DataType) -> Option<u32> {
    match data_type {
        DataType::Float16 => Some(10),
        DataType::Float32 => Some(23),
        DataType::Float64 => Some(52),
        _ => None,
    }
}

/// numcodecs' `packbits` encode: a byte counting the padding bits, then
/// the booleans eight to a byte, most significant bit first.
fn pack_bits(decoded: &[u8]) -> Vec<u8> {
    let padding = (8 - decoded.len() % 8) % 8;
    let mut out = Vec::with_capacity(1 + decoded.len().div_ceil(8));
    out.push(padding as u8);
    for byte in decoded.chunks(8) {
        let packed = byte
            .iter()
            .enumerate()
            .fold(0u8, |acc, (i, &b)| acc | (u8::from(b != 0) << (7 - i)));
        out.push(packed);
    }
    out
}

/// numcodecs' `packbits`: the first byte is the number of padding bits in
/// the last byte, the rest the booleans, most significant bit first.
fn unpack_bits(encoded: &[u8]) -> Result<Vec<u8>> {
    let (&padding, packed) = encoded
        .split_first()
        .ok_or_else(|| corrupt("packbits: an empty chunk has no padding byte"))?;
    if padding > 7 || (packed.is_empty() && padding != 0) {
        return Err(corrupt(format!("packbits: {padding} padding bits")));
    }
    let count = packed.len() * 8 - usize::from(padding);
    Ok((0..count).map(|i| (packed[i / 8] >> (7 - i % 8)) & 1).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(v: Value) -> Filter {
        Filter::from_json(&v).unwrap()
    }

    #[test]
    fn delta_sums_back_and_wraps() {
        let f = filter(json!({"id": "delta", "dtype": "<i2", "astype": "|i1"}));
        let encoded: Vec<u8> = [5i8, 1, -2, 100, 100].iter().map(|&d| d as u8).collect();
        let want: Vec<u8> = [5i16, 6, 4, 104, 204].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(f.decode(&encoded).unwrap(), want);
        let wraps = filter(json!({"id": "delta", "dtype": "|u1"}));
        assert_eq!(wraps.decode(&[200, 100]).unwrap(), vec![200, 44]);
    }

    #[test]
    fn fixedscaleoffset_scales_back() {
        let f = filter(json!({"id": "fixedscaleoffset", "scale": 10, "offset": 1000, "dtype": "<f8", "astype": "<i2"}));
        let encoded: Vec<u8> = [0i16, 15, -3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let want: Vec<u8> = [1000.0f64, 1001.5, 999.7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(f.decode(&encoded).unwrap(), want);
    }

    #[test]
    fn astype_and_quantize_cast() {
        let f = filter(json!({"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<f8"}));
        assert_eq!(f.decode(&1.5f32.to_le_bytes()).unwrap(), 1.5f64.to_le_bytes().to_vec());
        let q = filter(json!({"id": "quantize", "digits": 2, "dtype": "<f8", "astype": "<f4"}));
        assert_eq!(
            q.decode(&0.25f32.to_le_bytes()).unwrap(),
            0.25f64.to_le_bytes().to_vec()
        );
    }

    #[test]
    fn packbits_unpacks_most_significant_bit_first() {
        let f = filter(json!({"id": "packbits"}));
        // numpy: packbits([1,0,1,1,0,0,0,0, 1,1]) = [0xb0, 0xc0], 6 padding bits.
        assert_eq!(f.decode(&[6, 0xb0, 0xc0]).unwrap(), vec![1, 0, 1, 1, 0, 0, 0, 0, 1, 1]);
        assert_eq!(f.decode(&[0]).unwrap(), Vec::<u8>::new());
        assert_eq!(f.encoded_size(10), Some(3));
        for bad in [&[][..], &[8, 0], &[1]] {
            assert!(f.decode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unknown_filters_are_unsupported_by_name() {
        let e = Filter::from_json(&json!({"id": "categorize", "labels": []})).unwrap_err();
        assert!(matches!(&e, Error::Unsupported(m) if m.contains("categorize")), "{e:?}");
    }
}
