//! Response formats of region reads: `binary`, `npy`, `json`, `png`,
//! `csv`, `netcdf` and `geotiff`, and their negotiation from `format=` and
//! `Accept`.

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
    /// A 2-D result drawn as an 8-bit RGBA PNG.
    Png,
    /// One row per element: its labels, then its value.
    Csv,
    /// A netCDF classic file (CDF-2, or CDF-5).
    NetCdf,
    /// A one-band GeoTIFF of a 2-D geo result.
    GeoTiff,
}

impl Format {
    /// The media type.
    pub(super) fn media_type(self) -> &'static str {
        match self {
            Format::Binary => "application/octet-stream",
            Format::Npy => "application/x-npy",
            Format::Json => "application/json",
            Format::Png => "image/png",
            Format::Csv => "text/csv; charset=utf-8",
            Format::NetCdf => "application/x-netcdf",
            Format::GeoTiff => "image/tiff",
        }
    }

    /// The `format=` name, also used in ETags.
    pub(super) fn name(self) -> &'static str {
        match self {
            Format::Binary => "binary",
            Format::Npy => "npy",
            Format::Json => "json",
            Format::Png => "png",
            Format::Csv => "csv",
            Format::NetCdf => "netcdf",
            Format::GeoTiff => "geotiff",
        }
    }

    /// `format=` wins; else `Accept` with q-values; `*/*` or none is
    /// binary, or JSON for text and bytes, which binary cannot represent.
    pub(super) fn negotiate(query: Option<&str>, accept: Option<&str>, data_type: DataType) -> Result<Self, ApiError> {
        let textual = data_type.is_text_or_bytes();
        let default = if textual { Format::Json } else { Format::Binary };
        if let Some(name) = query {
            return match name {
                "binary" if textual => Err(ApiError::BadRequest(format!(
                    "format=binary cannot represent {} data: use json or npy",
                    data_type.name()
                ))),
                "binary" => Ok(Format::Binary),
                "npy" => Ok(Format::Npy),
                "json" => Ok(Format::Json),
                "png" => Ok(Format::Png),
                "csv" => Ok(Format::Csv),
                "netcdf" => Ok(Format::NetCdf),
                "geotiff" => Ok(Format::GeoTiff),
                other => Err(ApiError::BadRequest(format!(
                    "unknown format '{other}': use binary, npy, json, png, csv, netcdf or geotiff"
                ))),
            };
        }
        let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
            return Ok(default);
        };
        let mut best: Option<(f32, usize, Format)> = None;
        for (media, q) in accept_items(accept) {
            let format = match media.as_str() {
                "*/*" | "application/*" => default,
                "application/octet-stream" if !textual => Format::Binary,
                "application/x-npy" | "application/npy" => Format::Npy,
                "application/json" => Format::Json,
                "image/png" if !textual => Format::Png,
                "text/csv" => Format::Csv,
                "application/x-netcdf" | "application/netcdf" if !textual => Format::NetCdf,
                "image/tiff" if !textual => Format::GeoTiff,
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
            let offered = match textual {
                true => "application/x-npy, application/json, text/csv",
                false => {
                    "application/octet-stream, application/x-npy, application/json, image/png, text/csv, \
                     application/x-netcdf, image/tiff"
                }
            };
            ApiError::NotAcceptable(format!(
                "Accept '{accept}' matches no format of this {} array: {offered}",
                data_type.name()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates() {
        let n = |q: Option<&str>, a: Option<&str>| {
            Format::negotiate(q, a, DataType::UInt8).map_err(|e| e.status().as_u16())
        };
        assert_eq!(n(None, None), Ok(Format::Binary));
        assert_eq!(n(None, Some("*/*")), Ok(Format::Binary));
        assert_eq!(n(Some("json"), Some("application/x-npy")), Ok(Format::Json));
        assert_eq!(n(Some("xls"), None), Err(400));
        assert_eq!(n(Some("csv"), None), Ok(Format::Csv));
        assert_eq!(n(None, Some("image/tiff; application=geotiff")), Ok(Format::GeoTiff));
        assert_eq!(n(None, Some("application/x-netcdf")), Ok(Format::NetCdf));
        assert_eq!(n(None, Some("text/html")), Err(406));
        assert_eq!(
            n(None, Some("application/json;q=0.5, application/x-npy;q=0.9")),
            Ok(Format::Npy)
        );
        assert_eq!(n(None, Some("*/*;q=0.1, application/json")), Ok(Format::Json));
        assert_eq!(n(None, Some("application/json;q=0")), Err(406));
        let text = |q: Option<&str>, a: Option<&str>| {
            Format::negotiate(q, a, DataType::String).map_err(|e| e.status().as_u16())
        };
        assert_eq!(text(None, None), Ok(Format::Json));
        assert_eq!(text(None, Some("*/*")), Ok(Format::Json));
        assert_eq!(text(Some("npy"), None), Ok(Format::Npy));
        assert_eq!(text(Some("binary"), None), Err(400));
        assert_eq!(text(None, Some("application/octet-stream")), Err(406));
        assert_eq!(
            text(None, Some("application/octet-stream, application/x-npy;q=0.5")),
            Ok(Format::Npy)
        );
    }
}
