//! One element of a fixed-size data type as text, written in one place
//! for every text format, in the form each wants ([`Style`]).

use crate::engine::{DataType, NAT};

/// How a text format writes what is not a plain number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// JSON: NaN and infinities as the strings `"NaN"`, `"Infinity"` and
    /// `"-Infinity"`; instants quoted ISO 8601; NaT `null`; complex numbers
    /// `[re, im]`; raw elements a list of their bytes.
    Json,
    /// CSV: NaN and NaT empty cells; infinities `inf` and `-inf`; instants
    /// ISO 8601 as they are; complex and raw elements their JSON text,
    /// quoted when they must be.
    Csv,
}

/// Where text goes: a `String` or bytes.
pub(crate) trait Out {
    fn put(&mut self, text: &str);
}

impl Out for String {
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }
}

impl Out for Vec<u8> {
    fn put(&mut self, text: &str) {
        self.extend_from_slice(text.as_bytes());
    }
}

/// One fixed-size element `b` of `data_type` (not text or bytes, which are
/// written from their items).
pub(crate) fn write_element(out: &mut impl Out, data_type: DataType, b: &[u8], style: Style) {
    macro_rules! int {
        ($t:ty) => {
            out.put(itoa::Buffer::new().format(<$t>::from_le_bytes(b.try_into().expect("element size"))))
        };
    }
    let i64_at = |b: &[u8]| i64::from_le_bytes(b.try_into().expect("8 bytes"));
    match data_type {
        DataType::Bool => out.put(if b[0] != 0 { "true" } else { "false" }),
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
            write_float(out, v.to_f64(), v.to_f32(), style);
        }
        DataType::Float32 => {
            let v = f32::from_le_bytes(b.try_into().expect("4 bytes"));
            write_float(out, f64::from(v), v, style);
        }
        DataType::Float64 => {
            let v = f64::from_le_bytes(b.try_into().expect("8 bytes"));
            write_float(out, v, v, style);
        }
        DataType::DateTime64(unit) => match (unit.format_datetime(i64_at(b)), style) {
            (Some(text), Style::Json) => {
                out.put("\"");
                out.put(&text);
                out.put("\"");
            }
            (Some(text), Style::Csv) => out.put(&text),
            (None, Style::Json) => out.put("null"),
            (None, Style::Csv) => {}
        },
        DataType::TimeDelta64(_) => match (i64_at(b), style) {
            (NAT, Style::Json) => out.put("null"),
            (NAT, Style::Csv) => {}
            (count, _) => out.put(itoa::Buffer::new().format(count)),
        },
        DataType::Complex64 | DataType::Complex128 | DataType::Raw(_) if style == Style::Csv => {
            let mut json = String::new();
            write_element(&mut json, data_type, b, Style::Json);
            out.put(&csv_cell(&json));
        }
        DataType::Complex64 | DataType::Complex128 => {
            let (part, half) = match data_type {
                DataType::Complex64 => (DataType::Float32, 4),
                _ => (DataType::Float64, 8),
            };
            out.put("[");
            write_element(out, part, &b[..half], style);
            out.put(",");
            write_element(out, part, &b[half..], style);
            out.put("]");
        }
        DataType::Raw(_) => out.put(&serde_json::to_string(b).expect("bytes")),
        DataType::String | DataType::Bytes(_) | DataType::FixedUtf32(_) | DataType::FixedBytes(_) => {
            unreachable!("text and bytes are written from their items")
        }
    }
}

/// A float: finite values in their shortest round-trip form (ryu, as
/// serde_json writes them; `finite` is the value in its own width), the
/// rest as `style` says.
pub(crate) fn write_float<F: ryu::Float>(out: &mut impl Out, value: f64, finite: F, style: Style) {
    match (style, value) {
        (_, v) if v.is_finite() => out.put(ryu::Buffer::new().format_finite(finite)),
        (Style::Json, v) if v.is_nan() => out.put("\"NaN\""),
        (Style::Json, v) if v > 0.0 => out.put("\"Infinity\""),
        (Style::Json, _) => out.put("\"-Infinity\""),
        (Style::Csv, v) if v.is_nan() => {}
        (Style::Csv, v) if v > 0.0 => out.put("inf"),
        (Style::Csv, _) => out.put("-inf"),
    }
}

/// A CSV cell's text, quoted (quotes doubled) when it holds a comma, a
/// quote or a line break, or starts or ends with a space.
pub(crate) fn csv_cell(text: &str) -> std::borrow::Cow<'_, str> {
    let needs = text.contains([',', '"', '\n', '\r']) || text.starts_with(' ') || text.ends_with(' ');
    match needs {
        true => std::borrow::Cow::Owned(format!("\"{}\"", text.replace('"', "\"\""))),
        false => std::borrow::Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(data_type: DataType, b: &[u8], style: Style) -> String {
        let mut out = String::new();
        write_element(&mut out, data_type, b, style);
        out
    }

    #[test]
    fn each_style_writes_what_is_not_a_plain_number_its_way() {
        let f = |v: f64| v.to_le_bytes();
        for (v, json, csv) in [
            (1.5, "1.5", "1.5"),
            (f64::NAN, "\"NaN\"", ""),
            (f64::INFINITY, "\"Infinity\"", "inf"),
            (f64::NEG_INFINITY, "\"-Infinity\"", "-inf"),
            (1e300, "1e300", "1e300"),
        ] {
            assert_eq!(text(DataType::Float64, &f(v), Style::Json), json);
            assert_eq!(text(DataType::Float64, &f(v), Style::Csv), csv);
        }
        assert_eq!(text(DataType::Float32, &0.1f32.to_le_bytes(), Style::Json), "0.1");
        let unit = crate::engine::TimeUnit::parse("s").unwrap();
        let instant = 86_400i64.to_le_bytes();
        assert_eq!(
            text(DataType::DateTime64(unit), &instant, Style::Json),
            "\"1970-01-02T00:00:00\""
        );
        assert_eq!(
            text(DataType::DateTime64(unit), &instant, Style::Csv),
            "1970-01-02T00:00:00"
        );
        assert_eq!(
            text(DataType::DateTime64(unit), &NAT.to_le_bytes(), Style::Json),
            "null"
        );
        assert_eq!(text(DataType::DateTime64(unit), &NAT.to_le_bytes(), Style::Csv), "");
        let complex = [1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat();
        assert_eq!(text(DataType::Complex64, &complex, Style::Json), "[1.0,-2.5]");
        assert_eq!(text(DataType::Complex64, &complex, Style::Csv), "\"[1.0,-2.5]\"");
        assert_eq!(text(DataType::Int16, &(-7i16).to_le_bytes(), Style::Csv), "-7");
        assert_eq!(text(DataType::Bool, &[1], Style::Json), "true");
    }
}
