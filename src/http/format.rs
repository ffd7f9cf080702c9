//! Response formats of region reads: `binary`, `npy`, `json`, and their
//! negotiation from `format=` and `Accept`.

use std::fmt::Write;

use super::problem::ApiError;
use crate::engine::DataType;

/// A representation of a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// C-order little-endian elements.
    Binary,
    /// A NumPy `.npy` file (format 1.0).
    Npy,
    /// `{"shape", "data_type", "data"}`.
    Json,
}

impl Format {
    /// The media type.
    pub(super) fn media_type(self) -> &'static str {
        match self {
            Format::Binary => "application/octet-stream",
            Format::Npy => "application/x-npy",
            Format::Json => "application/json",
        }
    }

    /// The `format=` name, also used in ETags.
    pub(super) fn name(self) -> &'static str {
        match self {
            Format::Binary => "binary",
            Format::Npy => "npy",
            Format::Json => "json",
        }
    }

    /// `format=` wins; else `Accept` with q-values; `*/*` or none is binary.
    pub(super) fn negotiate(query: Option<&str>, accept: Option<&str>) -> Result<Self, ApiError> {
        if let Some(name) = query {
            return match name {
                "binary" => Ok(Format::Binary),
                "npy" => Ok(Format::Npy),
                "json" => Ok(Format::Json),
                other => Err(ApiError::BadRequest(format!(
                    "unknown format '{other}': use binary, npy or json"
                ))),
            };
        }
        let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
            return Ok(Format::Binary);
        };
        let mut best: Option<(f32, usize, Format)> = None;
        for (media, q) in accept_items(accept) {
            let format = match media.as_str() {
                "application/octet-stream" | "*/*" | "application/*" => Format::Binary,
                "application/x-npy" | "application/npy" => Format::Npy,
                "application/json" => Format::Json,
                _ => continue,
            };
            if q <= 0.0 {
                continue;
            }
            // Higher q wins; among equals, an exact media type beats a wildcard, then order.
            let specific = usize::from(!media.contains('*'));
            let rank = (q, specific);
            if best.is_none_or(|(bq, bs, _)| rank > (bq, bs)) {
                best = Some((q, specific, format));
            }
        }
        best.map(|(_, _, f)| f).ok_or_else(|| {
            ApiError::NotAcceptable(format!(
                "Accept '{accept}' matches no format of this endpoint: application/octet-stream, application/x-npy, application/json"
            ))
        })
    }
}

/// The media ranges of an `Accept` header, lower-cased, with their q-values
/// (1 when absent).
pub(super) fn accept_items(accept: &str) -> impl Iterator<Item = (String, f32)> + '_ {
    accept.split(',').map(|item| {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        (media, q)
    })
}

/// The `.npy` (format 1.0) header for an array of `shape` and `data_type`.
pub(super) fn npy_header(data_type: DataType, shape: &[u64]) -> Vec<u8> {
    let descr = match data_type {
        DataType::Bool => "|b1".to_string(),
        DataType::Int8 => "|i1".into(),
        DataType::UInt8 => "|u1".into(),
        DataType::Int16 => "<i2".into(),
        DataType::Int32 => "<i4".into(),
        DataType::Int64 => "<i8".into(),
        DataType::UInt16 => "<u2".into(),
        DataType::UInt32 => "<u4".into(),
        DataType::UInt64 => "<u8".into(),
        DataType::Float16 => "<f2".into(),
        DataType::Float32 => "<f4".into(),
        DataType::Float64 => "<f8".into(),
        DataType::Complex64 => "<c8".into(),
        DataType::Complex128 => "<c16".into(),
        DataType::Raw(bits) => format!("|V{}", bits / 8),
    };
    let shape_text = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!("({})", dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // magic (6) + version (2) + length (2) + dict + '\n' is padded to a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out
}

/// The JSON document of a region: nested lists in C order.
pub(super) fn json_body(data_type: DataType, shape: &[u64], data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() * 3 + 64);
    let shape_json = serde_json::to_string(shape).expect("shape");
    let _ = write!(
        out,
        "{{\"shape\":{shape_json},\"data_type\":\"{}\",\"data\":",
        data_type.name()
    );
    let size = data_type.size();
    let mut elements = data.chunks_exact(size);
    nested(&mut out, shape, data_type, &mut elements);
    out.push('}');
    out
}

fn nested<'a>(out: &mut String, shape: &[u64], data_type: DataType, elements: &mut impl Iterator<Item = &'a [u8]>) {
    match shape.split_first() {
        None => write_element(out, data_type, elements.next().expect("element count matches shape")),
        Some((&n, rest)) => {
            out.push('[');
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                nested(out, rest, data_type, elements);
            }
            out.push(']');
        }
    }
}

fn write_float(out: &mut String, value: f64, debug: String) {
    if value.is_nan() {
        out.push_str("\"NaN\"");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
    } else {
        out.push_str(&debug);
    }
}

fn write_element(out: &mut String, data_type: DataType, b: &[u8]) {
    macro_rules! int {
        ($t:ty) => {{
            let _ = write!(out, "{}", <$t>::from_le_bytes(b.try_into().expect("element size")));
        }};
    }
    let f32_at = |b: &[u8]| f32::from_le_bytes(b.try_into().expect("4 bytes"));
    let f64_at = |b: &[u8]| f64::from_le_bytes(b.try_into().expect("8 bytes"));
    match data_type {
        DataType::Bool => out.push_str(if b[0] != 0 { "true" } else { "false" }),
        DataType::Int8 => int!(i8),
        DataType::Int16 => int!(i16),
        DataType::Int32 => int!(i32),
        DataType::Int64 => int!(i64),
        DataType::UInt8 => int!(u8),
        DataType::UInt16 => int!(u16),
        DataType::UInt32 => int!(u32),
        DataType::UInt64 => int!(u64),
        DataType::Float16 => {
            let v = half::f16::from_le_bytes([b[0], b[1]]);
            write_float(out, v.to_f64(), format!("{:?}", v.to_f32()));
        }
        DataType::Float32 => {
            let v = f32_at(b);
            write_float(out, v as f64, format!("{v:?}"));
        }
        DataType::Float64 => {
            let v = f64_at(b);
            write_float(out, v, format!("{v:?}"));
        }
        DataType::Complex64 | DataType::Complex128 => {
            let (part, half) = match data_type {
                DataType::Complex64 => (DataType::Float32, 4),
                _ => (DataType::Float64, 8),
            };
            out.push('[');
            write_element(out, part, &b[..half]);
            out.push(',');
            write_element(out, part, &b[half..]);
            out.push(']');
        }
        DataType::Raw(_) => {
            let _ = write!(out, "{}", serde_json::to_string(b).expect("bytes"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates() {
        let n = |q: Option<&str>, a: Option<&str>| Format::negotiate(q, a).map_err(|e| e.status().as_u16());
        assert_eq!(n(None, None), Ok(Format::Binary));
        assert_eq!(n(None, Some("*/*")), Ok(Format::Binary));
        assert_eq!(n(Some("json"), Some("application/x-npy")), Ok(Format::Json));
        assert_eq!(n(Some("csv"), None), Err(400));
        assert_eq!(n(None, Some("text/html")), Err(406));
        assert_eq!(
            n(None, Some("application/json;q=0.5, application/x-npy;q=0.9")),
            Ok(Format::Npy)
        );
        assert_eq!(n(None, Some("*/*;q=0.1, application/json")), Ok(Format::Json));
        assert_eq!(n(None, Some("application/json;q=0")), Err(406));
    }

    #[test]
    fn npy_header_is_aligned() {
        for shape in [vec![], vec![3], vec![10, 20, 30]] {
            let h = npy_header(DataType::UInt16, &shape);
            assert_eq!(h.len() % 64, 0);
            assert!(h.ends_with(b"\n"));
        }
        let h = String::from_utf8_lossy(&npy_header(DataType::Complex128, &[2, 3])).to_string();
        assert!(h.contains("'descr': '<c16'") && h.contains("'shape': (2, 3)"), "{h}");
    }

    #[test]
    fn json_values() {
        let data: Vec<u8> = [1.5f64, f64::NAN, f64::NEG_INFINITY, -0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            json_body(DataType::Float64, &[2, 2], &data),
            r#"{"shape":[2,2],"data_type":"float64","data":[[1.5,"NaN"],["-Infinity",-0.0]]}"#
        );
        assert_eq!(
            json_body(DataType::UInt64, &[], &u64::MAX.to_le_bytes()),
            r#"{"shape":[],"data_type":"uint64","data":18446744073709551615}"#
        );
        assert_eq!(
            json_body(DataType::Bool, &[2], &[1, 0]),
            r#"{"shape":[2],"data_type":"bool","data":[true,false]}"#
        );
        assert_eq!(
            json_body(DataType::Int8, &[0, 3], &[]),
            r#"{"shape":[0,3],"data_type":"int8","data":[]}"#
        );
    }
}
