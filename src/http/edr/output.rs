//! What an EDR query read, as CoverageJSON, GeoJSON, CSV or NetCDF: this
//! module says what each document holds (domains, parameters, rows); the
//! formats are written by `encode` (`coverage_json`, `geojson`, `text`
//! for CSV cells, `netcdf`).
//!
//! A window's values are read a part at a time as they are written
//! (`parts`); points' and trajectories' are read whole (held under the
//! answer budget). The answer is written on a blocking thread straight into
//! the response body, a piece at a time: no document tree, no whole text
//! in memory.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Write};

use axum::response::Response;
use bytes::Bytes;
use serde_json::{json, Value};

use super::parts::{Order, Parts};
use super::query::{Extract, Shape};
use super::{coverage_parameter, crs_uri, text_attribute, Collection};
use crate::encode::coverage_json::{
    nd_array, Axis, Coverage, CoverageCollection, Document, Domain, Pieces, Referencing, Values,
};
use crate::encode::geojson::{number, FeatureCollection};
use crate::encode::netcdf::{Attribute, NcType, NetCdf, Variable};
use crate::encode::text::{csv_cell, write_float, Style};
use crate::encode::Encoder;
use crate::engine::geo::{wrap_longitude, Crs};
use crate::engine::GeoVariable;
use crate::http::respond::Ready;
use crate::http::{ApiError, ChannelWriter};

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

    pub(super) fn media_type(self) -> &'static str {
        match self {
            Format::CoverageJson => "application/prs.coverage+json",
            Format::GeoJson => "application/geo+json",
            Format::Csv => "text/csv; charset=utf-8",
            Format::NetCdf => "application/x-netcdf",
        }
    }

    /// Whether the format lists a window's cells each with every time and
    /// level (GeoJSON's features), not a step at a time.
    pub(super) fn by_cell(self) -> bool {
        self == Format::GeoJson
    }

    /// The order it writes a window's values in: each parameter's in turn
    /// (CoverageJSON's ranges in name order, NetCDF's variables as listed),
    /// or every parameter's a part at a time (CSV rows, GeoJSON features).
    fn order(self, vars: &[GeoVariable]) -> Order {
        let mut each: Vec<usize> = (0..vars.len()).collect();
        match self {
            Format::CoverageJson => {
                each.sort_by_key(|&v| Collection::name(&vars[v]));
                Order::ByVariable(each)
            }
            Format::NetCdf => Order::ByVariable(each),
            Format::Csv | Format::GeoJson => Order::ByPart,
        }
    }
}

/// The response: the body in `format`, written on a blocking thread as
/// it is sent; `held` (the values' share of the answer budget) is released
/// when the last byte is written. A window's first part is read before the
/// status line: a failure there is an error answer, later ones end the
/// body short.
pub(super) async fn respond(format: Format, mut extract: Extract, ready: Ready) -> Result<Response, ApiError> {
    // The file's head, before the status: what fails there is an error answer.
    let file = match format {
        Format::NetCdf => Some(netcdf_file(&extract)?),
        _ => None,
    };
    let length = file.as_ref().and_then(NetCdf::length);
    let ready = ready.with_length(length);
    if ready.is_head() {
        return Ok(ready.stream(axum::body::Body::empty()));
    }
    let (mut writer, body) = ChannelWriter::new();
    if let Shape::Grid { parts, .. } = &mut extract.shape {
        parts
            .get_mut()
            .start(format.order(&extract.vars), writer.gone())
            .await?;
    }
    tokio::task::spawn_blocking(move || {
        let _held = extract.held.take();
        let written = match format {
            Format::CoverageJson => {
                serde_json::to_writer(&mut writer, &coverage_json(&extract)).map_err(io::Error::from)
            }
            Format::GeoJson => geo_json(&extract, &mut writer),
            Format::Csv => csv(&extract, &mut writer),
            Format::NetCdf => netcdf(file.as_ref().expect("made above"), &extract, &mut writer),
        };
        writer.finish(written);
    });
    Ok(ready.stream(body))
}

// --- CoverageJSON ----------------------------------------------------------------

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

fn coverage_json(extract: &Extract) -> Document<'_> {
    let (nt, nz) = (
        extract.times.as_ref().map_or(0, Vec::len),
        extract.levels.as_ref().map_or(0, Vec::len),
    );
    let t_axis = || Axis::Times {
        values: extract.times.as_deref().unwrap_or_default(),
    };
    let z_axis = || Axis::Levels {
        values: extract.levels.as_deref().unwrap_or_default(),
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
                    axes.insert("x".into(), Axis::Numbers { values: vec![x] });
                    axes.insert("y".into(), Axis::Numbers { values: vec![y] });
                    if nt > 0 {
                        axes.insert("t".into(), t_axis());
                    }
                    if nz > 0 {
                        axes.insert("z".into(), z_axis());
                    }
                    let ranges = names()
                        .zip(values)
                        .map(|(name, v)| {
                            let mine = &v[p * steps..(p + 1) * steps];
                            (name, nd_array(axis_names.clone(), shape.clone(), Values::Slice(mine)))
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
                    Document::One(one)
                }
                _ => Document::Collection(CoverageCollection {
                    kind: "CoverageCollection",
                    domain_type,
                    parameters: parameters(extract),
                    referencing: referencing(&Crs::Crs84, nt > 0, nz > 0),
                    coverages,
                }),
            }
        }
        Shape::Grid { xs, ys, grid, parts } => {
            let mut axes = BTreeMap::new();
            // Longitudes as −180..180, as clients subset them.
            let wrap = |x: f64| match grid.crs {
                Crs::Crs84 => wrap_longitude(x),
                Crs::Projected(_) => x,
            };
            axes.insert(
                "x".into(),
                Axis::Numbers {
                    values: xs.iter().map(|&v| wrap(v)).collect(),
                },
            );
            axes.insert("y".into(), Axis::Numbers { values: ys.clone() });
            let (mut axis_names, mut shape) = (Vec::new(), Vec::new());
            if nt > 0 {
                axes.insert("t".into(), t_axis());
                axis_names.push("t");
                shape.push(nt);
            }
            if nz > 0 {
                axes.insert("z".into(), z_axis());
                axis_names.push("z");
                shape.push(nz);
            }
            axis_names.extend(["y", "x"]);
            shape.extend([ys.len(), xs.len()]);
            // Each parameter's values, a part at a time, in name order.
            let count = parts.borrow().list.len();
            let from: &RefCell<dyn Pieces> = &**parts;
            let ranges = names()
                .map(|name| {
                    let values = Values::Pieces { from, count };
                    (name, nd_array(axis_names.clone(), shape.clone(), values))
                })
                .collect();
            Document::One(Coverage {
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
                Axis::Other(json!({"dataType": "tuple", "coordinates": coordinates, "values": tuples})),
            );
            let refs = referencing(&Crs::Crs84, nt > 0, nz > 0);
            let ranges = names()
                .zip(values)
                .map(|(name, v)| (name, nd_array(vec!["composite"], vec![steps.len()], Values::Slice(v))))
                .collect();
            Document::One(Coverage {
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
        }
    }
}

// --- Rows: what GeoJSON and CSV write ----------------------------------------------

/// One value of each variable at one location and step: its CRS84
/// position, its time and level, and where its values are (`at` in each
/// variable's values).
struct Row<'a> {
    lon: f64,
    lat: f64,
    t: Option<&'a str>,
    z: Option<f64>,
    at: usize,
}

/// The time and level labels of every step, `[t][z]` (one `None` step for
/// an absent axis).
fn step_labels(extract: &Extract) -> (Vec<Option<&str>>, Vec<Option<f64>>) {
    let times = match &extract.times {
        Some(t) => t.iter().map(|t| Some(t.as_str())).collect(),
        None => vec![None],
    };
    let levels = match &extract.levels {
        Some(z) => z.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    (times, levels)
}

/// Every row, location after location (the order GeoJSON groups them in):
/// `f` is called with one location's rows at a time, and the values they
/// point into.
fn for_each_location(
    extract: &Extract,
    mut f: impl FnMut(f64, f64, &[Row<'_>], &[Vec<f64>]) -> io::Result<()>,
) -> io::Result<()> {
    let (times, levels) = step_labels(extract);
    let mut rows = Vec::new();
    match &extract.shape {
        // A part at a time, each of whole cells (every step of each).
        Shape::Grid { grid, parts, .. } => Parts::each(parts, |parts, part, values| {
            let cells = part.rows.len() * part.cols.len();
            for (k, lon, lat) in parts.inside(part, grid) {
                rows.clear();
                push_steps(&mut rows, (lon, lat), (&times, &levels), |step| step * cells + k);
                f(lon, lat, &rows, values)?;
            }
            Ok(())
        }),
        // Few places (a URL's worth): places at the same position are one
        // location, in the order they first appear; their rows are made
        // a location at a time.
        Shape::Points { points, values } => {
            let steps = times.len() * levels.len();
            for_each_group(
                points,
                |p, rows| push_steps(rows, points[p], (&times, &levels), |step| p * steps + step),
                &mut |lon, lat, rows| f(lon, lat, rows, values),
            )
        }
        Shape::Trajectory { steps, values } => {
            let places: Vec<(f64, f64)> = steps.iter().map(|s| (s.x, s.y)).collect();
            for_each_group(
                &places,
                |k, rows| {
                    let s = &steps[k];
                    rows.push(Row {
                        lon: s.x,
                        lat: s.y,
                        t: s.t.and_then(|t| extract.times.as_ref().map(|ts| ts[t].as_str())),
                        z: s.z.and_then(|z| extract.levels.as_ref().map(|zs| zs[z])),
                        at: k,
                    });
                },
                &mut |lon, lat, rows| f(lon, lat, rows, values),
            )
        }
    }
}

/// `f` for each group of `places` at one position (in the order each
/// position first appears), with the rows `rows_of` makes for its places.
fn for_each_group<'a>(
    places: &[(f64, f64)],
    mut rows_of: impl FnMut(usize, &mut Vec<Row<'a>>),
    f: &mut impl FnMut(f64, f64, &[Row<'_>]) -> io::Result<()>,
) -> io::Result<()> {
    let mut order: Vec<(u64, u64)> = Vec::new();
    let mut groups: std::collections::HashMap<(u64, u64), Vec<usize>> = std::collections::HashMap::new();
    for (p, (lon, lat)) in places.iter().enumerate() {
        let key = (lon.to_bits(), lat.to_bits());
        groups
            .entry(key)
            .or_insert_with(|| {
                order.push(key);
                Vec::new()
            })
            .push(p);
    }
    let mut rows = Vec::new();
    for key in order {
        rows.clear();
        for &p in &groups[&key] {
            rows_of(p, &mut rows);
        }
        f(f64::from_bits(key.0), f64::from_bits(key.1), &rows)?;
    }
    Ok(())
}

/// Every row in the order CSV lists them: per step then location for a
/// grid, per place then step otherwise; `f` gets each with the values it
/// points into.
fn for_each_row<'a>(extract: &'a Extract, mut f: impl FnMut(Row<'a>, &[Vec<f64>]) -> io::Result<()>) -> io::Result<()> {
    let (times, levels) = step_labels(extract);
    match &extract.shape {
        Shape::Points { points, values } => {
            let steps = times.len() * levels.len();
            let mut rows = Vec::with_capacity(steps);
            for (p, &place) in points.iter().enumerate() {
                rows.clear();
                push_steps(&mut rows, place, (&times, &levels), |step| p * steps + step);
                rows.drain(..).try_for_each(|row| f(row, values))?;
            }
        }
        // A part at a time: a run of steps, or of rows of one step.
        Shape::Grid { grid, parts, .. } => Parts::each(parts, |parts, part, values| {
            let cells = part.rows.len() * part.cols.len();
            for (ti, t) in part.times.clone().enumerate() {
                for (zi, z) in part.levels.clone().enumerate() {
                    let step = ti * part.levels.len() + zi;
                    for (k, lon, lat) in parts.inside(part, grid) {
                        let row = Row {
                            lon,
                            lat,
                            t: times[t],
                            z: levels[z],
                            at: step * cells + k,
                        };
                        f(row, values)?;
                    }
                }
            }
            Ok(())
        })?,
        Shape::Trajectory { steps, values } => {
            for (k, s) in steps.iter().enumerate() {
                let row = Row {
                    lon: s.x,
                    lat: s.y,
                    t: s.t.and_then(|t| extract.times.as_ref().map(|ts| ts[t].as_str())),
                    z: s.z.and_then(|z| extract.levels.as_ref().map(|zs| zs[z])),
                    at: k,
                };
                f(row, values)?;
            }
        }
    }
    Ok(())
}

/// One row of `place` per step (`[t][z]`), its values at `at(step)`.
fn push_steps<'a>(
    rows: &mut Vec<Row<'a>>,
    (lon, lat): (f64, f64),
    (times, levels): (&[Option<&'a str>], &[Option<f64>]),
    at: impl Fn(usize) -> usize,
) {
    for (ti, t) in times.iter().enumerate() {
        for (zi, z) in levels.iter().enumerate() {
            let at = at(ti * levels.len() + zi);
            rows.push(Row {
                lon,
                lat,
                t: *t,
                z: *z,
                at,
            });
        }
    }
}

/// A FeatureCollection: one Feature per location, its values (a list over
/// the steps when there are several) in `properties`.
fn geo_json(extract: &Extract, w: &mut impl Write) -> io::Result<()> {
    let names: Vec<&str> = extract.vars.iter().map(Collection::name).collect();
    let mut features = FeatureCollection::start(w)?;
    for_each_location(extract, |lon, lat, rows, values| {
        features.point(lon, lat, |properties| {
            if extract.times.is_some() {
                properties.values("datetime", rows.len(), |w, i| Ok(serde_json::to_writer(w, &rows[i].t)?))?;
            }
            if extract.levels.is_some() {
                properties.values("z", rows.len(), |w, i| number(w, rows[i].z.unwrap_or(f64::NAN)))?;
            }
            for (name, v) in names.iter().zip(values) {
                properties.values(name, rows.len(), |w, i| number(w, v[rows[i].at]))?;
            }
            Ok(())
        })
    })?;
    features.finish()
}

/// One row per location and step: x, y, t and z as present, then each
/// parameter; cells as the region CSV writes them ([`crate::encode::text`]).
fn csv(extract: &Extract, w: &mut impl Write) -> io::Result<()> {
    let mut header = vec!["x", "y"];
    if extract.times.is_some() {
        header.push("t");
    }
    if extract.levels.is_some() {
        header.push("z");
    }
    let names: Vec<String> = extract
        .vars
        .iter()
        .map(|var| csv_cell(Collection::name(var)).into_owned())
        .collect();
    header.extend(names.iter().map(String::as_str));
    w.write_all(header.join(",").as_bytes())?;
    w.write_all(b"\n")?;
    let mut row = Vec::with_capacity(256);
    let number = |row: &mut Vec<u8>, v: f64| write_float(row, v, v, Style::Csv);
    for_each_row(extract, |r, values| {
        row.clear();
        number(&mut row, r.lon);
        row.push(b',');
        number(&mut row, r.lat);
        if extract.times.is_some() {
            row.push(b',');
            row.extend_from_slice(csv_cell(r.t.unwrap_or_default()).as_bytes());
        }
        if extract.levels.is_some() {
            row.push(b',');
            number(&mut row, r.z.unwrap_or(f64::NAN));
        }
        for v in values {
            row.push(b',');
            number(&mut row, v[r.at]);
        }
        row.push(b'\n');
        w.write_all(&row)
    })
}

/// Write the file `netcdf_file` describes: its head, then each parameter's
/// values (big-endian, a part at a time) and the tail.
fn netcdf(file: &NetCdf, extract: &Extract, w: &mut impl Write) -> io::Result<()> {
    let Shape::Grid { parts, .. } = &extract.shape else {
        return Err(io::Error::other("f=NetCDF answers area and cube queries"));
    };
    w.write_all(&file.head())?;
    let mut parts = parts.borrow_mut();
    let mut piece = Vec::with_capacity(1 << 20);
    for _ in 0..extract.vars.len() * parts.list.len() {
        for values in parts.next_one()?.chunks(1 << 17) {
            piece.clear();
            piece.extend(values.iter().flat_map(|x| x.to_be_bytes()));
            w.write_all(&piece)?;
        }
    }
    w.write_all(&file.tail())
}

/// An area or cube as a netCDF file: `lon`/`lat` (or `x`/`y`), `time` (seconds
/// since 1970-01-01) and `z` coordinates in its head, and one variable per
/// parameter, streamed.
fn netcdf_file(extract: &Extract) -> Result<NetCdf, ApiError> {
    let Shape::Grid { xs, ys, grid, .. } = &extract.shape else {
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
        true => xs.iter().copied().map(wrap_longitude).collect(),
        false => xs.clone(),
    };
    coordinate(&xn, &xs, axis_attributes(true));
    let all_dims: Vec<usize> = (0..dims.len()).collect();
    let results: Vec<Variable> = extract
        .vars
        .iter()
        .map(|var| {
            let attributes = var.node.attributes();
            let mut attrs = Vec::new();
            for name in ["units", "long_name", "standard_name"] {
                if let Some(text) = text_attribute(attributes, name) {
                    attrs.push(Attribute::text(name, &text));
                }
            }
            Variable {
                name: Collection::name(var).to_string(),
                dims: all_dims.clone(),
                nc_type: NcType::Double,
                attributes: attrs,
            }
        })
        .collect();
    NetCdf::with_results(&dims, &[Attribute::text("Conventions", "CF-1.8")], &whole, &results)
        .map_err(|e| ApiError::Engine(crate::engine::Error::Internal(e)))
}
