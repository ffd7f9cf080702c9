//! OGC API – Environmental Data Retrieval 1.1 (api.md 3.5) under
//! `/v1/datasets/{ds}/edr`: the landing page, conformance, collections
//! (one per group holding geo variables) and the `position`, `radius`,
//! `area`, `cube` and `trajectory` queries, answered as CoverageJSON,
//! GeoJSON, CSV or (area, cube) NetCDF.
//!
//! A thin adapter: `wkt` parses `coords`, `query` turns a request into
//! cells of the engine's geo grid (which cell holds a point, which centres
//! lie in a region: `engine::geo::region`) and reads them CF-decoded
//! through the one read path; `output` writes what was read.

mod output;
mod parts;
mod query;
mod wkt;
pub(crate) use wkt::check_parse as check_wkt;

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::{absolute, ApiError, AppState};
use crate::engine::geo::Crs;
use crate::engine::{Dataset, GeoVariable};
use crate::identity::Caller;

/// The EDR routes.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/datasets/{ds}/edr", get(landing))
        .route("/v1/datasets/{ds}/edr/", get(landing))
        .route("/v1/datasets/{ds}/edr/conformance", get(conformance))
        .route("/v1/datasets/{ds}/edr/collections", get(collections))
        .route("/v1/datasets/{ds}/edr/collections/{c}", get(collection))
        .merge(
            Router::new()
                .route("/v1/datasets/{ds}/edr/collections/{c}/{query}", get(query::answer))
                .route_layer(axum::middleware::from_fn(super::read_slot)),
        )
}

/// The query types served.
pub(super) const QUERIES: [&str; 5] = ["position", "radius", "area", "cube", "trajectory"];

/// The output formats (`f`), as collections list them.
const FORMATS: [&str; 4] = ["CoverageJSON", "GeoJSON", "CSV", "NetCDF"];

/// CRS84's URI.
pub(super) const CRS84: &str = "http://www.opengis.net/def/crs/OGC/1.3/CRS84";

const CRS84_WKT: &str = "GEOGCRS[\"WGS 84 (CRS84)\",DATUM[\"World Geodetic System 1984\",\
    ELLIPSOID[\"WGS 84\",6378137,298.257223563]],CS[ellipsoidal,2],\
    AXIS[\"geodetic longitude (Lon)\",east,ANGLEUNIT[\"degree\",0.0174532925199433]],\
    AXIS[\"geodetic latitude (Lat)\",north,ANGLEUNIT[\"degree\",0.0174532925199433]],\
    ID[\"OGC\",\"CRS84\"]]";

fn base(state: &AppState, headers: &HeaderMap, ds: &str) -> String {
    absolute(state, headers, &format!("/v1/datasets/{ds}/edr"))
}

async fn landing(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(&ds, &caller).await?;
    let base = base(&state, &headers, &ds);
    let title = dataset.description.clone().unwrap_or_else(|| format!("Dataset {ds}"));
    Ok(Json(json!({
        "title": format!("{ds}: OGC API - Environmental Data Retrieval"),
        "description": title,
        "links": [
            {"href": base, "rel": "self", "type": "application/json", "title": "this document"},
            {"href": format!("{base}/conformance"), "rel": "conformance", "type": "application/json",
             "title": "conformance classes"},
            {"href": format!("{base}/collections"), "rel": "data", "type": "application/json",
             "title": "collections"},
            {"href": absolute(&state, &headers, "/openapi.yaml"), "rel": "service-desc",
             "type": "application/vnd.oai.openapi;version=3.1", "title": "the API definition"},
        ],
    }))
    .into_response())
}

async fn conformance(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
) -> Result<Response, ApiError> {
    state.dataset(&ds, &caller).await?;
    let classes = ["core", "collections", "json", "geojson", "covjson"]
        .iter()
        .chain(QUERIES.iter())
        .map(|c| format!("http://www.opengis.net/spec/ogcapi-edr-1/1.1/conf/{c}"))
        .chain(["http://www.opengis.net/spec/ogcapi-common-1/1.0/conf/core".to_string()])
        .collect::<Vec<_>>();
    Ok(Json(json!({ "conformsTo": classes })).into_response())
}

/// A collection: a group holding geo variables.
pub(super) struct Collection {
    pub(super) id: String,
    pub(super) group: String,
    pub(super) vars: Vec<GeoVariable>,
}

impl Collection {
    /// A variable's name: its path's last segment.
    pub(super) fn name(var: &GeoVariable) -> &str {
        var.node.path.rsplit('/').next().unwrap_or("")
    }
}

/// Every collection of the dataset, in group order. Ids start from the
/// dataset's name whatever version the URL addresses (`{ds}@tag.v1` has
/// the collection `{ds}` too).
async fn all_collections(dataset: &Dataset) -> Result<Vec<Collection>, ApiError> {
    // A version's dataset is named `{ds}@{ref}`: its collections are not.
    let ds: &str = dataset.name.split_once('@').map_or(&dataset.name, |(name, _)| name);
    let mut out: Vec<Collection> = Vec::new();
    for var in dataset.geo_variables().await? {
        let group = var.node.path.rsplit_once('/').map_or("", |(g, _)| g).to_string();
        match out.iter_mut().find(|c| c.group == group) {
            Some(c) => c.vars.push(var),
            None => out.push(Collection {
                id: match group.as_str() {
                    "" => ds.to_string(),
                    g => format!("{ds}.{}", g.replace('/', ".")),
                },
                group,
                vars: vec![var],
            }),
        }
    }
    out.sort_by(|a, b| a.group.cmp(&b.group));
    Ok(out)
}

/// The collection `id` names (404 naming the collections there are).
pub(super) async fn find_collection(dataset: &Dataset, ds: &str, id: &str) -> Result<Collection, ApiError> {
    let mut all = all_collections(dataset).await?;
    match all.iter().position(|c| c.id == id) {
        Some(i) => Ok(all.swap_remove(i)),
        None => Err(ApiError::NotFound(format!(
            "no EDR collection '{id}' in dataset '{ds}' (collections: {})",
            match all.is_empty() {
                true => "none: no group holds a geo variable".to_string(),
                false => all.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(", "),
            }
        ))),
    }
}

async fn collections(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(&ds, &caller).await?;
    let base = base(&state, &headers, &ds);
    let mut docs = Vec::new();
    for c in all_collections(dataset).await? {
        docs.push(collection_document(dataset, &c, &base).await?);
    }
    Ok(Json(json!({
        "links": [{"href": format!("{base}/collections"), "rel": "self", "type": "application/json"}],
        "collections": docs,
    }))
    .into_response())
}

async fn collection(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, c)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(&ds, &caller).await?;
    let collection = find_collection(dataset, &ds, &c).await?;
    let base = base(&state, &headers, &ds);
    Ok(Json(collection_document(dataset, &collection, &base).await?).into_response())
}

/// A text attribute of a variable or its coordinate.
pub(super) fn text_attribute(attributes: Option<&Value>, name: &str) -> Option<String> {
    attributes?.get(name)?.as_str().map(str::to_string)
}

/// A collection's metadata: extent, parameters, queries.
async fn collection_document(dataset: &Dataset, c: &Collection, base: &str) -> Result<Value, ApiError> {
    let href = format!("{base}/collections/{}", c.id);
    let mut bbox = [f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY];
    for var in &c.vars {
        let [w, s, e, n] = var.grid.bounds();
        bbox = [bbox[0].min(w), bbox[1].min(s), bbox[2].max(e), bbox[3].max(n)];
    }
    let mut extent = json!({"spatial": {"bbox": [bbox], "crs": CRS84_WKT}});
    let first = &c.vars[0];
    if let Some(t) = first.grid.t_dim.and_then(|d| first.coordinate(d)) {
        let len = first.node.array()?.shape[first.grid.t_dim.unwrap_or(0)];
        let values: Vec<Value> = (0..len).map(|i| Value::String(instant(&t.label_json(i)))).collect();
        let interval = json!([[values.first(), values.last()]]);
        extent["temporal"] = json!({"interval": interval, "values": values, "trs": TRS_WKT});
    }
    if let Some(z) = first.grid.z_dim.and_then(|d| first.coordinate(d)) {
        let values = z.numbers().unwrap_or_default();
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let name = text_attribute(Some(z.attributes()), "standard_name").unwrap_or_else(|| "height".into());
        extent["vertical"] = json!({
            "interval": [[lo.to_string(), hi.to_string()]],
            "values": values.iter().map(f64::to_string).collect::<Vec<_>>(),
            "vrs": format!("VERTCS[\"{name}\"]"),
        });
    }
    let mut parameters = serde_json::Map::new();
    for var in &c.vars {
        let name = Collection::name(var);
        parameters.insert(name.to_string(), parameter(var));
    }
    let queries: serde_json::Map<String, Value> = QUERIES
        .iter()
        .map(|q| {
            let formats: Vec<&str> = match *q {
                "area" | "cube" => FORMATS.to_vec(),
                _ => FORMATS[..3].to_vec(),
            };
            let link = json!({
                "href": format!("{href}/{q}"),
                "rel": "data",
                "title": format!("{q} query"),
                "templated": false,
                "variables": {
                    "title": format!("{q} query"),
                    "query_type": q,
                    "output_formats": formats,
                    "default_output_format": "CoverageJSON",
                    "crs_details": [{"crs": "CRS84", "wkt": CRS84_WKT}],
                },
            });
            (q.to_string(), json!({ "link": link }))
        })
        .collect();
    let group = dataset.node(&c.group).await?;
    let title = text_attribute(group.attributes(), "title").unwrap_or_else(|| c.id.clone());
    let mut doc = json!({
        "id": c.id,
        "title": title,
        "links": [
            {"href": href, "rel": "self", "type": "application/json"},
            {"href": format!("{href}/position"), "rel": "data", "type": "application/prs.coverage+json",
             "title": "position query"},
        ],
        "extent": extent,
        "data_queries": queries,
        "crs": ["CRS84"],
        "output_formats": FORMATS,
        "parameter_names": parameters,
    });
    if let Some(description) =
        text_attribute(group.attributes(), "summary").or_else(|| text_attribute(group.attributes(), "comment"))
    {
        doc["description"] = Value::String(description);
    }
    Ok(doc)
}

/// The temporal reference system's WKT (Gregorian calendar, UTC).
const TRS_WKT: &str =
    "TIMECRS[\"DateTime\",TDATUM[\"Gregorian Calendar\"],CS[TemporalDateTime,1],AXIS[\"Time (T)\",future]]";

/// A variable's label (`long_name`, else `standard_name`, else its name)
/// and units.
fn label_and_units(var: &GeoVariable) -> (String, Option<String>) {
    let attributes = var.node.attributes();
    let label = text_attribute(attributes, "long_name")
        .or_else(|| text_attribute(attributes, "standard_name"))
        .unwrap_or_else(|| Collection::name(var).to_string());
    (label, text_attribute(attributes, "units"))
}

/// A geo variable as an EDR collection's parameter (plain-text labels).
pub(super) fn parameter(var: &GeoVariable) -> Value {
    let (label, units) = label_and_units(var);
    let mut observed = json!({ "label": label });
    if let Some(standard) = text_attribute(var.node.attributes(), "standard_name") {
        observed["id"] = Value::String(format!("https://vocab.nerc.ac.uk/standard_name/{standard}"));
    }
    let mut p = json!({"type": "Parameter", "description": label, "observedProperty": observed});
    p["unit"] = match units {
        Some(units) => json!({"label": units, "symbol": {"value": units, "type": UNIT_TYPE}}),
        None => json!({"label": "unknown"}),
    };
    p
}

/// A geo variable as a CoverageJSON parameter (labels by language).
pub(super) fn coverage_parameter(var: &GeoVariable) -> Value {
    let (label, units) = label_and_units(var);
    let mut p = json!({
        "type": "Parameter",
        "description": {"en": label},
        "observedProperty": {"label": {"en": label}},
    });
    p["unit"] = match units {
        Some(units) => json!({"label": {"en": units}, "symbol": {"value": units, "type": UNIT_TYPE}}),
        None => json!({"label": {"en": "unknown"}}),
    };
    p
}

/// Units are written as CF gives them (UDUNITS).
const UNIT_TYPE: &str = "https://www.unidata.ucar.edu/software/udunits/";

/// An instant as EDR and CoverageJSON write them: ISO 8601 in UTC, with `Z`.
pub(super) fn instant(label: &Value) -> String {
    match label {
        Value::String(s) if s.ends_with('Z') || s.contains('+') => s.clone(),
        Value::String(s) if s.contains('T') => format!("{s}Z"),
        Value::String(s) => format!("{s}T00:00:00Z"),
        other => other.to_string(),
    }
}

/// The grid CRS of a collection's variable, as CoverageJSON references it.
pub(super) fn crs_uri(crs: &Crs) -> String {
    match crs {
        Crs::Crs84 => CRS84.to_string(),
        Crs::Projected(p) => match p.name.strip_prefix("EPSG:") {
            Some(code) => format!("http://www.opengis.net/def/crs/EPSG/0/{code}"),
            None => p.name.clone(),
        },
    }
}
