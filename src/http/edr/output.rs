//! What an EDR query read, written as CoverageJSON (typed structs, as the
//! CoverageJSON specification names its members), GeoJSON, CSV or NetCDF.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{json, Value};

use super::query::{Extract, Shape};
use super::{coverage_parameter, crs_uri, text_attribute, Collection};
use crate::encode::netcdf::{Attribute, NcType, NetCdf, Variable};
use crate::encode::Encoder;
use crate::engine::geo::Crs;
use crate::http::conditional::{if_none_match, strong_etag};
use crate::http::ApiError;

/// An output format (`f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    CoverageJson,
    GeoJson,
    Csv,
    NetCdf,
}

impl Format {
    /// The format `f` names (CoverageJSON without it); NetCDF for area and cube only.
    pub(super) fn named(f: Option<&str>, query: &str) -> Result<Self, ApiError> {
        let format = match f.map(|f| f.trim().to_ascii_lowercase()).as_deref() {
            None | Some("coveragejson" | "covjson" | "json") => Format::CoverageJson,
            Some("geojson") => Format::GeoJson,
            Some("csv") => Format::Csv,
            Some("netcdf" | "nc") => Format::NetCdf,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "f '{other}': use CoverageJSON, GeoJSON, CSV or NetCDF"
                )))
            }
        };
        if format == Format::NetCdf && !matches!(query, "area" | "cube") {
            return Err(ApiError::BadRequest(format!(
                "f=NetCDF answers area and cube queries, not {query}"
            )));
        }
        Ok(format)
    }

    fn media_type(self) -> &'static str {
        match self {
            Format::CoverageJson => "application/prs.coverage+json",
            Format::GeoJson => "application/geo+json",
            Format::Csv => "text/csv; charset=utf-8",
            Format::NetCdf => "application/x-netcdf",
        }
    }
}

/// The response: the body in `format`, with an ETag from the keys read.
pub(super) fn respond(
    format: Format,
    query: &str,
    extract: Extract,
    headers: &HeaderMap,
    ds: &str,
    collection: &str,
) -> Result<Response, ApiError> {
    let uri_key = format!("{ds}|{collection}|{query}|{format:?}");
    let mut parts: Vec<&[u8]> = vec![uri_key.as_bytes()];
    let body_key = format!("{:?}|{:?}", extract.times, extract.levels);
    parts.push(body_key.as_bytes());
    for (key, version) in &extract.versions {
        parts.push(key.as_bytes());
        parts.push(version.as_deref().unwrap_or("-").as_bytes());
    }
    let shape_key = shape_key(&extract.shape);
    parts.push(shape_key.as_bytes());
    let etag = strong_etag(&parts);
    let builder = Response::builder().header(header::ETAG, &etag);
    if if_none_match(headers, &etag) {
        return Ok(builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .expect("valid response"));
    }
    let body = match format {
        Format::CoverageJson => Bytes::from(serde_json::to_vec(&coverage_json(&extract)).expect("JSON")),
        Format::GeoJson => Bytes::from(serde_json::to_vec(&geo_json(&extract)).expect("JSON")),
        Format::Csv => Bytes::from(csv(&extract)),
        Format::NetCdf => netcdf(&extract)?,
    };
    Ok(builder
        .header(header::CONTENT_TYPE, HeaderValue::from_static(format.media_type()))
        .body(Body::from(body))
        .expect("valid response"))
}

/// What tells apart the places of two answers of the same keys read.
fn shape_key(shape: &Shape) -> String {
    match shape {
        Shape::Points { points, .. } => format!("points {points:?}"),
        Shape::Grid { window, .. } => format!("grid {:?} {:?} {:?}", window.cols, window.rows, window.inside),
        Shape::Trajectory { steps, .. } => steps.iter().fold(String::from("trajectory"), |mut s, st| {
            let _ = write!(s, " {} {} {:?} {:?}", st.x, st.y, st.t, st.z);
            s
        }),
    }
}

// --- CoverageJSON ----------------------------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Coverage {
    #[serde(rename = "type")]
    kind: &'static str,
    domain: Domain,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<BTreeMap<String, Value>>,
    ranges: BTreeMap<String, NdArray>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CoverageCollection {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    domain_type: Option<&'static str>,
    parameters: BTreeMap<String, Value>,
    referencing: Vec<Referencing>,
    coverages: Vec<Coverage>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Domain {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    domain_type: Option<&'static str>,
    axes: BTreeMap<String, Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    referencing: Vec<Referencing>,
}

#[derive(Serialize, Clone)]
struct Referencing {
    coordinates: Vec<&'static str>,
    system: Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NdArray {
    #[serde(rename = "type")]
    kind: &'static str,
    data_type: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    axis_names: Vec<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    shape: Vec<usize>,
    values: Vec<Option<f64>>,
}

fn nd_array(axis_names: Vec<&'static str>, shape: Vec<usize>, values: &[f64]) -> NdArray {
    NdArray {
        kind: "NdArray",
        data_type: "float",
        axis_names,
        shape,
        values: values.iter().map(|v| v.is_finite().then_some(*v)).collect(),
    }
}

fn values_axis(values: Vec<Value>) -> Value {
    json!({ "values": values })
}

/// The referencing of x/y in `crs`, and of t and z when present.
fn referencing(crs: &Crs, times: bool, levels: bool) -> Vec<Referencing> {
    let mut out = vec![Referencing {
        coordinates: vec!["x", "y"],
        system: match crs {
            Crs::Crs84 => json!({"type": "GeographicCRS", "id": super::CRS84}),
            Crs::Projected(_) => json!({"type": "ProjectedCRS", "id": crs_uri(crs)}),
        },
    }];
    if times {
        out.push(Referencing {
            coordinates: vec!["t"],
            system: json!({"type": "TemporalRS", "calendar": "Gregorian"}),
        });
    }
    if levels {
        out.push(Referencing {
            coordinates: vec!["z"],
            system: json!({"type": "VerticalCRS", "cs": {"csAxes": [{"name": {"en": "level"}, "direction": "up"}]}}),
        });
    }
    out
}

fn parameters(extract: &Extract) -> BTreeMap<String, Value> {
    extract
        .vars
        .iter()
        .map(|v| (Collection::name(v).to_string(), coverage_parameter(v)))
        .collect()
}

fn coverage_json(extract: &Extract) -> Value {
    let (nt, nz) = (
        extract.times.as_ref().map_or(0, Vec::len),
        extract.levels.as_ref().map_or(0, Vec::len),
    );
    let t_axis = || {
        extract
            .times
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(Value::String)
            .collect::<Vec<_>>()
    };
    let z_axis = || {
        extract
            .levels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(Value::from)
            .collect::<Vec<_>>()
    };
    let names = || extract.vars.iter().map(|v| Collection::name(v).to_string());
    match &extract.shape {
        Shape::Points { points, values } => {
            // A point's values: [t][z].
            let steps = nt.max(1) * nz.max(1);
            let (domain_type, axis_names, shape): (Option<&'static str>, Vec<&'static str>, Vec<usize>) =
                match (nt > 1, nz > 1) {
                    (false, false) => (Some("Point"), vec![], vec![]),
                    (true, false) => (Some("PointSeries"), vec!["t"], vec![nt]),
                    (false, true) => (Some("VerticalProfile"), vec!["z"], vec![nz]),
                    (true, true) => (None, vec!["t", "z"], vec![nt, nz]),
                };
            let coverages: Vec<Coverage> = points
                .iter()
                .enumerate()
                .map(|(p, &(x, y))| {
                    let mut axes = BTreeMap::new();
                    axes.insert("x".into(), values_axis(vec![x.into()]));
                    axes.insert("y".into(), values_axis(vec![y.into()]));
                    if nt > 0 {
                        axes.insert("t".into(), values_axis(t_axis()));
                    }
                    if nz > 0 {
                        axes.insert("z".into(), values_axis(z_axis()));
                    }
                    let ranges = names()
                        .zip(values)
                        .map(|(name, v)| {
                            let mine = &v[p * steps..(p + 1) * steps];
                            (name, nd_array(axis_names.clone(), shape.clone(), mine))
                        })
                        .collect();
                    Coverage {
                        kind: "Coverage",
                        domain: Domain {
                            kind: "Domain",
                            domain_type,
                            axes,
                            referencing: referencing(&Crs::Crs84, nt > 0, nz > 0),
                        },
                        parameters: None,
                        ranges,
                    }
                })
                .collect();
            match coverages.len() {
                1 => {
                    let mut one = coverages.into_iter().next().expect("one coverage");
                    one.parameters = Some(parameters(extract));
                    serde_json::to_value(one).expect("JSON")
                }
                _ => serde_json::to_value(CoverageCollection {
                    kind: "CoverageCollection",
                    domain_type,
                    parameters: parameters(extract),
                    referencing: referencing(&Crs::Crs84, nt > 0, nz > 0),
                    coverages,
                })
                .expect("JSON"),
            }
        }
        Shape::Grid {
            xs, ys, values, grid, ..
        } => {
            let mut axes = BTreeMap::new();
            // Longitudes as −180..180, as clients subset them.
            let wrap = |x: f64| match grid.crs {
                Crs::Crs84 => (x + 180.0).rem_euclid(360.0) - 180.0,
                Crs::Projected(_) => x,
            };
            axes.insert("x".into(), values_axis(xs.iter().map(|&v| wrap(v).into()).collect()));
            axes.insert("y".into(), values_axis(ys.iter().map(|&v| v.into()).collect()));
            let (mut axis_names, mut shape) = (Vec::new(), Vec::new());
            if nt > 0 {
                axes.insert("t".into(), values_axis(t_axis()));
                axis_names.push("t");
                shape.push(nt);
            }
            if nz > 0 {
                axes.insert("z".into(), values_axis(z_axis()));
                axis_names.push("z");
                shape.push(nz);
            }
            axis_names.extend(["y", "x"]);
            shape.extend([ys.len(), xs.len()]);
            let ranges = names()
                .zip(values)
                .map(|(name, v)| (name, nd_array(axis_names.clone(), shape.clone(), v)))
                .collect();
            serde_json::to_value(Coverage {
                kind: "Coverage",
                domain: Domain {
                    kind: "Domain",
                    domain_type: Some("Grid"),
                    axes,
                    referencing: referencing(&grid.crs, nt > 0, nz > 0),
                },
                parameters: Some(parameters(extract)),
                ranges,
            })
            .expect("JSON")
        }
        Shape::Trajectory { steps, values } => {
            let times = extract.times.clone().unwrap_or_default();
            let levels = extract.levels.clone().unwrap_or_default();
            let mut coordinates = Vec::new();
            if nt > 0 {
                coordinates.push("t");
            }
            coordinates.extend(["x", "y"]);
            if nz > 0 {
                coordinates.push("z");
            }
            let tuples: Vec<Value> = steps
                .iter()
                .map(|s| {
                    let mut tuple = Vec::new();
                    if nt > 0 {
                        tuple.push(s.t.map_or(Value::Null, |t| Value::String(times[t].clone())));
                    }
                    tuple.extend([Value::from(s.x), Value::from(s.y)]);
                    if nz > 0 {
                        tuple.push(s.z.map_or(Value::Null, |z| Value::from(levels[z])));
                    }
                    Value::Array(tuple)
                })
                .collect();
            let mut axes = BTreeMap::new();
            axes.insert(
                "composite".into(),
                json!({"dataType": "tuple", "coordinates": coordinates, "values": tuples}),
            );
            let refs = referencing(&Crs::Crs84, nt > 0, nz > 0);
            let ranges = names()
                .zip(values)
                .map(|(name, v)| (name, nd_array(vec!["composite"], vec![steps.len()], v)))
                .collect();
            serde_json::to_value(Coverage {
                kind: "Coverage",
                domain: Domain {
                    kind: "Domain",
                    domain_type: Some("Trajectory"),
                    axes,
                    referencing: refs,
                },
                parameters: Some(parameters(extract)),
                ranges,
            })
            .expect("JSON")
        }
    }
}

// --- Rows: what GeoJSON and CSV write ----------------------------------------------

/// One location's values: its CRS84 position, and per step (t, z) the
/// value of each variable.
struct Row {
    lon: f64,
    lat: f64,
    t: Option<String>,
    z: Option<f64>,
    values: Vec<f64>,
}

/// Every value as rows (one per location and step), and the locations.
fn rows(extract: &Extract) -> Vec<Row> {
    let times: Vec<Option<String>> = match &extract.times {
        Some(t) => t.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    let levels: Vec<Option<f64>> = match &extract.levels {
        Some(z) => z.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let mut out = Vec::new();
    match &extract.shape {
        Shape::Points { points, values } => {
            let steps = times.len() * levels.len();
            for (p, &(lon, lat)) in points.iter().enumerate() {
                for (ti, t) in times.iter().enumerate() {
                    for (zi, z) in levels.iter().enumerate() {
                        let at = p * steps + ti * levels.len() + zi;
                        out.push(Row {
                            lon,
                            lat,
                            t: t.clone(),
                            z: *z,
                            values: values.iter().map(|v| v[at]).collect(),
                        });
                    }
                }
            }
        }
        Shape::Grid {
            values,
            grid,
            window,
            inside,
            ..
        } => {
            let width = window.cols.len();
            let cells = inside.len();
            for (ti, t) in times.iter().enumerate() {
                for (zi, z) in levels.iter().enumerate() {
                    for (k, _) in inside.iter().enumerate().filter(|(_, i)| **i) {
                        let (col, row) = (window.cols[k % width], window.rows[k / width]);
                        let Some((lon, lat)) = grid.centre(col, row).1 else {
                            continue;
                        };
                        let at = (ti * levels.len() + zi) * cells + k;
                        out.push(Row {
                            lon: (lon + 180.0).rem_euclid(360.0) - 180.0,
                            lat,
                            t: t.clone(),
                            z: *z,
                            values: values.iter().map(|v| v[at]).collect(),
                        });
                    }
                }
            }
        }
        Shape::Trajectory { steps, values } => {
            for (k, s) in steps.iter().enumerate() {
                out.push(Row {
                    lon: s.x,
                    lat: s.y,
                    t: s.t.and_then(|t| extract.times.as_ref().map(|ts| ts[t].clone())),
                    z: s.z.and_then(|z| extract.levels.as_ref().map(|zs| zs[z])),
                    values: values.iter().map(|v| v[k]).collect(),
                });
            }
        }
    }
    out
}

fn number(v: f64) -> Value {
    match v.is_finite() {
        true => Value::from(v),
        false => Value::Null,
    }
}

/// A FeatureCollection: one Feature per location, its values (a list over
/// the steps when there are several) in `properties`.
fn geo_json(extract: &Extract) -> Value {
    let names: Vec<&str> = extract.vars.iter().map(Collection::name).collect();
    let mut features: Vec<(String, Value)> = Vec::new();
    let mut order: BTreeMap<String, usize> = BTreeMap::new();
    for row in rows(extract) {
        let key = format!("{} {}", row.lon, row.lat);
        let index = *order.entry(key.clone()).or_insert_with(|| {
            features.push((
                key,
                json!({
                    "type": "Feature",
                    "geometry": {"type": "Point", "coordinates": [row.lon, row.lat]},
                    "properties": {},
                }),
            ));
            features.len() - 1
        });
        let properties = &mut features[index].1["properties"];
        let mut push = |name: &str, value: Value| match properties.get_mut(name) {
            Some(Value::Array(list)) => list.push(value),
            _ => properties[name] = Value::Array(vec![value]),
        };
        if let Some(t) = row.t {
            push("datetime", Value::String(t));
        }
        if let Some(z) = row.z {
            push("z", Value::from(z));
        }
        for (name, v) in names.iter().zip(&row.values) {
            push(name, number(*v));
        }
    }
    // A single value stands alone rather than in a list of one.
    for (_, feature) in &mut features {
        if let Some(map) = feature["properties"].as_object_mut() {
            for value in map.values_mut() {
                if let Value::Array(list) = value {
                    if list.len() == 1 {
                        *value = list.pop().expect("one");
                    }
                }
            }
        }
    }
    json!({
        "type": "FeatureCollection",
        "features": features.into_iter().map(|(_, f)| f).collect::<Vec<_>>(),
    })
}

/// One row per location and step: x, y, t and z as present, then each parameter.
fn csv(extract: &Extract) -> Vec<u8> {
    let mut out = String::from("x,y");
    if extract.times.is_some() {
        out.push_str(",t");
    }
    if extract.levels.is_some() {
        out.push_str(",z");
    }
    for var in &extract.vars {
        let _ = write!(out, ",{}", Collection::name(var));
    }
    out.push('\n');
    for row in rows(extract) {
        let _ = write!(out, "{},{}", row.lon, row.lat);
        if extract.times.is_some() {
            let _ = write!(out, ",{}", row.t.unwrap_or_default());
        }
        if extract.levels.is_some() {
            let _ = write!(out, ",{}", row.z.map(|z| z.to_string()).unwrap_or_default());
        }
        for v in row.values {
            match v.is_finite() {
                true => {
                    let _ = write!(out, ",{v}");
                }
                false => out.push(','),
            }
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// An area or cube as a netCDF file: `lon`/`lat` (or `x`/`y`), `time` (seconds
/// since 1970-01-01) and `z` coordinates, and one variable per parameter.
fn netcdf(extract: &Extract) -> Result<Bytes, ApiError> {
    let Shape::Grid {
        xs, ys, values, grid, ..
    } = &extract.shape
    else {
        return Err(ApiError::BadRequest("f=NetCDF answers area and cube queries".into()));
    };
    let geographic = grid.crs == Crs::Crs84;
    // The coordinates are named as the variables' dimensions are.
    let var = &extract.vars[0];
    let names = var.node.array()?.dimension_names.clone().unwrap_or_default();
    let name = |d: Option<usize>, default: &str| {
        d.and_then(|d| names.get(d).cloned().flatten())
            .unwrap_or_else(|| default.to_string())
    };
    let (tn, zn) = (name(var.grid.t_dim, "time"), name(var.grid.z_dim, "z"));
    let defaults = if geographic { ("lon", "lat") } else { ("x", "y") };
    let (xn, yn) = (
        name(Some(var.grid.x_dim), defaults.0),
        name(Some(var.grid.y_dim), defaults.1),
    );
    let mut dims: Vec<(String, u64)> = Vec::new();
    let mut whole: Vec<(Variable, Bytes)> = Vec::new();
    let doubles = |v: &[f64]| Bytes::from(v.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>());
    let mut coordinate = |name: &str, values: &[f64], attributes: Vec<Attribute>| {
        dims.push((name.to_string(), values.len() as u64));
        let var = Variable {
            name: name.to_string(),
            dims: vec![dims.len() - 1],
            nc_type: NcType::Double,
            attributes,
        };
        whole.push((var, doubles(values)));
    };
    if let Some(times) = &extract.times {
        let seconds: Vec<f64> = times
            .iter()
            .map(|t| crate::engine::epoch_seconds(t).unwrap_or(f64::NAN))
            .collect();
        coordinate(
            &tn,
            &seconds,
            vec![
                Attribute::text("units", "seconds since 1970-01-01 00:00:00"),
                Attribute::text("calendar", "proleptic_gregorian"),
                Attribute::text("standard_name", "time"),
            ],
        );
    }
    if let Some(levels) = &extract.levels {
        coordinate(&zn, levels, vec![Attribute::text("positive", "up")]);
    }
    let axis_attributes = |x: bool| match (geographic, x) {
        (true, true) => vec![
            Attribute::text("units", "degrees_east"),
            Attribute::text("standard_name", "longitude"),
        ],
        (true, false) => vec![
            Attribute::text("units", "degrees_north"),
            Attribute::text("standard_name", "latitude"),
        ],
        (false, true) => vec![Attribute::text("standard_name", "projection_x_coordinate")],
        (false, false) => vec![Attribute::text("standard_name", "projection_y_coordinate")],
    };
    coordinate(&yn, ys, axis_attributes(false));
    let xs: Vec<f64> = match geographic {
        true => xs.iter().map(|x| (x + 180.0).rem_euclid(360.0) - 180.0).collect(),
        false => xs.clone(),
    };
    coordinate(&xn, &xs, axis_attributes(true));
    let all_dims: Vec<usize> = (0..dims.len()).collect();
    let mut data_vars: Vec<(Variable, Bytes)> = extract
        .vars
        .iter()
        .zip(values)
        .map(|(var, v)| {
            let attributes = var.node.attributes();
            let mut attrs = Vec::new();
            for name in ["units", "long_name", "standard_name"] {
                if let Some(text) = text_attribute(attributes, name) {
                    attrs.push(Attribute::text(name, &text));
                }
            }
            let variable = Variable {
                name: Collection::name(var).to_string(),
                dims: all_dims.clone(),
                nc_type: NcType::Double,
                attributes: attrs,
            };
            (variable, doubles(v))
        })
        .collect();
    let (last, data) = data_vars.pop().expect("at least one parameter");
    whole.extend(data_vars);
    let file = NetCdf::new(&dims, &[Attribute::text("Conventions", "CF-1.8")], &whole, &last)
        .map_err(|e| ApiError::Engine(crate::engine::Error::Internal(e)))?;
    file.whole(data)
        .map_err(|e| ApiError::Engine(crate::engine::Error::Internal(e)))
}
