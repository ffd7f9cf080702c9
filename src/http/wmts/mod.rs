//! WMTS 1.0.0 (api.md 4.6): the capabilities, RESTful
//! (`.../wmts/1.0.0/WMTSCapabilities.xml`) and key-value, with a layer per
//! geo variable, a style per colormap, time and elevation dimensions and
//! the tile matrix sets of the tile route (3.3) limited to each layer's
//! extent. The `ResourceURL` template is the tile route itself, and a
//! key-value `GetTile` is answered by it, so a WMTS tile is the tile
//! route's, byte for byte; `GetFeatureInfo` answers as WMS's does (both
//! in `ows`), at the tile's pixel asked.
//! Errors are OWS `ExceptionReport`s.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::Value;

use super::ows::{self, Fault, Params, PixelQuery};
use super::query::TileQuery;
use super::{ApiError, AppState};
use crate::encode::xml::escape;
use crate::engine::geo::{to_mercator, MapCrs, MapFrame, TileMatrixSet, MERCATOR_HALF, MERCATOR_LATITUDE, TILE_SIZE};
use crate::engine::render::Colormap;
use crate::engine::{Dataset, GeoVariable};
use crate::identity::{Caller, Permission};

/// The WMTS routes.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/v1/datasets/{ds}/wmts/1.0.0/WMTSCapabilities.xml",
            get(rest_capabilities),
        )
        .route("/v1/datasets/{ds}/wmts", get(key_value))
        .route_layer(axum::middleware::from_fn(|request, next| {
            super::admit(request, next, |e| Ows::from(Fault::from(e)).into_response())
        }))
}

/// The style a tile is drawn with when none is asked (the tile route's).
const DEFAULT_STYLE: &str = "gray";

/// An OWS exception: the status, the code, the parameter at fault, the text.
struct Ows(StatusCode, &'static str, Option<&'static str>, String);

impl Ows {
    fn bad(code: &'static str, locator: &'static str, text: impl Into<String>) -> Self {
        Self(StatusCode::BAD_REQUEST, code, Some(locator), text.into())
    }
}

impl From<Fault> for Ows {
    fn from(e: Fault) -> Self {
        let code = match e.1 {
            Some("MissingParameterValue") => "MissingParameterValue",
            Some("InvalidFormat" | "InvalidParameterValue" | "InvalidDimensionValue" | "StyleNotDefined") => {
                "InvalidParameterValue"
            }
            Some("LayerNotDefined") => "InvalidParameterValue",
            Some("OperationNotSupported") => "OperationNotSupported",
            _ => "NoApplicableCode",
        };
        // A layer that is not there is the client's error (400 in OWS).
        let status = match e.1 {
            Some("LayerNotDefined") => StatusCode::BAD_REQUEST,
            _ => e.0,
        };
        Self(status, code, None, e.2)
    }
}

impl From<ApiError> for Ows {
    fn from(e: ApiError) -> Self {
        Self::from(Fault::from(e))
    }
}

impl IntoResponse for Ows {
    fn into_response(self) -> Response {
        let locator = self.2.map_or(String::new(), |l| format!(" locator=\"{l}\""));
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ExceptionReport xmlns=\"http://www.opengis.net/ows/1.1\" \
             xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" version=\"1.1.0\" xml:lang=\"en\" \
             xsi:schemaLocation=\"http://www.opengis.net/ows/1.1 http://schemas.opengis.net/ows/1.1.0/owsExceptionReport.xsd\">\n\
             <Exception exceptionCode=\"{}\"{locator}><ExceptionText>{}</ExceptionText></Exception>\n</ExceptionReport>\n",
            self.1,
            escape(&self.3)
        );
        ows::exception(self.0, "application/xml", body)
    }
}

/// An unknown dataset or a denied request as an OWS exception report, with
/// the challenge or `Retry-After` the API would send.
fn refused(error: ApiError) -> Response {
    let report = Ows(error.status(), "NoApplicableCode", None, error.to_string()).into_response();
    ows::challenged(report, error)
}

/// `GET /v1/datasets/{ds}/wmts/1.0.0/WMTSCapabilities.xml` (query
/// parameters are ignored, as OGC services do: clients add their own).
async fn rest_capabilities(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = state.configured(&ds, &caller, Permission::Read) {
        return refused(e);
    }
    match capabilities(&state, &caller, &ds, &headers).await {
        Ok(response) => ows::with_etag(response, &headers).await,
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/datasets/{ds}/wmts?SERVICE=WMTS&REQUEST=...`.
async fn key_value(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = state.configured(&ds, &caller, Permission::Read) {
        return refused(e);
    }
    let params = Params::parse(query.as_deref());
    let answered = match operation(&params) {
        Err(e) => Err(e),
        Ok(Operation::Capabilities) => match capabilities(&state, &caller, &ds, &headers).await {
            Ok(response) => return ows::with_etag(response, &headers).await,
            Err(e) => Err(e),
        },
        Ok(Operation::Tile) => get_tile(&state, caller, &ds, &params, method, headers).await,
        Ok(Operation::FeatureInfo) => feature_info(&state, &caller, &ds, &params, (&method, &headers)).await,
    };
    answered.unwrap_or_else(IntoResponse::into_response)
}

enum Operation {
    Capabilities,
    Tile,
    FeatureInfo,
}

fn operation(params: &Params) -> Result<Operation, Ows> {
    if let Some(service) = params.get("SERVICE") {
        if !service.eq_ignore_ascii_case("WMTS") {
            return Err(Ows::bad(
                "InvalidParameterValue",
                "SERVICE",
                format!("SERVICE={service}: this is a WMTS"),
            ));
        }
    }
    let request = required(params, "REQUEST")?;
    let operation = match request.to_ascii_lowercase().as_str() {
        // Its version is negotiated (AcceptVersions), never refused.
        "getcapabilities" => return Ok(Operation::Capabilities),
        "gettile" => Operation::Tile,
        "getfeatureinfo" => Operation::FeatureInfo,
        _ => {
            return Err(Ows(
                StatusCode::NOT_IMPLEMENTED,
                "OperationNotSupported",
                Some("REQUEST"),
                format!("REQUEST={request}: use GetCapabilities, GetTile or GetFeatureInfo"),
            ))
        }
    };
    if let Some(version) = params.get("VERSION").filter(|v| !v.is_empty() && *v != "1.0.0") {
        return Err(Ows::bad(
            "InvalidParameterValue",
            "VERSION",
            format!("VERSION={version}: this WMTS speaks 1.0.0"),
        ));
    }
    Ok(operation)
}

/// A tile a key-value request names: the set, zoom, row and column.
struct TileAt {
    set: TileMatrixSet,
    zoom: u8,
    row: u64,
    col: u64,
}

/// Parameter `name`, which must be given and not empty.
fn required<'a>(params: &'a Params, name: &'static str) -> Result<&'a str, Ows> {
    params
        .get(name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Ows::bad("MissingParameterValue", name, format!("parameter {name} is required")))
}

impl TileAt {
    fn of(params: &Params) -> Result<Self, Ows> {
        let required = |name: &'static str| required(params, name);
        let name = required("TILEMATRIXSET")?;
        let set = TileMatrixSet::named(name).ok_or_else(|| {
            Ows::bad(
                "InvalidParameterValue",
                "TILEMATRIXSET",
                format!("no tile matrix set '{name}': use WebMercatorQuad or WorldCRS84Quad"),
            )
        })?;
        let number = |name: &'static str| -> Result<u64, Ows> {
            let text = required(name)?;
            text.trim().parse().map_err(|_| {
                Ows::bad(
                    "InvalidParameterValue",
                    name,
                    format!("{name}={text}: expected a non-negative integer"),
                )
            })
        };
        let zoom = number("TILEMATRIX")?;
        let zoom = u8::try_from(zoom)
            .ok()
            .filter(|z| *z <= set.max_zoom())
            .ok_or_else(|| {
                Ows::bad(
                    "InvalidParameterValue",
                    "TILEMATRIX",
                    format!("{} has tile matrices 0 to {}", set.id(), set.max_zoom()),
                )
            })?;
        let (row, col) = (number("TILEROW")?, number("TILECOL")?);
        let (cols, rows) = set.matrix_size(zoom);
        for (value, count, locator) in [(row, rows, "TILEROW"), (col, cols, "TILECOL")] {
            if value >= count {
                return Err(Ows::bad(
                    "TileOutOfRange",
                    locator,
                    format!("{locator}={value}: tile matrix {zoom} of {} has {count}", set.id()),
                ));
            }
        }
        Ok(Self { set, zoom, row, col })
    }

    /// The tile's box in its set's CRS: `[minx, miny, maxx, maxy]`.
    fn bbox(&self) -> [f64; 4] {
        let (origin_x, origin_y, span) = match self.set {
            TileMatrixSet::WebMercatorQuad => (-MERCATOR_HALF, MERCATOR_HALF, 2.0 * MERCATOR_HALF),
            TileMatrixSet::WorldCrs84Quad => (-180.0, 90.0, 180.0),
        };
        let size = span / (1u64 << self.zoom) as f64;
        let (x0, y1) = (origin_x + self.col as f64 * size, origin_y - self.row as f64 * size);
        [x0, y1 - size, x0 + size, y1]
    }
}

/// The query of the tile route that draws `layer` in `style` at the
/// dimension values given (the `ResourceURL` template, filled in).
fn tile_query(layer: &str, style: &str, dimensions: &[(String, String)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("variable", layer).append_pair("colormap", style);
    for (dim, value) in dimensions {
        query.append_pair("sel", &format!("{dim}={value}"));
    }
    query.finish()
}

/// The style a request names (`STYLE`; empty or `default`: the default).
fn style(params: &Params) -> Result<String, Ows> {
    match params.get("STYLE").map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(DEFAULT_STYLE.into()),
        Some(s) if s.eq_ignore_ascii_case("default") => Ok(DEFAULT_STYLE.into()),
        Some(s) => match Colormap::named(s.strip_prefix("raster/").unwrap_or(s)) {
            Some(_) => Ok(s.strip_prefix("raster/").unwrap_or(s).to_string()),
            None => Err(Ows::bad(
                "InvalidParameterValue",
                "STYLE",
                format!("style '{s}' is not known: use one of {}", Colormap::names().join(", ")),
            )),
        },
    }
}

/// The dimension values a request gives (`TIME`, `ELEVATION`), as the
/// array's dimension names and labels (the labels are the tile route's to
/// look up: none is read here).
fn dimension_values(var: &GeoVariable, params: &Params) -> Result<Vec<(String, String)>, Ows> {
    let meta = var.node.array().map_err(|e| Ows::from(Fault::from(e)))?;
    let names = meta.dimension_names.clone().unwrap_or_default();
    let mut values = Vec::new();
    for (dim, param) in [(var.grid.t_dim, "TIME"), (var.grid.z_dim, "ELEVATION")] {
        let Some(value) = params.get(param).map(str::trim).filter(|v| !v.is_empty()) else {
            continue;
        };
        // A dimension the layer does not have is ignored (07-057r7).
        if let Some(name) = dim.and_then(|d| names.get(d).cloned().flatten()) {
            values.push((name, value.to_string()));
        }
    }
    Ok(values)
}

/// `GetTile`: the tile route's answer for the layer, style and dimensions.
async fn get_tile(
    state: &Arc<AppState>,
    caller: Caller,
    ds: &str,
    params: &Params,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, Ows> {
    let layer_name = required(params, "LAYER")?;
    if let Some(format) = params.get("FORMAT").filter(|f| !f.is_empty()) {
        if !format.eq_ignore_ascii_case("image/png") {
            return Err(Ows::bad(
                "InvalidParameterValue",
                "FORMAT",
                format!("FORMAT {format}: only image/png is served"),
            ));
        }
    }
    let at = TileAt::of(params)?;
    let style = style(params)?;
    let dataset = state.dataset(ds, &caller).await?;
    let var = layer(&dataset, layer_name).await?;
    let dimensions = dimension_values(&var, params)?;
    // The same parameters as the tile route's URL of that tile: the same
    // answer and ETag.
    let query = tile_query(&var.node.path, &style, &dimensions);
    let request = TileQuery::parse(Some(&query))?;
    let position = (at.set, at.zoom, at.row, at.col);
    super::picture::tile(state, &caller, ds, position, &request, &query, (&method, &headers))
        .await
        .map_err(Ows::from)
}

/// The layer `name` names.
async fn layer(dataset: &Dataset, name: &str) -> Result<GeoVariable, Ows> {
    ows::layer(dataset, name).await.map_err(at_parameter)
}

/// A fault of the layer or pixel a request names, with the parameter at
/// fault as its locator.
fn at_parameter(e: Fault) -> Ows {
    match e.1 {
        Some("LayerNotDefined") => Ows::bad("InvalidParameterValue", "LAYER", e.2),
        Some("InvalidPoint") => Ows::bad("PointIJOutOfRange", if e.2.starts_with('J') { "J" } else { "I" }, e.2),
        _ => Ows::from(e),
    }
}

/// `GetFeatureInfo`: the value under pixel (`I`, `J`) of the tile.
async fn feature_info(
    state: &AppState,
    caller: &Caller,
    ds: &str,
    params: &Params,
    asked: (&Method, &HeaderMap),
) -> Result<Response, Ows> {
    let layer_name = required(params, "LAYER")?;
    let at = TileAt::of(params)?;
    style(params)?;
    let dataset = state.dataset(ds, caller).await?;
    let var = layer(&dataset, layer_name).await?;
    let crs = match at.set {
        TileMatrixSet::WebMercatorQuad => MapCrs::WebMercator,
        TileMatrixSet::WorldCrs84Quad => MapCrs::Crs84,
    };
    let frame = MapFrame::new(crs, at.bbox(), TILE_SIZE, TILE_SIZE).expect("a tile's box is one");
    let query = PixelQuery::of(var, frame, params, params.get("INFOFORMAT")).map_err(at_parameter)?;
    ows::feature_info(state, &dataset, query, asked)
        .await
        .map_err(at_parameter)
}

/// The capabilities document.
async fn capabilities(state: &AppState, caller: &Caller, ds: &str, headers: &HeaderMap) -> Result<Response, Ows> {
    let dataset = state.dataset(ds, caller).await?;
    let origin = super::absolute(state, headers, "");
    let origin = if origin.is_empty() {
        "http://localhost".to_string()
    } else {
        origin
    };
    let ds = &super::url_path(ds);
    let kvp = format!("{origin}/v1/datasets/{ds}/wmts?");
    let variables = dataset.geo_variables().await.map_err(Fault::from)?;
    let mut layers = String::new();
    let mut deepest = [0u8; 2];
    for var in &variables {
        let (xml, zooms) = layer_xml(&dataset, var, &origin, ds).await?;
        layers.push_str(&xml);
        deepest = [deepest[0].max(zooms[0]), deepest[1].max(zooms[1])];
    }
    let sets: String = TileMatrixSet::ALL
        .iter()
        .zip(deepest)
        .map(|(set, zoom)| matrix_set_xml(*set, zoom))
        .collect();
    let title = escape(dataset.description.as_deref().unwrap_or(ds));
    let operation = |name: &str| {
        format!(
            "<ows:Operation name=\"{name}\"><ows:DCP><ows:HTTP><ows:Get xlink:href=\"{}\"><ows:Constraint name=\"GetEncoding\">\
             <ows:AllowedValues><ows:Value>KVP</ows:Value></ows:AllowedValues></ows:Constraint></ows:Get></ows:HTTP></ows:DCP></ows:Operation>",
            escape(&kvp)
        )
    };
    let rest = escape(&format!("{origin}/v1/datasets/{ds}/wmts/1.0.0/WMTSCapabilities.xml"));
    let xml = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Capabilities xmlns="http://www.opengis.net/wmts/1.0" xmlns:ows="http://www.opengis.net/ows/1.1" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:gml="http://www.opengis.net/gml" xsi:schemaLocation="http://www.opengis.net/wmts/1.0 http://schemas.opengis.net/wmts/1.0/wmtsGetCapabilities_response.xsd" version="1.0.0">
<ows:ServiceIdentification><ows:Title>{title}</ows:Title><ows:ServiceType>OGC WMTS</ows:ServiceType><ows:ServiceTypeVersion>1.0.0</ows:ServiceTypeVersion></ows:ServiceIdentification>
<ows:OperationsMetadata>{}{}{}</ows:OperationsMetadata>
<Contents>
{layers}{sets}</Contents>
<ServiceMetadataURL xlink:href="{rest}"/>
</Capabilities>
"#,
        operation("GetCapabilities"),
        operation("GetTile"),
        operation("GetFeatureInfo"),
    );
    Ok((
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/xml"))],
        xml,
    )
        .into_response())
}

/// One `Layer`, and the deepest zoom of each set it lists.
async fn layer_xml(dataset: &Dataset, var: &GeoVariable, origin: &str, ds: &str) -> Result<(String, [u8; 2]), Ows> {
    let attrs = var
        .node
        .metadata
        .as_ref()
        .map(|m| m.attributes().clone())
        .unwrap_or(Value::Null);
    let path = &var.node.path;
    let title = escape(attrs.get("long_name").and_then(Value::as_str).unwrap_or(path));
    let [w, s, e, n] = var.grid.bounds();
    // Across the antimeridian: the whole width.
    let (w, e) = if w <= e { (w, e) } else { (-180.0, 180.0) };
    let mut xml = format!(
        "<Layer><ows:Title>{title}</ows:Title><ows:WGS84BoundingBox><ows:LowerCorner>{w} {s}</ows:LowerCorner>\
         <ows:UpperCorner>{e} {n}</ows:UpperCorner></ows:WGS84BoundingBox><ows:Identifier>{}</ows:Identifier>",
        escape(path)
    );
    // The box in Web Mercator too (clients such as GDAL take the extent in
    // the set's CRS from it: the poles have none).
    let [mx0, my0] = to_mercator(w, s);
    let [mx1, my1] = to_mercator(e, n);
    let _ = write!(
        xml,
        "<ows:BoundingBox crs=\"urn:ogc:def:crs:EPSG::3857\"><ows:LowerCorner>{mx0} {my0}</ows:LowerCorner>\
         <ows:UpperCorner>{mx1} {my1}</ows:UpperCorner></ows:BoundingBox>"
    );
    for colormap in Colormap::names() {
        let default = if colormap == DEFAULT_STYLE {
            " isDefault=\"true\""
        } else {
            ""
        };
        let _ = write!(
            xml,
            "<Style{default}><ows:Title>{colormap}</ows:Title><ows:Identifier>{colormap}</ows:Identifier></Style>"
        );
    }
    xml.push_str(
        "<Format>image/png</Format><InfoFormat>application/json</InfoFormat><InfoFormat>text/plain</InfoFormat>",
    );
    let dimensions = ows::layer_dimensions(dataset, var).await?;
    for dim in &dimensions {
        let _ = write!(
            xml,
            "<Dimension><ows:Identifier>{}</ows:Identifier><ows:UOM>{}</ows:UOM><Default>{}</Default>",
            dim.kind,
            escape(&dim.units),
            escape(&dim.default)
        );
        for value in &dim.values {
            let _ = write!(xml, "<Value>{}</Value>", escape(value));
        }
        xml.push_str("</Dimension>");
    }
    let mut deepest = [0u8; 2];
    for (k, set) in TileMatrixSet::ALL.iter().enumerate() {
        // Two zooms past the data's cells, so that a map can come close.
        let zoom = (set.zoom_for(var.grid.smallest_cell_degrees()) + 2).min(set.max_zoom());
        deepest[k] = zoom;
        let _ = write!(
            xml,
            "<TileMatrixSetLink><TileMatrixSet>{}</TileMatrixSet><TileMatrixSetLimits>",
            set.id()
        );
        for z in 0..=zoom {
            let (cols, rows) = limits(*set, z, [w, s, e, n]);
            let _ = write!(
                xml,
                "<TileMatrixLimits><TileMatrix>{z}</TileMatrix><MinTileRow>{}</MinTileRow><MaxTileRow>{}</MaxTileRow>\
                 <MinTileCol>{}</MinTileCol><MaxTileCol>{}</MaxTileCol></TileMatrixLimits>",
                rows.0, rows.1, cols.0, cols.1
            );
        }
        xml.push_str("</TileMatrixSetLimits></TileMatrixSetLink>");
    }
    let sels: String = dimensions
        .iter()
        .map(|d| {
            let sel: String = url::form_urlencoded::byte_serialize(format!("{}=", d.name).as_bytes()).collect();
            format!("&sel={sel}{{{}}}", d.kind)
        })
        .collect();
    let variable: String = url::form_urlencoded::byte_serialize(path.as_bytes()).collect();
    let template = format!(
        "{origin}/v1/datasets/{ds}/tiles/{{TileMatrixSet}}/{{TileMatrix}}/{{TileRow}}/{{TileCol}}?variable={variable}&colormap={{Style}}{sels}"
    );
    let _ = writeln!(
        xml,
        "<ResourceURL format=\"image/png\" resourceType=\"tile\" template=\"{}\"/></Layer>",
        escape(&template)
    );
    Ok((xml, deepest))
}

/// The first and last tile column, and row, of `set` at `zoom` that
/// `[w, s, e, n]` (degrees) touches.
fn limits(set: TileMatrixSet, zoom: u8, [w, s, e, n]: [f64; 4]) -> ((u64, u64), (u64, u64)) {
    let (cols, rows) = set.matrix_size(zoom);
    let index = |fraction: f64, count: u64| ((fraction * count as f64).floor().max(0.0) as u64).min(count - 1);
    // The last tile is the one holding the edge, not the one after it.
    let shy = |fraction: f64| fraction - 1e-12;
    let col = |lon: f64| (lon + 180.0) / 360.0;
    let row = |lat: f64| match set {
        TileMatrixSet::WebMercatorQuad => {
            let lat = lat.clamp(-MERCATOR_LATITUDE, MERCATOR_LATITUDE).to_radians();
            (1.0 - (lat.tan() + 1.0 / lat.cos()).ln() / std::f64::consts::PI) / 2.0
        }
        TileMatrixSet::WorldCrs84Quad => (90.0 - lat) / 180.0,
    };
    // A last tile before the first (a line on a tile's edge) is the first.
    let span = |first, last| (first, std::cmp::max(first, last));
    (
        span(index(col(w), cols), index(shy(col(e)), cols)),
        span(index(row(n), rows), index(shy(row(s)), rows)),
    )
}

/// A `TileMatrixSet` of the contents, with its matrices 0 to `deepest`.
fn matrix_set_xml(set: TileMatrixSet, deepest: u8) -> String {
    let (crs, corner, well_known) = match set {
        TileMatrixSet::WebMercatorQuad => (
            "urn:ogc:def:crs:EPSG::3857",
            format!("{} {}", -MERCATOR_HALF, MERCATOR_HALF),
            "<WellKnownScaleSet>urn:ogc:def:wkss:OGC:1.0:GoogleMapsCompatible</WellKnownScaleSet>",
        ),
        // CRS84: longitude first.
        TileMatrixSet::WorldCrs84Quad => ("urn:ogc:def:crs:OGC:1.3:CRS84", "-180 90".to_string(), ""),
    };
    let mut xml = format!(
        "<TileMatrixSet><ows:Identifier>{}</ows:Identifier><ows:SupportedCRS>{crs}</ows:SupportedCRS>{well_known}",
        set.id()
    );
    for z in 0..=deepest.min(set.max_zoom()) {
        let (cols, rows) = set.matrix_size(z);
        let _ = write!(
            xml,
            "<TileMatrix><ows:Identifier>{z}</ows:Identifier><ScaleDenominator>{}</ScaleDenominator>\
             <TopLeftCorner>{corner}</TopLeftCorner><TileWidth>{TILE_SIZE}</TileWidth><TileHeight>{TILE_SIZE}</TileHeight>\
             <MatrixWidth>{cols}</MatrixWidth><MatrixHeight>{rows}</MatrixHeight></TileMatrix>",
            set.scale_denominator(z)
        );
    }
    xml.push_str("</TileMatrixSet>\n");
    xml
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_hold_the_tiles_an_extent_touches() {
        let world = [-180.0, -90.0, 180.0, 90.0];
        assert_eq!(limits(TileMatrixSet::WebMercatorQuad, 0, world), ((0, 0), (0, 0)));
        assert_eq!(limits(TileMatrixSet::WebMercatorQuad, 2, world), ((0, 3), (0, 3)));
        assert_eq!(limits(TileMatrixSet::WorldCrs84Quad, 0, world), ((0, 1), (0, 0)));
        // 0..90°E, 0..45°N: the north-east quarter's first tiles.
        let box_ = [0.0, 0.0, 90.0, 45.0];
        assert_eq!(limits(TileMatrixSet::WorldCrs84Quad, 1, box_), ((2, 2), (0, 0)));
        assert_eq!(limits(TileMatrixSet::WebMercatorQuad, 2, box_), ((2, 2), (1, 1)));
        assert_eq!(limits(TileMatrixSet::WebMercatorQuad, 3, box_), ((4, 5), (2, 3)));
        // A line on a tile's edge: that tile, never an empty range.
        assert_eq!(
            limits(TileMatrixSet::WorldCrs84Quad, 1, [0.0, 0.0, 0.0, 45.0]),
            ((2, 2), (0, 0))
        );
        // A region in the south-west: its tiles only.
        assert_eq!(
            limits(TileMatrixSet::WorldCrs84Quad, 2, [-170.0, -80.0, -100.0, -50.0]),
            ((0, 1), (3, 3))
        );
    }

    #[test]
    fn a_tile_box_is_its_share_of_the_set() {
        let at = TileAt {
            set: TileMatrixSet::WorldCrs84Quad,
            zoom: 1,
            row: 1,
            col: 3,
        };
        assert_eq!(at.bbox(), [90.0, -90.0, 180.0, 0.0]);
        let at = TileAt {
            set: TileMatrixSet::WebMercatorQuad,
            zoom: 1,
            row: 0,
            col: 0,
        };
        assert_eq!(at.bbox(), [-MERCATOR_HALF, 0.0, 0.0, MERCATOR_HALF]);
    }

    #[test]
    fn the_mercator_square_ends_at_its_latitude() {
        let [x, y] = to_mercator(180.0, 90.0);
        assert!(
            (x - MERCATOR_HALF).abs() < 1e-6 && (y - MERCATOR_HALF).abs() < 1e-6,
            "{x} {y}"
        );
        let [x, y] = to_mercator(-90.0, 0.0);
        assert!((x + MERCATOR_HALF / 2.0).abs() < 1e-6 && y.abs() < 1e-6, "{x} {y}");
    }
}
