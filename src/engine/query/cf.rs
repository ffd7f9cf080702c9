//! CF conventions on stored values: time coordinates (`units: "<unit>
//! since <date>"`, `calendar`) and packing (`_FillValue`, `missing_value`,
//! `scale_factor`, `add_offset`), decoded as xarray's `decode_cf` does.
//!
//! Spec: <https://cfconventions.org/Data/cf-conventions/cf-conventions-1.11/cf-conventions.html#time-coordinate>
//! and <https://cfconventions.org/Data/cf-conventions/cf-conventions-1.11/cf-conventions.html#packed-data>.

use base64::Engine;
use serde_json::Value;

use crate::engine::error::{Error, Result};
use crate::engine::format::data_type::DataType;
use crate::engine::format::metadata::ArrayMetadata;
use crate::engine::format::time::parse_instant;
use crate::engine::format::values::real_values;

/// A CF time coordinate's encoding: value `v` is the instant
/// `epoch + v * unit` (nanoseconds since 1970-01-01 UTC).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimeEncoding {
    /// Nanoseconds per unit.
    pub unit_ns: i128,
    /// The reference instant.
    pub epoch_ns: i128,
    /// The `calendar` attribute, if any.
    pub calendar: Option<String>,
}

impl TimeEncoding {
    /// The encoding `attributes` describe, if `units` is `"<unit> since <date>"`.
    pub(crate) fn from_attributes(attributes: &Value) -> Option<Self> {
        let units = attributes.get("units")?.as_str()?;
        let (unit, since) = units.split_once(" since ")?;
        let unit_ns = match unit.trim().to_ascii_lowercase().as_str() {
            "days" | "day" | "d" => 86_400_000_000_000,
            "hours" | "hour" | "h" | "hr" | "hrs" => 3_600_000_000_000,
            "minutes" | "minute" | "min" | "mins" => 60_000_000_000,
            "seconds" | "second" | "s" | "sec" | "secs" => 1_000_000_000,
            "milliseconds" | "millisecond" | "ms" => 1_000_000,
            "microseconds" | "microsecond" | "us" => 1_000,
            _ => return None,
        };
        let epoch_ns = parse_instant(since.trim().trim_end_matches(" UTC"))?;
        let calendar = attributes.get("calendar").and_then(Value::as_str).map(str::to_string);
        Some(Self {
            unit_ns,
            epoch_ns,
            calendar,
        })
    }

    /// Fail unless the calendar is one whose instants are the proleptic
    /// Gregorian ones: absent, `standard`, `gregorian` or `proleptic_gregorian`.
    pub(crate) fn check_calendar(&self, name: &str) -> Result<()> {
        match self.calendar.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("standard" | "gregorian" | "proleptic_gregorian") => Ok(()),
            Some(_) => Err(Error::InvalidRequest(format!(
                "coordinate '{name}' uses calendar '{}': label selection supports standard, gregorian and proleptic_gregorian",
                self.calendar.as_deref().unwrap_or_default()
            ))),
        }
    }

    /// The instant of stored value `v` (`None` for NaN).
    pub(crate) fn instant(&self, v: f64) -> Option<i128> {
        v.is_finite()
            .then(|| self.epoch_ns + (v * self.unit_ns as f64).round() as i128)
    }

    /// The instant of an exact integer value.
    pub(crate) fn instant_of_int(&self, v: i128) -> i128 {
        self.epoch_ns + v * self.unit_ns
    }
}

/// CF packing of an array: which stored values are missing, and the
/// linear map of the others, into `float64`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MaskAndScale {
    missing: Vec<f64>,
    scale: f64,
    offset: f64,
}

impl MaskAndScale {
    /// From the array's attributes: `_FillValue` (base64 of its bytes where
    /// xarray wrote it so on Zarr v3) or, for a Zarr v2 array without it,
    /// the array's `fill_value`; `missing_value` (one value or a list);
    /// `scale_factor` and `add_offset`.
    pub(crate) fn new(meta: &ArrayMetadata, attributes: &Value, zarr_format: u8, v2_fill: &Value) -> Result<Self> {
        let number = |name: &str| -> Result<Option<f64>> {
            match attributes.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => attribute_number(v, meta.data_type)
                    .map(Some)
                    .ok_or_else(|| Error::InvalidRequest(format!("decode=cf: attribute {name} = {v} is not a number"))),
            }
        };
        let mut missing = Vec::new();
        match (number("_FillValue")?, zarr_format) {
            (Some(v), _) => missing.push(v),
            (None, 2) if !v2_fill.is_null() => missing.extend(attribute_number(v2_fill, meta.data_type)),
            _ => {}
        }
        match attributes.get("missing_value") {
            Some(Value::Array(items)) => {
                missing.extend(items.iter().filter_map(|v| attribute_number(v, meta.data_type)))
            }
            Some(v) if !v.is_null() => missing.extend(attribute_number(v, meta.data_type)),
            _ => {}
        }
        Ok(Self {
            missing,
            scale: number("scale_factor")?.unwrap_or(1.0),
            offset: number("add_offset")?.unwrap_or(0.0),
        })
    }

    /// Decode little-endian elements of `data_type` into `float64` ones.
    pub(crate) fn decode(&self, data_type: DataType, data: &[u8]) -> Result<bytes::Bytes> {
        let values = real_values(data_type, data)?;
        Ok(values
            .into_iter()
            .flat_map(|v| self.apply(v).to_le_bytes())
            .collect::<Vec<u8>>()
            .into())
    }

    /// One stored value, decoded.
    pub(crate) fn apply(&self, v: f64) -> f64 {
        let masked = self.missing.iter().any(|m| *m == v || (m.is_nan() && v.is_nan()));
        if masked {
            f64::NAN
        } else {
            v * self.scale + self.offset
        }
    }
}

/// An attribute's number: a JSON number, `"NaN"`/`"Infinity"`/
/// `"-Infinity"`, or base64 of little-endian bytes: an element of
/// `data_type`, or a float64/float32 (xarray writes a float32 array's
/// `_FillValue` as a float64 on Zarr v3).
pub(crate) fn attribute_number(value: &Value, data_type: DataType) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            text => {
                let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
                let as_type = match bytes.len() {
                    n if n == data_type.size() => data_type,
                    8 => DataType::Float64,
                    4 => DataType::Float32,
                    _ => return None,
                };
                real_values(as_type, &bytes).ok()?.first().copied()
            }
        },
        Value::Array(items) if items.len() == 1 => attribute_number(&items[0], data_type),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fill_value_attributes_in_every_form() {
        assert_eq!(attribute_number(&json!(-32768), DataType::Int16), Some(-32768.0));
        assert!(attribute_number(&json!("NaN"), DataType::Float32).unwrap().is_nan());
        // xarray on Zarr v3: a float64 NaN for a float32 array, in base64.
        assert!(attribute_number(&json!("AAAAAAAA+H8="), DataType::Float32)
            .unwrap()
            .is_nan());
        assert_eq!(attribute_number(&json!("AACAPw=="), DataType::Float32), Some(1.0));
        assert_eq!(attribute_number(&json!("AQ=="), DataType::Float32), None);
    }

    #[test]
    fn time_units_as_xarray_reads_them() {
        let t = TimeEncoding::from_attributes(
            &json!({"units": "days since 2020-01-01", "calendar": "proleptic_gregorian"}),
        )
        .unwrap();
        assert_eq!(t.instant_of_int(4), parse_instant("2020-01-05").unwrap());
        assert!(t.check_calendar("time").is_ok());
        let h = TimeEncoding::from_attributes(&json!({"units": "hours since 1900-1-1 00:00:00", "calendar": "noleap"}))
            .unwrap();
        assert_eq!(h.instant(1.5), Some(parse_instant("1900-01-01T01:30").unwrap()));
        let e = h.check_calendar("time").unwrap_err().to_string();
        assert!(e.contains("noleap"), "{e}");
        assert!(TimeEncoding::from_attributes(&json!({"units": "K"})).is_none());
        assert!(TimeEncoding::from_attributes(&json!({"units": "fortnights since 2000-01-01"})).is_none());
    }
}
