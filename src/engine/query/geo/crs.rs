//! The coordinate reference system of a geo variable (contract 3.2).
//!
//! Coordinates in degrees are CRS84. A projected CRS comes, in this order,
//! from the CF `grid_mapping` variable's `crs_wkt` or `spatial_ref` (the EPSG
//! code the WKT ends with) or `epsg_code`; from its `grid_mapping_name` and
//! CF parameters (`lambert_conformal_conic`, `polar_stereographic`,
//! `transverse_mercator`; `latitude_longitude` is CRS84); else from GeoZarr's
//! `proj:code` on the array or its group. The projection itself is
//! `proj4rs`'s: this module only turns CF's parameter names into a PROJ
//! string and an EPSG code into its definition.

use std::fmt;
use std::sync::Arc;

use proj4rs::proj::Proj;
use proj4rs::transform::transform;
use serde_json::Value;

use crate::engine::error::{Error, Result};

/// A geo variable's CRS.
#[derive(Debug, Clone, PartialEq)]
pub enum Crs {
    /// Longitude and latitude in degrees.
    Crs84,
    /// A projected CRS: x and y in its units.
    Projected(Arc<Projection>),
}

/// A projected CRS and the way to and from longitude/latitude (WGS 84).
pub struct Projection {
    /// What it was made from: `EPSG:32633`, or a PROJ string.
    pub name: String,
    proj: Proj,
    lonlat: Proj,
    /// Coordinate units per metre of the projection (1, or 0.001 for km).
    scale: f64,
}

impl PartialEq for Projection {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.scale == other.scale
    }
}

impl fmt::Debug for Projection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Projection({})", self.name)
    }
}

impl Projection {
    fn new(name: String, proj: std::result::Result<Proj, proj4rs::errors::Error>, scale: f64) -> Result<Self> {
        let invalid = |e: proj4rs::errors::Error| Error::InvalidRequest(format!("CRS {name}: {e}"));
        let proj = proj.map_err(invalid)?;
        let lonlat = Proj::from_proj_string("+proj=longlat +datum=WGS84 +no_defs").map_err(invalid)?;
        Ok(Self {
            name,
            proj,
            lonlat,
            scale,
        })
    }

    /// Whether the CRS is geographic (degrees), so CRS84 serves it.
    fn is_geographic(&self) -> bool {
        self.proj.is_latlong()
    }

    /// Coordinate units in a metre.
    pub fn units_per_metre(&self) -> f64 {
        self.scale / self.proj.to_meter()
    }

    /// The projected coordinates of (`lon`, `lat`) in degrees; `None` where
    /// the projection is undefined.
    pub fn forward(&self, lon: f64, lat: f64) -> Option<(f64, f64)> {
        let mut p = (lon.to_radians(), lat.to_radians());
        transform(&self.lonlat, &self.proj, &mut p).ok()?;
        let (x, y) = (p.0 * self.scale, p.1 * self.scale);
        (x.is_finite() && y.is_finite()).then_some((x, y))
    }

    /// Longitude and latitude in degrees of projected (`x`, `y`).
    pub fn inverse(&self, x: f64, y: f64) -> Option<(f64, f64)> {
        let mut p = (x / self.scale, y / self.scale);
        transform(&self.proj, &self.lonlat, &mut p).ok()?;
        let (lon, lat) = (p.0.to_degrees(), p.1.to_degrees());
        (lon.is_finite() && lat.is_finite()).then_some((lon, lat))
    }
}

/// Where a variable's CRS may be written.
#[derive(Debug, Clone, Copy, Default)]
pub struct CrsSources<'a> {
    /// The `grid_mapping` variable's name and attributes, if it names one.
    pub grid_mapping: Option<(&'a str, Option<&'a Value>)>,
    /// GeoZarr `proj:code` of the array, else of its group.
    pub proj_code: Option<&'a str>,
    /// The units of the X coordinate (`m`, `km`...).
    pub x_units: Option<&'a str>,
}

impl Crs {
    /// The projected CRS the sources name, or `None` when they name none
    /// (then the coordinates must be in degrees). A CRS named but not
    /// understood is an error saying why.
    pub fn from_sources(sources: &CrsSources) -> Result<Option<Crs>> {
        let scale = match sources.x_units.map(str::trim) {
            Some("km" | "kilometre" | "kilometer" | "kilometres" | "kilometers") => 0.001,
            _ => 1.0,
        };
        let projection = match (sources.grid_mapping, sources.proj_code) {
            (Some((name, attributes)), _) => {
                let attributes = attributes.ok_or_else(|| {
                    Error::InvalidRequest(format!("its grid_mapping names '{name}', which is not an array here"))
                })?;
                from_grid_mapping(name, attributes, scale)?
            }
            (None, Some(code)) => {
                let epsg = epsg_code(code).ok_or_else(|| {
                    Error::InvalidRequest(format!("proj:code '{code}' is not an EPSG code (EPSG:NNNN)"))
                })?;
                from_epsg(epsg, scale)?
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(match projection.is_geographic() {
            true => Crs::Crs84,
            false => Crs::Projected(Arc::new(projection)),
        }))
    }
}

fn from_epsg(code: u16, scale: f64) -> Result<Projection> {
    match Proj::from_epsg_code(code) {
        Err(proj4rs::errors::Error::ProjectionNotFound) => Err(Error::InvalidRequest(format!(
            "EPSG:{code} is not a CRS this server knows"
        ))),
        proj => Projection::new(format!("EPSG:{code}"), proj, scale),
    }
}

fn from_grid_mapping(name: &str, attrs: &Value, scale: f64) -> Result<Projection> {
    let text = |key: &str| attrs.get(key).and_then(Value::as_str);
    let wkt_code = ["crs_wkt", "spatial_ref"]
        .iter()
        .find_map(|k| text(k).and_then(wkt_epsg));
    if let Some(code) = wkt_code.or_else(|| text("epsg_code").and_then(epsg_code)) {
        return from_epsg(code, scale);
    }
    let mapping = text("grid_mapping_name").unwrap_or("");
    let definition = cf_proj_string(mapping, attrs).ok_or_else(|| {
        Error::InvalidRequest(format!(
            "its grid_mapping '{name}' ({}) is not one this server projects: it needs an EPSG code in \
             crs_wkt/spatial_ref, or grid_mapping_name lambert_conformal_conic, polar_stereographic, \
             transverse_mercator or latitude_longitude",
            if mapping.is_empty() {
                "no grid_mapping_name"
            } else {
                mapping
            }
        ))
    })?;
    Projection::new(definition.clone(), Proj::from_proj_string(&definition), scale)
}

/// `EPSG:NNNN` (any case, also a URN or OGC URL ending in the code).
fn epsg_code(text: &str) -> Option<u16> {
    let t = text.trim();
    if !t.to_ascii_uppercase().contains("EPSG") {
        return None;
    }
    let start = t.rfind(|c: char| !c.is_ascii_digit()).map_or(0, |i| i + 1);
    t[start..].parse().ok()
}

/// The EPSG code a WKT (1 or 2) gives its CRS: its last `AUTHORITY` or
/// `ID`, which is the outermost element's.
fn wkt_epsg(wkt: &str) -> Option<u16> {
    let upper = wkt.to_ascii_uppercase();
    let at = ["AUTHORITY[\"EPSG\"", "ID[\"EPSG\""]
        .iter()
        .filter_map(|m| upper.rfind(m).map(|i| i + m.len()))
        .max()?;
    let rest = wkt[at..].trim_start_matches([',', ' ', '"']);
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    // Only the CRS's own id, which closes the WKT.
    let closes = rest[end..]
        .trim_start_matches(['"', ']', ' ', '\n', '\r', '\t'])
        .is_empty();
    closes.then(|| rest[..end].parse().ok()).flatten()
}

/// A PROJ string for a CF grid mapping and its parameters.
fn cf_proj_string(mapping: &str, attrs: &Value) -> Option<String> {
    let num = |key: &str| -> Option<f64> {
        match attrs.get(key)? {
            Value::Array(a) => a.first()?.as_f64(),
            v => v.as_f64(),
        }
    };
    let pair = |key: &str| -> Option<(f64, Option<f64>)> {
        match attrs.get(key)? {
            Value::Array(a) => Some((a.first()?.as_f64()?, a.get(1).and_then(Value::as_f64))),
            v => Some((v.as_f64()?, None)),
        }
    };
    let or0 = |key: &str| num(key).unwrap_or(0.0);
    let offsets = format!("+x_0={} +y_0={}", or0("false_easting"), or0("false_northing"));
    let body = match mapping {
        "latitude_longitude" => "+proj=longlat".to_string(),
        "lambert_conformal_conic" => {
            let (lat_1, lat_2) = pair("standard_parallel")?;
            format!(
                "+proj=lcc +lat_1={lat_1} +lat_2={} +lat_0={} +lon_0={} {offsets}",
                lat_2.unwrap_or(lat_1),
                num("latitude_of_projection_origin").unwrap_or(lat_1),
                or0("longitude_of_central_meridian"),
            )
        }
        "polar_stereographic" => {
            let lat_0 = num("latitude_of_projection_origin")?;
            let lon_0 = num("straight_vertical_longitude_from_pole")
                .or_else(|| num("longitude_of_projection_origin"))
                .unwrap_or(0.0);
            let scale = match (num("standard_parallel"), num("scale_factor_at_projection_origin")) {
                (Some(lat_ts), _) => format!("+lat_ts={lat_ts}"),
                (None, Some(k)) => format!("+k_0={k}"),
                (None, None) => "+k_0=1".into(),
            };
            format!("+proj=stere +lat_0={lat_0} +lon_0={lon_0} {scale} {offsets}")
        }
        "transverse_mercator" => format!(
            "+proj=tmerc +lat_0={} +lon_0={} +k_0={} {offsets}",
            or0("latitude_of_projection_origin"),
            or0("longitude_of_central_meridian"),
            num("scale_factor_at_central_meridian").unwrap_or(1.0),
        ),
        _ => return None,
    };
    Some(format!("{body} {} +units=m +no_defs", ellipsoid(attrs)))
}

/// The figure of the Earth from CF's parameters (WGS 84 when unsaid).
fn ellipsoid(attrs: &Value) -> String {
    let num = |key: &str| attrs.get(key).and_then(Value::as_f64);
    match (
        num("earth_radius"),
        num("semi_major_axis"),
        num("inverse_flattening"),
        num("semi_minor_axis"),
    ) {
        (Some(r), ..) => format!("+R={r}"),
        (None, Some(a), Some(rf), _) if rf > 0.0 => format!("+a={a} +rf={rf}"),
        (None, Some(a), _, Some(b)) => format!("+a={a} +b={b}"),
        (None, Some(a), ..) => format!("+R={a}"),
        _ => "+datum=WGS84".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn projected(sources: CrsSources) -> Arc<Projection> {
        match Crs::from_sources(&sources).unwrap() {
            Some(Crs::Projected(p)) => p,
            other => panic!("not projected: {other:?}"),
        }
    }

    #[test]
    fn epsg_codes_from_wkt_attributes_and_proj_code() {
        let wkt1 = r#"PROJCS["WGS 84 / UTM zone 33N",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],AUTHORITY["EPSG","4326"]],PROJECTION["Transverse_Mercator"],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AUTHORITY["EPSG","32633"]]"#;
        assert_eq!(wkt_epsg(wkt1), Some(32633));
        let wkt2 = r#"PROJCRS["WGS 84 / UTM zone 33N",BASEGEOGCRS["WGS 84",ID["EPSG",4326]],USAGE[SCOPE["x"]],ID["EPSG",32633]]"#;
        assert_eq!(wkt_epsg(wkt2), Some(32633));
        // A WKT whose CRS has no id of its own: a nested id is not it.
        assert_eq!(
            wkt_epsg(r#"PROJCS["x",GEOGCS["WGS 84",AUTHORITY["EPSG","4326"]],PARAMETER["k",1]]"#),
            None
        );
        assert_eq!(epsg_code("EPSG:3413"), Some(3413));
        assert_eq!(epsg_code("urn:ogc:def:crs:EPSG::32633"), Some(32633));
        assert_eq!(epsg_code("ESRI:102003"), None);
        let utm = projected(CrsSources {
            grid_mapping: Some(("crs", Some(&json!({"crs_wkt": wkt1})))),
            ..Default::default()
        });
        assert_eq!(utm.name, "EPSG:32633");
        // UTM 33N: 15°E on the equator is x = 500 km.
        let (x, y) = utm.forward(15.0, 0.0).unwrap();
        assert!((x - 500_000.0).abs() < 1e-6 && y.abs() < 1e-6, "{x} {y}");
        let code = projected(CrsSources {
            proj_code: Some("EPSG:32633"),
            x_units: Some("km"),
            ..Default::default()
        });
        assert!((code.forward(15.0, 0.0).unwrap().0 - 500.0).abs() < 1e-9);
        let geographic = Crs::from_sources(&CrsSources {
            proj_code: Some("EPSG:4326"),
            ..Default::default()
        });
        assert_eq!(geographic.unwrap(), Some(Crs::Crs84));
        assert_eq!(Crs::from_sources(&CrsSources::default()).unwrap(), None);
    }

    #[test]
    fn cf_grid_mappings_project_and_invert() {
        // NSIDC's polar stereographic north (EPSG:3413's parameters).
        let stere = projected(CrsSources {
            grid_mapping: Some((
                "crs",
                Some(&json!({
                    "grid_mapping_name": "polar_stereographic",
                    "latitude_of_projection_origin": 90.0,
                    "straight_vertical_longitude_from_pole": -45.0,
                    "standard_parallel": 70.0,
                    "false_easting": 0.0, "false_northing": 0.0,
                    "semi_major_axis": 6378137.0, "inverse_flattening": 298.257223563
                })),
            )),
            ..Default::default()
        });
        let epsg = projected(CrsSources {
            proj_code: Some("EPSG:3413"),
            ..Default::default()
        });
        for (lon, lat) in [(-45.0, 60.0), (0.0, 75.0), (120.0, 85.0)] {
            let (a, b) = (stere.forward(lon, lat).unwrap(), epsg.forward(lon, lat).unwrap());
            assert!((a.0 - b.0).abs() < 1e-3 && (a.1 - b.1).abs() < 1e-3, "{a:?} {b:?}");
            let back = stere.inverse(a.0, a.1).unwrap();
            assert!((back.0 - lon).abs() < 1e-9 && (back.1 - lat).abs() < 1e-9, "{back:?}");
        }
        // On the pole's meridian y is negative (south of the pole).
        assert!(stere.forward(-45.0, 60.0).unwrap().1 < 0.0);
        let lcc = projected(CrsSources {
            grid_mapping: Some((
                "lambert",
                Some(&json!({
                    "grid_mapping_name": "lambert_conformal_conic",
                    "standard_parallel": [33.0, 45.0],
                    "longitude_of_central_meridian": -97.0,
                    "latitude_of_projection_origin": 40.0
                })),
            )),
            ..Default::default()
        });
        let (x, y) = lcc.forward(-97.0, 40.0).unwrap();
        assert!(x.abs() < 1e-6 && y.abs() < 1e-6, "{x} {y}");
        assert!(lcc.forward(-90.0, 40.0).unwrap().0 > 500_000.0);
        let err = Crs::from_sources(&CrsSources {
            grid_mapping: Some(("crs", Some(&json!({"grid_mapping_name": "rotated_latitude_longitude"})))),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("rotated_latitude_longitude"), "{err}");
        let missing = Crs::from_sources(&CrsSources {
            grid_mapping: Some(("nowhere", None)),
            ..Default::default()
        })
        .unwrap_err();
        assert!(missing.to_string().contains("nowhere"), "{missing}");
    }
}
