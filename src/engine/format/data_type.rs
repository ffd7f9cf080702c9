//! Zarr v3 data types and fill values.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html#data-types>.
//! In memory every element is stored little-endian; complex numbers are
//! (real, imaginary) pairs; `bool` is one byte 0/1; `r<bits>` is raw bytes;
//! `fixed_length_utf32` is UTF-32 code units padded with NULs,
//! `null_terminated_bytes` bytes padded with NULs; datetimes are `i64`
//! counts ([`crate::engine::format::time`]); `string` and `variable_length_bytes` are held
//! as described in [`crate::engine::format::vlen`].
//!
//! The extension types are those zarr-python 3 writes:
//! <https://github.com/zarr-developers/zarr-extensions/tree/main/data-types>.

use serde_json::{json, Value};

use crate::engine::error::{Error, Result};
use crate::engine::format::json::name_and_configuration;
use crate::engine::format::time::{TimeUnit, NAT};
use crate::engine::format::vlen::encode_item;

/// A core data type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `bool`, one byte 0 or 1.
    Bool,
    /// `int8`
    Int8,
    /// `int16`
    Int16,
    /// `int32`
    Int32,
    /// `int64`
    Int64,
    /// `uint8`
    UInt8,
    /// `uint16`
    UInt16,
    /// `uint32`
    UInt32,
    /// `uint64`
    UInt64,
    /// `float16`
    Float16,
    /// `float32`
    Float32,
    /// `float64`
    Float64,
    /// `complex64`: two float32.
    Complex64,
    /// `complex128`: two float64.
    Complex128,
    /// `r<bits>`: raw bits, a multiple of 8.
    Raw(usize),
    /// `string`: UTF-8 text of any length (codec `vlen-utf8`).
    String,
    /// Bytes of any length (codec `vlen-bytes`), under either of its names.
    Bytes(BytesName),
    /// `fixed_length_utf32` of this many bytes (4 a character).
    FixedUtf32(usize),
    /// `null_terminated_bytes` of this many bytes.
    FixedBytes(usize),
    /// `numpy.datetime64`
    DateTime64(TimeUnit),
    /// `numpy.timedelta64`
    TimeDelta64(TimeUnit),
}

/// The two names of variable-length bytes: zarr-python 3's
/// `variable_length_bytes` (also what a Zarr v2 `|O` with `vlen-bytes`
/// reads as) and the zarr-extensions name `bytes`; a node says the one it
/// was stored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BytesName {
    /// `variable_length_bytes`
    VariableLengthBytes,
    /// `bytes`
    Bytes,
}

impl DataType {
    /// Parse the `data_type` field of `zarr.json`.
    pub fn from_json(value: &Value) -> Result<Self> {
        if value.is_object() {
            return Self::parameterized(value);
        }
        let Some(name) = value.as_str() else {
            return Err(Error::Unsupported(format!("data_type {value}")));
        };
        Ok(match name {
            "string" => DataType::String,
            "variable_length_bytes" => DataType::Bytes(BytesName::VariableLengthBytes),
            "bytes" => DataType::Bytes(BytesName::Bytes),
            "bool" => DataType::Bool,
            "int8" => DataType::Int8,
            "int16" => DataType::Int16,
            "int32" => DataType::Int32,
            "int64" => DataType::Int64,
            "uint8" => DataType::UInt8,
            "uint16" => DataType::UInt16,
            "uint32" => DataType::UInt32,
            "uint64" => DataType::UInt64,
            "float16" => DataType::Float16,
            "float32" => DataType::Float32,
            "float64" => DataType::Float64,
            "complex64" => DataType::Complex64,
            "complex128" => DataType::Complex128,
            raw if raw.starts_with('r') => {
                let bits: usize = raw[1..]
                    .parse()
                    .ok()
                    .filter(|b| *b > 0 && b % 8 == 0 && !raw[1..].starts_with('0'))
                    .ok_or_else(|| Error::Unsupported(format!("data_type \"{raw}\"")))?;
                DataType::Raw(bits)
            }
            other => return Err(Error::Unsupported(format!("data_type \"{other}\""))),
        })
    }

    /// A data type written as `{"name": ..., "configuration": {...}}`.
    fn parameterized(value: &Value) -> Result<Self> {
        let (name, config) = name_and_configuration(value, "data_type")?;
        let field = |key: &str| config.and_then(|c| c.get(key));
        let unsupported = || Error::Unsupported(format!("data_type {value}"));
        let length = || {
            field("length_bytes")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .map(|n| n as usize)
                .ok_or_else(unsupported)
        };
        let unit = || {
            let unit = field("unit").and_then(Value::as_str).ok_or_else(unsupported)?;
            let scale = match field("scale_factor") {
                None => 1,
                Some(v) => v.as_u64().and_then(|s| u32::try_from(s).ok()).ok_or_else(unsupported)?,
            };
            TimeUnit::new(unit, scale).ok_or_else(unsupported)
        };
        Ok(match name {
            "fixed_length_utf32" if length()? % 4 == 0 => DataType::FixedUtf32(length()?),
            "null_terminated_bytes" => DataType::FixedBytes(length()?),
            "numpy.datetime64" => DataType::DateTime64(unit()?),
            "numpy.timedelta64" => DataType::TimeDelta64(unit()?),
            "string" if config.is_none_or(|c| c.is_empty()) => DataType::String,
            "variable_length_bytes" if config.is_none_or(|c| c.is_empty()) => {
                DataType::Bytes(BytesName::VariableLengthBytes)
            }
            "bytes" if config.is_none_or(|c| c.is_empty()) => DataType::Bytes(BytesName::Bytes),
            _ => return Err(unsupported()),
        })
    }

    /// The data type as `zarr.json` writes it: a name, or for types with
    /// parameters `{"name", "configuration"}`.
    pub fn to_json(&self) -> Value {
        match self {
            DataType::FixedUtf32(n) | DataType::FixedBytes(n) => {
                json!({"name": self.name(), "configuration": {"length_bytes": n}})
            }
            DataType::DateTime64(u) | DataType::TimeDelta64(u) => {
                json!({"name": self.name(), "configuration": {"unit": u.unit_name(), "scale_factor": u.scale}})
            }
            _ => json!(self.name()),
        }
    }

    /// The little-endian NumPy type string of fixed-size elements (`<u2`,
    /// `|b1`, `<U5`, `|S5`, `<M8[ns]`, `|V3` for raw bits); `None` for
    /// variable-length types.
    pub fn numpy_dtype(&self) -> Option<String> {
        Some(match self {
            DataType::Bool => "|b1".to_string(),
            DataType::Int8 => "|i1".into(),
            DataType::UInt8 => "|u1".into(),
            DataType::Int16 => "<i2".into(),
            DataType::UInt16 => "<u2".into(),
            DataType::Int32 => "<i4".into(),
            DataType::UInt32 => "<u4".into(),
            DataType::Int64 => "<i8".into(),
            DataType::UInt64 => "<u8".into(),
            DataType::Float16 => "<f2".into(),
            DataType::Float32 => "<f4".into(),
            DataType::Float64 => "<f8".into(),
            DataType::Complex64 => "<c8".into(),
            DataType::Complex128 => "<c16".into(),
            DataType::Raw(bits) => format!("|V{}", bits / 8),
            DataType::FixedUtf32(n) => format!("<U{}", n / 4),
            DataType::FixedBytes(n) => format!("|S{n}"),
            DataType::DateTime64(unit) => format!("<M8[{}]", unit.numpy()),
            DataType::TimeDelta64(unit) => format!("<m8[{}]", unit.numpy()),
            DataType::String | DataType::Bytes(_) => return None,
        })
    }

    /// The smallest and largest value of an integer type.
    pub(crate) fn integer_range(&self) -> Option<(i128, i128)> {
        Some(match self {
            DataType::Int8 => (i8::MIN.into(), i8::MAX.into()),
            DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
            DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
            DataType::Int64 => (i64::MIN.into(), i64::MAX.into()),
            DataType::UInt8 => (0, u8::MAX.into()),
            DataType::UInt16 => (0, u16::MAX.into()),
            DataType::UInt32 => (0, u32::MAX.into()),
            DataType::UInt64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// Whether elements vary in length (`string`, `variable_length_bytes`).
    pub fn is_variable(&self) -> bool {
        matches!(self, DataType::String | DataType::Bytes(_))
    }

    /// Whether elements are text or bytes, fixed or variable in length.
    pub fn is_text_or_bytes(&self) -> bool {
        matches!(
            self,
            DataType::String | DataType::Bytes(_) | DataType::FixedUtf32(_) | DataType::FixedBytes(_)
        )
    }

    /// The fill value a v2 `"fill_value": null` reads as: zero, `""`,
    /// `b""` or NaT.
    pub(crate) fn default_fill(&self) -> Vec<u8> {
        match self {
            DataType::String | DataType::Bytes(_) => encode_item(b""),
            DataType::DateTime64(_) | DataType::TimeDelta64(_) => NAT.to_le_bytes().to_vec(),
            _ => vec![0; self.size()],
        }
    }

    /// The name as written in `zarr.json`.
    pub fn name(&self) -> String {
        match self {
            DataType::Bool => "bool".into(),
            DataType::Int8 => "int8".into(),
            DataType::Int16 => "int16".into(),
            DataType::Int32 => "int32".into(),
            DataType::Int64 => "int64".into(),
            DataType::UInt8 => "uint8".into(),
            DataType::UInt16 => "uint16".into(),
            DataType::UInt32 => "uint32".into(),
            DataType::UInt64 => "uint64".into(),
            DataType::Float16 => "float16".into(),
            DataType::Float32 => "float32".into(),
            DataType::Float64 => "float64".into(),
            DataType::Complex64 => "complex64".into(),
            DataType::Complex128 => "complex128".into(),
            DataType::Raw(bits) => format!("r{bits}"),
            DataType::String => "string".into(),
            DataType::Bytes(BytesName::VariableLengthBytes) => "variable_length_bytes".into(),
            DataType::Bytes(BytesName::Bytes) => "bytes".into(),
            DataType::FixedUtf32(_) => "fixed_length_utf32".into(),
            DataType::FixedBytes(_) => "null_terminated_bytes".into(),
            DataType::DateTime64(_) => "numpy.datetime64".into(),
            DataType::TimeDelta64(_) => "numpy.timedelta64".into(),
        }
    }

    /// Bytes per element; for variable-length types, the size of the
    /// handle that stands for an element in a slab being assembled.
    pub fn size(&self) -> usize {
        match self {
            DataType::Bool | DataType::Int8 | DataType::UInt8 => 1,
            DataType::Int16 | DataType::UInt16 | DataType::Float16 => 2,
            DataType::Int32 | DataType::UInt32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::UInt64 | DataType::Float64 | DataType::Complex64 => 8,
            DataType::Complex128 => 16,
            DataType::Raw(bits) => bits / 8,
            DataType::FixedUtf32(n) | DataType::FixedBytes(n) => *n,
            DataType::String | DataType::Bytes(_) | DataType::DateTime64(_) | DataType::TimeDelta64(_) => 8,
        }
    }

    /// The size of the unit that endianness applies to (the component of a
    /// complex number); 1 where byte order does not apply.
    pub(crate) fn swap_unit(&self) -> usize {
        match self {
            DataType::Complex64 => 4,
            DataType::Complex128 => 8,
            DataType::Raw(_) | DataType::FixedBytes(_) | DataType::String | DataType::Bytes(_) => 1,
            DataType::FixedUtf32(_) => 4,
            other => other.size(),
        }
    }

    /// Parse a fill value in any JSON form the spec and real writers use,
    /// returning one element's little-endian bytes.
    pub(crate) fn fill_value_from_json(&self, value: &Value) -> Result<Vec<u8>> {
        let bad = || Error::Unsupported(format!("fill_value {value} for data_type {}", self.name()));
        let bytes = match self {
            DataType::Bool => vec![value.as_bool().ok_or_else(bad)? as u8],
            DataType::Int8 => (int_value(value, i8::MIN as i128, i8::MAX as i128).ok_or_else(bad)? as i8)
                .to_le_bytes()
                .to_vec(),
            DataType::Int16 => (int_value(value, i16::MIN as i128, i16::MAX as i128).ok_or_else(bad)? as i16)
                .to_le_bytes()
                .to_vec(),
            DataType::Int32 => (int_value(value, i32::MIN as i128, i32::MAX as i128).ok_or_else(bad)? as i32)
                .to_le_bytes()
                .to_vec(),
            DataType::Int64 => (int_value(value, i64::MIN as i128, i64::MAX as i128).ok_or_else(bad)? as i64)
                .to_le_bytes()
                .to_vec(),
            DataType::UInt8 => (int_value(value, 0, u8::MAX as i128).ok_or_else(bad)? as u8)
                .to_le_bytes()
                .to_vec(),
            DataType::UInt16 => (int_value(value, 0, u16::MAX as i128).ok_or_else(bad)? as u16)
                .to_le_bytes()
                .to_vec(),
            DataType::UInt32 => (int_value(value, 0, u32::MAX as i128).ok_or_else(bad)? as u32)
                .to_le_bytes()
                .to_vec(),
            DataType::UInt64 => (int_value(value, 0, u64::MAX as i128).ok_or_else(bad)? as u64)
                .to_le_bytes()
                .to_vec(),
            DataType::Float16 | DataType::Float32 | DataType::Float64 => {
                float_bytes(value, self.size()).ok_or_else(bad)?
            }
            DataType::Complex64 | DataType::Complex128 => {
                let parts = value.as_array().filter(|a| a.len() == 2).ok_or_else(bad)?;
                let half = self.size() / 2;
                let mut out = float_bytes(&parts[0], half).ok_or_else(bad)?;
                out.extend(float_bytes(&parts[1], half).ok_or_else(bad)?);
                out
            }
            DataType::Raw(bits) => raw_bytes(value, bits / 8).ok_or_else(bad)?,
            DataType::String => encode_item(text_value(value).ok_or_else(bad)?.as_bytes()),
            DataType::Bytes(_) => encode_item(&bytes_value(value).ok_or_else(bad)?),
            DataType::FixedUtf32(n) => {
                let units: Vec<u8> = text_value(value)
                    .ok_or_else(bad)?
                    .chars()
                    .flat_map(|c| (c as u32).to_le_bytes())
                    .collect();
                padded(units, *n).ok_or_else(bad)?
            }
            DataType::FixedBytes(n) => padded(bytes_value(value).ok_or_else(bad)?, *n).ok_or_else(bad)?,
            DataType::DateTime64(_) | DataType::TimeDelta64(_) => match value {
                Value::String(s) if s == "NaT" => NAT.to_le_bytes().to_vec(),
                _ => (int_value(value, i64::MIN as i128, i64::MAX as i128).ok_or_else(bad)? as i64)
                    .to_le_bytes()
                    .to_vec(),
            },
        };
        Ok(bytes)
    }
}

/// A text fill value: a string, or a number's text (zarr-python 3 reads a
/// v2 object array's `0` so).
fn text_value(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A bytes fill value: base64 text, or a number's text as for strings.
fn bytes_value(value: &Value) -> Option<Vec<u8>> {
    use base64::Engine;
    match value {
        Value::String(s) => base64::engine::general_purpose::STANDARD.decode(s).ok(),
        Value::Number(n) => Some(n.to_string().into_bytes()),
        // The `bytes` extension's other form: a list of byte values.
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect(),
        _ => None,
    }
}

/// `bytes` padded with NULs to `size`, if they fit.
fn padded(mut bytes: Vec<u8>, size: usize) -> Option<Vec<u8>> {
    (bytes.len() <= size).then(|| {
        bytes.resize(size, 0);
        bytes
    })
}

/// An integer fill value in `[min, max]`; integral floats are accepted.
fn int_value(value: &Value, min: i128, max: i128) -> Option<i128> {
    let n = value.as_number()?;
    let v = if let Some(i) = n.as_i64() {
        i as i128
    } else if let Some(u) = n.as_u64() {
        u as i128
    } else {
        let f = n.as_f64()?;
        if f.fract() != 0.0 || !f.is_finite() || f.abs() > 1.8e19 {
            return None;
        }
        f as i128
    };
    (min..=max).contains(&v).then_some(v)
}

/// A float of `size` bytes from a number, `"NaN"`, `"Infinity"`,
/// `"-Infinity"` or a hex string of the exact bits.
fn float_bytes(value: &Value, size: usize) -> Option<Vec<u8>> {
    let f = match value {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => match s.as_str() {
            "NaN" => f64::NAN,
            "Infinity" | "+Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            hex if hex.starts_with("0x") => {
                let digits = &hex[2..];
                if digits.len() != size * 2 {
                    return None;
                }
                let bits = u64::from_str_radix(digits, 16).ok()?;
                return Some(bits.to_le_bytes()[..size].to_vec());
            }
            _ => return None,
        },
        _ => return None,
    };
    Some(match size {
        2 => half::f16::from_f64(f).to_le_bytes().to_vec(),
        4 => (f as f32).to_le_bytes().to_vec(),
        8 => f.to_le_bytes().to_vec(),
        _ => return None,
    })
}

/// Raw fill values: an array of byte values, a hex string (`"0x..."`) or a
/// base64 string of the bytes (tensorstore's form).
fn raw_bytes(value: &Value, size: usize) -> Option<Vec<u8>> {
    use base64::Engine;
    match value {
        Value::Array(items) if items.len() == size => items
            .iter()
            .map(|v| v.as_u64().filter(|b| *b < 256).map(|b| b as u8))
            .collect(),
        Value::String(s) if s.starts_with("0x") && s.len() == 2 + size * 2 => hex::decode(&s[2..]).ok(),
        Value::String(s) if !s.starts_with("0x") => base64::engine::general_purpose::STANDARD
            .decode(s)
            .ok()
            .filter(|b| b.len() == size),
        Value::Number(_) if size == 1 => Some(vec![u8::try_from(value.as_u64()?).ok()?]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fill(dt: &str, v: Value) -> Result<Vec<u8>> {
        DataType::from_json(&json!(dt))?.fill_value_from_json(&v)
    }

    #[test]
    fn parses_every_core_type() {
        for (name, size) in [
            ("bool", 1),
            ("int8", 1),
            ("int16", 2),
            ("int32", 4),
            ("int64", 8),
            ("uint8", 1),
            ("uint16", 2),
            ("uint32", 4),
            ("uint64", 8),
            ("float16", 2),
            ("float32", 4),
            ("float64", 8),
            ("complex64", 8),
            ("complex128", 16),
            ("r24", 3),
        ] {
            let dt = DataType::from_json(&json!(name)).unwrap();
            assert_eq!(dt.size(), size, "{name}");
            assert_eq!(dt.name(), name);
        }
        for bad in ["int3", "r0", "r7", "r", "str", "r08"] {
            assert!(
                matches!(DataType::from_json(&json!(bad)), Err(Error::Unsupported(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn parses_extension_types_as_zarr_python_writes_them() {
        for (doc, expected, size) in [
            (json!("string"), DataType::String, 8),
            (
                json!("variable_length_bytes"),
                DataType::Bytes(BytesName::VariableLengthBytes),
                8,
            ),
            (json!("bytes"), DataType::Bytes(BytesName::Bytes), 8),
            (
                json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}}),
                DataType::FixedUtf32(20),
                20,
            ),
            (
                json!({"name": "null_terminated_bytes", "configuration": {"length_bytes": 5}}),
                DataType::FixedBytes(5),
                5,
            ),
        ] {
            let dt = DataType::from_json(&doc).unwrap();
            assert_eq!((dt, dt.size()), (expected, size));
            assert_eq!(dt.to_json(), doc);
        }
        let doc = json!({"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}});
        let dt = DataType::from_json(&doc).unwrap();
        assert!(matches!(dt, DataType::DateTime64(u) if u.numpy() == "ns"));
        assert_eq!(dt.to_json(), doc);
        for bad in [
            json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 6}}),
            json!({"name": "null_terminated_bytes", "configuration": {"length_bytes": 0}}),
            json!({"name": "numpy.timedelta64", "configuration": {"unit": "fortnight"}}),
            json!({"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 0}}),
            json!({"name": "struct"}),
        ] {
            assert!(matches!(DataType::from_json(&bad), Err(Error::Unsupported(_))), "{bad}");
        }
    }

    #[test]
    fn extension_fill_values() {
        let utf32 = json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}});
        let dt = DataType::from_json(&utf32).unwrap();
        assert_eq!(
            dt.fill_value_from_json(&json!("é")).unwrap(),
            [0xe9, 0, 0, 0, 0, 0, 0, 0]
        );
        assert!(dt.fill_value_from_json(&json!("abc")).is_err());
        assert_eq!(fill("string", json!("ab")).unwrap(), [2, 0, 0, 0, b'a', b'b']);
        // zarr-python 3 reads a v2 object array's fill value 0 as "0".
        assert_eq!(fill("string", json!(0)).unwrap(), [1, 0, 0, 0, b'0']);
        assert_eq!(
            fill("variable_length_bytes", json!("AP8=")).unwrap(),
            [2, 0, 0, 0, 0, 255]
        );
        let dt = DataType::from_json(&json!({"name": "numpy.datetime64", "configuration": {"unit": "D"}})).unwrap();
        assert_eq!(dt.fill_value_from_json(&json!("NaT")).unwrap(), i64::MIN.to_le_bytes());
        assert_eq!(dt.fill_value_from_json(&json!(10957)).unwrap(), 10957i64.to_le_bytes());
        assert_eq!(dt.default_fill(), i64::MIN.to_le_bytes());
        assert_eq!(DataType::String.default_fill(), [0, 0, 0, 0]);
    }

    #[test]
    fn fill_values_keep_bits() {
        assert_eq!(
            fill("float32", json!("0x7fc00001")).unwrap(),
            0x7fc00001u32.to_le_bytes()
        );
        assert_eq!(fill("float32", json!("NaN")).unwrap(), f32::NAN.to_le_bytes());
        assert_eq!(
            fill("float64", json!("-Infinity")).unwrap(),
            f64::NEG_INFINITY.to_le_bytes()
        );
        assert_eq!(fill("float64", json!(-0.0)).unwrap(), (-0.0f64).to_le_bytes());
        assert_eq!(
            fill("float16", json!(1.5)).unwrap(),
            half::f16::from_f32(1.5).to_le_bytes()
        );
        assert_eq!(fill("uint64", json!(u64::MAX)).unwrap(), u64::MAX.to_le_bytes());
        assert_eq!(fill("int64", json!(i64::MIN)).unwrap(), i64::MIN.to_le_bytes());
        assert_eq!(fill("bool", json!(true)).unwrap(), [1]);
        let c = fill("complex64", json!(["NaN", 2.0])).unwrap();
        assert_eq!(&c[..4], f32::NAN.to_le_bytes());
        assert_eq!(&c[4..], 2.0f32.to_le_bytes());
        assert_eq!(fill("r16", json!([1, 255])).unwrap(), [1, 255]);
        assert_eq!(fill("r16", json!("q80=")).unwrap(), [0xab, 0xcd]);
    }

    #[test]
    fn bad_fill_values_name_the_value() {
        for (dt, v) in [
            ("uint8", json!(256)),
            ("int8", json!(-129)),
            ("bool", json!(0)),
            ("float32", json!("0x7fc0")),
            ("complex64", json!(1.0)),
            ("r16", json!([1])),
            ("int32", json!(1.5)),
        ] {
            let err = fill(dt, v.clone()).unwrap_err().to_string();
            assert!(err.contains(&v.to_string()), "{err}");
        }
    }
}
