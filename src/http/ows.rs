//! What the OGC web services (WMS 1.3.0, WMTS 1.0.0) share: key-value
//! parameters, faults and the headers their exception reports carry,
//! answers tagged by their bytes, layers (the dataset's geo variables)
//! with their dimensions, and `GetFeatureInfo`. Each protocol parses its
//! own requests and writes its own exception format; neither calls the
//! other.

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Value};

use super::conditional::{if_none_match, strong_etag};
use super::respond::{Answer, Checked};
use super::{ApiError, AppState};
use crate::engine::geo::{MapFrame, Sampling};
use crate::engine::labels::{Label, LabelQuery, LabelSel};
use crate::engine::{Dataset, Error, GeoVariable};

/// A fault of a WMS or WMTS request: the status, the exception code in
/// WMS's names (none for some), the text. Each protocol reports it in its
/// own exception format (WMTS renames the codes OWS names otherwise).
pub(super) struct Fault(
    pub(super) StatusCode,
    pub(super) Option<&'static str>,
    pub(super) String,
);

impl Fault {
    pub(super) fn bad(code: &'static str, text: impl Into<String>) -> Self {
        Self(StatusCode::BAD_REQUEST, Some(code), text.into())
    }
}

impl From<super::ApiError> for Fault {
    fn from(e: super::ApiError) -> Self {
        match e {
            super::ApiError::Engine(e) => e.into(),
            other => Self(other.status(), None, other.to_string()),
        }
    }
}

impl From<Error> for Fault {
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound(m) => Self(StatusCode::NOT_FOUND, Some("LayerNotDefined"), m),
            Error::InvalidRequest(m) => Self(StatusCode::BAD_REQUEST, Some("InvalidDimensionValue"), m),
            other => {
                let status = super::ApiError::Engine(other.clone()).status();
                Self(status, None, other.to_string())
            }
        }
    }
}

/// A protocol's exception report `body` of `content_type` with `status`
/// (and, as every 503 of the service, `Retry-After: 1`).
pub(super) fn exception(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response.extensions_mut().insert(super::ProtocolError);
    response
}

/// The request's parameters, names upper-cased (OGC names are
/// case-insensitive); the first of a repeated name wins.
pub(super) struct Params(HashMap<String, String>);

impl Params {
    pub(super) fn parse(query: Option<&str>) -> Self {
        Self::from_pairs(
            url::form_urlencoded::parse(query.unwrap_or("").as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())),
        )
    }

    /// The parameters of `pairs` (the first of a repeated name wins).
    pub(super) fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut map = HashMap::new();
        for (k, v) in pairs {
            map.entry(k.to_ascii_uppercase()).or_insert(v);
        }
        Self(map)
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Every parameter (upper-cased name, value), in no order.
    fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }

    /// Every parameter, in name order: what names a map or a feature info.
    pub(super) fn key(&self) -> String {
        let mut all: Vec<_> = self.0.iter().collect();
        all.sort();
        all.iter().map(|(k, v)| format!("{k}={v}\n")).collect()
    }

    pub(super) fn required(&self, name: &str) -> Result<&str, Fault> {
        self.get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Fault::bad("MissingParameterValue", format!("parameter {name} is required")))
    }
}

/// A protocol's exception `report` of `error`, with the headers the API
/// would send with it (`WWW-Authenticate`, `Retry-After`).
pub(super) fn challenged(report: Response, error: ApiError) -> Response {
    let api = error.into_response();
    let (mut parts, body) = report.into_parts();
    for name in [header::WWW_AUTHENTICATE, header::RETRY_AFTER] {
        if let Some(value) = api.headers().get(&name) {
            parts.headers.insert(name, value.clone());
        }
    }
    Response::from_parts(parts, body)
}

/// The answer with a strong ETag of its bytes (the same bytes, the same
/// tag: capabilities and legends, which read no array data), and 304 when
/// the client already has them.
pub(super) async fn with_etag(response: Response, headers: &HeaderMap) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        let text = "the answer could not be read".to_string();
        return exception(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", text);
    };
    let etag = strong_etag(&[&bytes]);
    let value = HeaderValue::from_str(&etag).expect("an ETag is a valid header value");
    parts.headers.insert(header::ETAG, value);
    if if_none_match(headers, &etag) {
        parts.status = StatusCode::NOT_MODIFIED;
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, Body::empty());
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The layer a `LAYERS`/`LAYER`/`QUERY_LAYERS` value names (one).
pub(super) async fn layer(dataset: &Dataset, names: &str) -> Result<GeoVariable, Fault> {
    let name = names.split(',').next().unwrap_or("").trim().trim_start_matches('/');
    match dataset.geo_variable(name).await {
        Ok(var) => Ok(var),
        Err(Error::NotFound(_)) | Err(Error::InvalidRequest(_)) | Err(Error::Unsupported(_)) => Err(Fault(
            StatusCode::NOT_FOUND,
            Some("LayerNotDefined"),
            format!("no layer '{name}' (a geo variable's path) in this dataset"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The labels `TIME`, `ELEVATION` and `DIM_<NAME>` pick.
pub(super) fn dimension_labels(var: &GeoVariable, params: &Params) -> Result<LabelQuery, Fault> {
    let meta = var.node.array().map_err(Fault::from)?;
    let names = meta.dimension_names.clone().unwrap_or_default();
    let name_of = |d: Option<usize>| d.and_then(|d| names.get(d).cloned().flatten());
    let mut labels = LabelQuery::default();
    let mut pick = |dim: Option<String>, value: &str, what: &str| -> Result<(), Fault> {
        let dim = dim.ok_or_else(|| {
            Fault::bad(
                "InvalidDimensionValue",
                format!("{what}: this layer has no such dimension"),
            )
        })?;
        labels
            .sel
            .push((dim, LabelSel::Point(Label::Text(value.trim().to_string()))));
        Ok(())
    };
    if let Some(time) = params.get("TIME").filter(|v| !v.is_empty()) {
        pick(name_of(var.grid.t_dim), time, "TIME")?;
    }
    if let Some(elevation) = params.get("ELEVATION").filter(|v| !v.is_empty()) {
        pick(name_of(var.grid.z_dim), elevation, "ELEVATION")?;
    }
    for (key, value) in params.iter() {
        if let Some(dim) = key.strip_prefix("DIM_") {
            let found = names.iter().flatten().find(|n| n.eq_ignore_ascii_case(dim)).cloned();
            pick(found, value, key)?;
        }
    }
    Ok(labels)
}

/// How a feature info answers (`INFO_FORMAT` in WMS, `INFOFORMAT` in WMTS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InfoFormat {
    /// A GeoJSON feature collection of the one feature.
    Json,
    /// `layer:`, `value:`, `x:` and `y:` lines.
    Text,
}

impl InfoFormat {
    fn named(name: Option<&str>) -> Result<Self, Fault> {
        match name.unwrap_or("application/json") {
            f if f.eq_ignore_ascii_case("text/plain") => Ok(Self::Text),
            f if f.eq_ignore_ascii_case("application/json") => Ok(Self::Json),
            f => Err(Fault::bad(
                "InvalidFormat",
                format!("INFO_FORMAT {f}: use application/json or text/plain"),
            )),
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::Json => "application/json",
            Self::Text => "text/plain",
        }
    }
}

/// What a `GetFeatureInfo` asks: the value of a layer under one pixel of a
/// map, at the labels its dimensions pick.
pub(super) struct PixelQuery {
    var: GeoVariable,
    lon: f64,
    lat: f64,
    labels: LabelQuery,
    format: InfoFormat,
    /// The request's parameters, which name the answer.
    key: String,
}

impl PixelQuery {
    /// The pixel (`I`, `J`) of `frame`, the labels and `format` of `params`.
    pub(super) fn of(var: GeoVariable, frame: MapFrame, params: &Params, format: Option<&str>) -> Result<Self, Fault> {
        let pixel = |name: &str, n: u32| -> Result<usize, Fault> {
            params
                .required(name)?
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|v| *v < n)
                .map(|v| v as usize)
                .ok_or_else(|| {
                    Fault::bad(
                        "InvalidPoint",
                        format!("{name} must be a pixel of the map (0 to {})", n - 1),
                    )
                })
        };
        let (i, j) = (pixel("I", frame.width)?, pixel("J", frame.height)?);
        Ok(Self {
            labels: dimension_labels(&var, params)?,
            var,
            lon: frame.lons[i],
            lat: frame.lats[j],
            format: InfoFormat::named(format)?,
            key: params.key(),
        })
    }
}

/// `GetFeatureInfo`'s answer: the value under the pixel and its cell.
pub(super) async fn feature_info(
    state: &AppState,
    dataset: &Dataset,
    query: PixelQuery,
    (method, headers): (&Method, &HeaderMap),
) -> Result<Response, Fault> {
    let PixelQuery {
        var,
        lon,
        lat,
        labels,
        format,
        key,
    } = query;
    let sampling = Sampling::new(&var.grid, &[lon], &[lat]);
    let plan = match sampling.is_empty() {
        true => None,
        false => Some(dataset.plan_raster(&var, &sampling, &labels).await?),
    };
    let mut described = Answer::new(state, dataset, "wms-feature-info", format.content_type()).key(key);
    if let Some(plan) = &plan {
        described = described.plan(plan);
    }
    let ready = match described.check(method, headers).await? {
        Checked::Answered(response) => return Ok(response),
        Checked::Read(ready) => ready,
    };
    let (value, cell) = match &plan {
        None => (None, None),
        Some(plan) => {
            let raster = dataset
                .read_raster(&var, &sampling, plan, Some(ready.versions()))
                .await?;
            let value = raster.value(0);
            let cell = var.grid.centre(sampling.cols[0], sampling.rows[0]);
            ((!value.is_nan()).then_some(value), Some(cell))
        }
    };
    let name = var.node.path.clone();
    // The point: the cell's centre in CRS84, else the queried one.
    let (x, y) = cell.and_then(|(_, lonlat)| lonlat).unwrap_or((lon, lat));
    let cell = cell.map(|(xy, _)| xy);
    if format == InfoFormat::Text {
        let text = format!(
            "layer: {name}\nvalue: {}\nx: {}\ny: {}\n",
            value.map_or("null".to_string(), |v| v.to_string()),
            cell.map_or(x, |c| c.0),
            cell.map_or(y, |c| c.1)
        );
        return Ok(ready.whole(Bytes::from(text)));
    }
    let doc = json!({
        "type": "FeatureCollection",
        "features": [{
            "type": "Feature",
            "id": name,
            "geometry": {"type": "Point", "coordinates": [x, y]},
            "properties": {"value": value, "x": cell.map(|c| c.0), "y": cell.map(|c| c.1)},
        }],
    });
    Ok(ready.whole(Bytes::from(doc.to_string())))
}

/// A layer's time or elevation dimension, as the capabilities of WMS and
/// WMTS list it.
pub(super) struct LayerDimension {
    /// `time` or `elevation`.
    pub(super) kind: &'static str,
    /// The array's name of the dimension.
    pub(super) name: String,
    /// `ISO8601` for time; the coordinate's `units` for elevation.
    pub(super) units: String,
    /// The latest time, the first elevation.
    pub(super) default: String,
    /// Every label.
    pub(super) values: Vec<String>,
}

/// The time and elevation dimensions of a layer that have labels.
pub(super) async fn layer_dimensions(dataset: &Dataset, var: &GeoVariable) -> Result<Vec<LayerDimension>, Fault> {
    let meta = var.node.array().map_err(Fault::from)?;
    let names = meta.dimension_names.clone().unwrap_or_default();
    let mut found = Vec::new();
    for (dim, kind) in [(var.grid.t_dim, "time"), (var.grid.z_dim, "elevation")] {
        let Some(d) = dim else { continue };
        let Ok(Some(labels)) = dataset.dimension_labels(&var.node.path, d).await else {
            continue;
        };
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        let values: Vec<String> = labels.iter().map(text).collect();
        let default = match kind {
            "time" => values.last().cloned(),
            _ => values.first().cloned(),
        }
        .unwrap_or_default();
        let name = names.get(d).cloned().flatten().unwrap_or_default();
        let units = if kind == "time" {
            "ISO8601".to_string()
        } else {
            let unit = dataset
                .node(&coord_path(&var.node.path, &name))
                .await
                .ok()
                .and_then(|n| {
                    n.metadata
                        .as_ref()?
                        .attributes()
                        .get("units")?
                        .as_str()
                        .map(str::to_string)
                });
            unit.unwrap_or_else(|| "unknown".into())
        };
        found.push(LayerDimension {
            kind,
            name,
            units,
            default,
            values,
        });
    }
    Ok(found)
}

/// The path of the coordinate `name` beside the array at `path`.
fn coord_path(path: &str, name: &str) -> String {
    crate::storage::join(path.rsplit_once('/').map_or("", |(parent, _)| parent), name)
}
