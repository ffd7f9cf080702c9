//! numcodecs filters of Zarr v2 arrays, decode direction only.
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/filter/index.html>.
//! Examples: `{"id": "delta", "dtype": "<i4", "astype": "<i2"}`,
//! `{"id": "fixedscaleoffset", "scale": 100, "offset": 0, "dtype": "<f8",
//! "astype": "<i4"}`, `{"id": "shuffle", "elementsize": 4}`. Each filter
//! turns the bytes it encoded back into the bytes it was given, exactly as
//! numcodecs' `decode` does.

use serde_json::{Map, Value};

use super::num::{NumType, Values};
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::json::numcodecs_id;

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
    /// `quantize` and `astype`: a cast from the encoded type to `dtype`.
    Cast {
        from: NumType,
        to: NumType,
        id: &'static str,
    },
    /// `bitround`: rounded mantissas decode as they are.
    Identity,
    /// `shuffle`: bytes of each element grouped by position.
    Shuffle { element_size: usize },
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
    /// The filter a numcodecs configuration names.
    pub(crate) fn from_json(config: &Value) -> Result<Self> {
        let (id, obj) = numcodecs_id(config, "filter")?;
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
                }
            }
            "astype" => Filter::Cast {
                from: typestr(obj, id, "encode_dtype", None)?,
                to: typestr(obj, id, "decode_dtype", None)?,
                id: "astype",
            },
            "bitround" => Filter::Identity,
            "shuffle" => {
                let size = number(obj, id, "elementsize", Some(4.0))?;
                if !(size >= 0.0 && size.fract() == 0.0 && size <= 1024.0) {
                    return Err(corrupt(format!("shuffle filter elementsize {size}")));
                }
                Filter::Shuffle {
                    element_size: size as usize,
                }
            }
            other => return Err(Error::Unsupported(format!("filter \"{other}\""))),
        })
    }

    /// The bytes this filter was given, from the bytes it produced.
    pub(crate) fn decode(&self, encoded: &[u8]) -> Result<Vec<u8>> {
        match self {
            Filter::Identity => Ok(encoded.to_vec()),
            Filter::Shuffle { element_size } => Ok(unshuffle(encoded, *element_size)),
            Filter::Cast { from, to, id } => to.write(&from.read(encoded, id)?, id),
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
                let encoded = match astype.read(encoded, "fixedscaleoffset")? {
                    Values::Int(v) => v.into_iter().map(|x| x as f64).collect::<Vec<_>>(),
                    Values::Float(v) => v,
                };
                let decoded = encoded.into_iter().map(|x| x / scale + offset).collect();
                dtype.write(&Values::Float(decoded), "fixedscaleoffset")
            }
        }
    }
}

/// Undo numcodecs' byte shuffle: byte `b` of element `i` was stored at
/// `b * count + i`; bytes past the last whole element stay where they are.
fn unshuffle(encoded: &[u8], element_size: usize) -> Vec<u8> {
    if element_size <= 1 {
        return encoded.to_vec();
    }
    let count = encoded.len() / element_size;
    let mut out = encoded.to_vec();
    for i in 0..count {
        for b in 0..element_size {
            out[i * element_size + b] = encoded[b * count + i];
        }
    }
    out
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
    fn shuffle_undoes_numcodecs_layout() {
        let f = filter(json!({"id": "shuffle", "elementsize": 2}));
        // Elements [0x0102, 0x0304, 0x0506] stored low bytes first, then high bytes.
        assert_eq!(f.decode(&[2, 4, 6, 1, 3, 5]).unwrap(), vec![2, 1, 4, 3, 6, 5]);
    }

    #[test]
    fn unknown_filters_are_unsupported_by_name() {
        let e = Filter::from_json(&json!({"id": "categorize", "labels": []})).unwrap_err();
        assert!(matches!(&e, Error::Unsupported(m) if m.contains("categorize")), "{e:?}");
    }
}
