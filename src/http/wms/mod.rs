//! WMS 1.3.0 (contract 3.3): `GetCapabilities`, `GetMap`,
//! `GetLegendGraphic` and `GetFeatureInfo` over the dataset's geo
//! variables, for QGIS, GDAL, OWSLib and web maps. OGC key-value requests:
//! parameter names are case-insensitive and unknown ones are ignored;
//! errors are XML `ServiceExceptionReport`s with the WMS code. A thin
//! adapter: a map's pixels sample the grid as a tile's do (engine
//! `geo::Sampling`), drawn by the same renderer.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use serde_json::Value;

use super::ows::{self, Fault, Params, PixelQuery};
use super::respond::{Answer, Checked};
use super::{ApiError, AppState};
use crate::encode::xml::escape;
use crate::engine::geo::{to_mercator, MapCrs, MapFrame, Sampling};
use crate::engine::labels::LabelQuery;
use crate::engine::render::{Colormap, Render, RenderRequest};
use crate::engine::{Dataset, Error, GeoVariable, Raster};
use crate::identity::{Caller, Permission};

/// The WMS route.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/datasets/{ds}/wms", get(wms))
        .route_layer(axum::middleware::from_fn(|request, next| {
            super::admit(request, next, |e| report(Fault::from(e)))
        }))
}

/// A fault as WMS reports it: a `ServiceExceptionReport` with its code.
fn report(fault: Fault) -> Response {
    let code = fault.1.map_or(String::new(), |c| format!(" code=\"{c}\""));
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ServiceExceptionReport version=\"1.3.0\" \
         xmlns=\"http://www.opengis.net/ogc\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
         xsi:schemaLocation=\"http://www.opengis.net/ogc http://schemas.opengis.net/wms/1.3.0/exceptions_1_3_0.xsd\">\n\
         <ServiceException{code}>{}</ServiceException>\n</ServiceExceptionReport>\n",
        escape(&fault.2)
    );
    ows::exception(fault.0, "text/xml", body)
}

/// `GET /v1/datasets/{ds}/wms?SERVICE=WMS&REQUEST=...`.
async fn wms(
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
    match answer(&state, &caller, &ds, query.as_deref(), (&method, &headers)).await {
        // Maps and feature info are tagged before reading (`respond`).
        Ok(response) if response.headers().contains_key(header::ETAG) => response,
        Ok(response) => ows::with_etag(response, &headers).await,
        Err(e) => report(e),
    }
}

/// An unknown dataset or a denied request as a WMS exception report, with
/// the challenge (`WWW-Authenticate`) or `Retry-After` the API would send,
/// so a WMS client can ask its user for credentials.
pub(super) fn refused(error: ApiError) -> Response {
    ows::challenged(report(Fault(error.status(), None, error.to_string())), error)
}

async fn answer(
    state: &AppState,
    caller: &Caller,
    ds: &str,
    query: Option<&str>,
    (method, headers): (&Method, &HeaderMap),
) -> Result<Response, Fault> {
    let dataset = &state
        .dataset(ds, caller)
        .await
        .map_err(|e| Fault(e.status(), None, e.to_string()))?;
    let params = Params::parse(query);
    if let Some(service) = params.get("SERVICE") {
        if !service.eq_ignore_ascii_case("WMS") {
            return Err(Fault::bad(
                "InvalidParameterValue",
                format!("SERVICE={service}: this is a WMS"),
            ));
        }
    }
    let request = params.required("REQUEST")?;
    match request.to_ascii_lowercase().as_str() {
        "getcapabilities" => capabilities(dataset, ds, &super::absolute(state, headers, "")).await,
        "getmap" => get_map(state, dataset, &params, (method, headers)).await,
        "getlegendgraphic" => legend(state, dataset, &params).await,
        "getfeatureinfo" => feature_info(state, dataset, &params, (method, headers)).await,
        _ => Err(Fault::bad(
            "OperationNotSupported",
            format!("REQUEST={request}: use GetCapabilities, GetMap, GetLegendGraphic or GetFeatureInfo"),
        )),
    }
}

/// The styles: `raster/<colormap>` for each colormap.
fn style_colormap(style: Option<&str>) -> Result<Option<String>, Fault> {
    let Some(style) = style.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if style.eq_ignore_ascii_case("default") {
        return Ok(None);
    }
    let name = style.strip_prefix("raster/").unwrap_or(style);
    match Colormap::named(name) {
        Some(_) => Ok(Some(name.to_string())),
        None => Err(Fault::bad(
            "StyleNotDefined",
            format!(
                "style '{style}' is not known: use raster/<colormap> with one of {}",
                Colormap::names().join(", ")
            ),
        )),
    }
}

/// A map request's frame (the engine's [`MapFrame`]) from `CRS`, `BBOX`,
/// `WIDTH` and `HEIGHT`: each side at most `max_size` pixels.
fn frame(params: &Params, max_size: u32) -> Result<MapFrame, Fault> {
    let size = |name: &str| -> Result<u32, Fault> {
        let n: u32 = params
            .required(name)?
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| Fault::bad("InvalidParameterValue", format!("{name} must be a positive integer")))?;
        if n > max_size {
            return Err(Fault(
                StatusCode::BAD_REQUEST,
                None,
                format!("{name} {n} is more than wms_max_size = {max_size}"),
            ));
        }
        Ok(n)
    };
    let (width, height) = (size("WIDTH")?, size("HEIGHT")?);
    let name = params.get("CRS").or_else(|| params.get("SRS")).unwrap_or("CRS:84");
    let crs = MapCrs::named(name).ok_or_else(|| {
        Fault::bad(
            "InvalidCRS",
            format!("CRS {name} is not served: use CRS:84, EPSG:4326 or EPSG:3857"),
        )
    })?;
    let bad_box = || {
        Fault::bad(
            "InvalidParameterValue",
            "BBOX must be minx,miny,maxx,maxy with min < max",
        )
    };
    let numbers: Vec<f64> = params
        .required("BBOX")?
        .split(',')
        .map(|v| v.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad_box())?;
    let bbox: [f64; 4] = numbers.try_into().map_err(|_| bad_box())?;
    MapFrame::new(crs, bbox, width, height).ok_or_else(bad_box)
}

/// The fuzz property of the map parameters: any query gives a frame of
/// at most `wms_max_size` (here 256) pixels a side, one finite longitude a
/// column and latitude a row, or an exception report.
pub(crate) fn check_frame(query: &str) {
    let params = Params::parse(Some(query));
    if let Ok(frame) = frame(&params, 256) {
        assert!(frame.width <= 256 && frame.height <= 256, "{query:?}");
        assert_eq!(frame.lons.len(), frame.width as usize, "{query:?}");
        assert_eq!(frame.lats.len(), frame.height as usize, "{query:?}");
        assert!(frame.lons.iter().all(|l| (-180.0..=180.0).contains(l)), "{query:?}");
        assert!(frame.lats.iter().all(|l| l.is_finite()), "{query:?}");
    }
}

/// The drawing of a layer: its style's colormap over `COLORSCALERANGE`,
/// else the variable's default range (the same as its tiles').
async fn rendering(
    dataset: &Dataset,
    var: &GeoVariable,
    labels: &LabelQuery,
    params: &Params,
    colormap: Option<String>,
) -> Result<Render, Fault> {
    let request = RenderRequest {
        rescale: params
            .get("COLORSCALERANGE")
            .filter(|v| !v.is_empty())
            .map(str::to_string),
        colormap,
        nodata: None,
    };
    dataset.rendering(var, labels, &request).await.map_err(|e| match e {
        // A bad COLORSCALERANGE.
        Error::InvalidRequest(ref m) if m.contains("rescale") => {
            let status = super::ApiError::Engine(e.clone()).status();
            Fault(status, Some("InvalidParameterValue"), e.to_string())
        }
        // A dimension value that names no label, a read that failed.
        other => Fault::from(other),
    })
}

/// `GetMap`: the layer drawn on the requested frame.
async fn get_map(
    state: &AppState,
    dataset: &Dataset,
    params: &Params,
    (method, headers): (&Method, &HeaderMap),
) -> Result<Response, Fault> {
    let var = ows::layer(dataset, params.required("LAYERS")?).await?;
    if let Some(format) = params.get("FORMAT") {
        if !format.eq_ignore_ascii_case("image/png") && !format.is_empty() {
            return Err(Fault::bad(
                "InvalidFormat",
                format!("FORMAT {format}: only image/png is served"),
            ));
        }
    }
    let colormap = style_colormap(params.get("STYLES"))?;
    let frame = frame(params, state.wms_max_size)?;
    let labels = ows::dimension_labels(&var, params)?;
    // The pyramid level (if any) whose cells are no larger than a pixel.
    let level = dataset.pyramid_level(&var, frame.pixel_degrees).await?;
    let sampling = Sampling::new(&level.grid, &frame.lons, &frame.lats);
    let plan = match sampling.is_empty() {
        true => None,
        false => Some(dataset.plan_raster(&level, &sampling, &labels).await?),
    };
    let transparent = params
        .get("TRANSPARENT")
        .is_some_and(|t| t.eq_ignore_ascii_case("true"));
    let (width, height) = (frame.width, frame.height);
    let mut described = Answer::new(state, dataset, "wms-map", "image/png")
        .key(params.key())
        .bytes(u64::from(width) * u64::from(height) * 4);
    if let Some(plan) = &plan {
        described = described
            .plan(plan)
            .decodes(plan.decoded_bytes(), "ask for a smaller BBOX".into());
    }
    // Refused before the default colour range is worked out (it may read).
    described.refuse_oversize()?;
    let render = rendering(dataset, &var, &labels, params, colormap).await?;
    let described = described.key(format!("{:?}", render.rescale()));
    let ready = match described.check(method, headers).await? {
        Checked::Answered(response) => return Ok(response),
        Checked::Read(ready) => ready,
    };
    let _held = hold_pixels(dataset, width, height, MAP_BYTES_PER_PIXEL).await?;
    let raster = match &plan {
        None => Raster::off_grid(width as usize * height as usize),
        Some(plan) => {
            dataset
                .read_raster(&level, &sampling, plan, Some(ready.versions()))
                .await?
        }
    };
    let draw = move || {
        let mut picture = render.picture_of_cells(&raster.cells, &raster.pixels);
        if !transparent {
            // No data on an opaque map: white (BGCOLOR's default).
            picture.fill_transparent([255, 255, 255, 255]);
        }
        Ok(picture)
    };
    let png = super::picture::png(width, height, draw).await?;
    Ok(ready.whole(png))
}

fn png_response(png: Bytes) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("image/png"))],
        Body::from(png),
    )
        .into_response()
}

/// `GetLegendGraphic`: a vertical colour bar of the style, high values on top.
async fn legend(state: &AppState, dataset: &Dataset, params: &Params) -> Result<Response, Fault> {
    let var = ows::layer(
        dataset,
        params.get("LAYER").or_else(|| params.get("LAYERS")).unwrap_or(""),
    )
    .await?;
    let colormap = style_colormap(params.get("STYLE").or_else(|| params.get("STYLES")))?;
    let size = |name: &str, default: u32| -> Result<u32, Fault> {
        match params.get(name).filter(|v| !v.is_empty()) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=state.wms_max_size).contains(n))
                .ok_or_else(|| Fault::bad("InvalidParameterValue", format!("{name} {v}"))),
        }
    };
    let (width, height) = (size("WIDTH", 20)?, size("HEIGHT", 256)?);
    let labels = ows::dimension_labels(&var, params)?;
    let render = rendering(dataset, &var, &labels, params, colormap).await?;
    let (lo, hi) = render.rescale().unwrap_or((0.0, 1.0));
    // One value a row, each pixel of a row pointing at it: the bar costs
    // five bytes a pixel, held under the answer budget like a map.
    let _held = hold_pixels(dataset, width, height, LEGEND_BYTES_PER_PIXEL).await?;
    let rows: Vec<f64> = (0..height)
        .map(|row| match height {
            1 => hi,
            _ => lo + f64::from(height - 1 - row) / f64::from(height - 1) * (hi - lo),
        })
        .collect();
    let pixels: Vec<u32> = (0..height)
        .flat_map(|row| std::iter::repeat_n(row, width as usize))
        .collect();
    let png = super::picture::png(width, height, move || Ok(render.picture_of_cells(&rows, &pixels))).await?;
    Ok(png_response(png))
}

/// Bytes a `GetMap` pixel may hold while it is drawn: its cell index (4),
/// its sampled position (up to 12 on a projected grid), its cell's value
/// (8 when every pixel shows its own cell) and its colour (4).
const MAP_BYTES_PER_PIXEL: u64 = 28;
/// Bytes a legend pixel holds: its row index (4) and colour (1).
const LEGEND_BYTES_PER_PIXEL: u64 = 5;

/// A share of the answer budget (`slab_budget_bytes`) for a picture of
/// `width` by `height` pixels while it is drawn, so that many large maps
/// at once wait for memory (then 503) instead of all allocating it.
async fn hold_pixels(
    dataset: &Dataset,
    width: u32,
    height: u32,
    bytes_per_pixel: u64,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, Fault> {
    let bytes = u64::from(width) * u64::from(height) * bytes_per_pixel;
    Ok(dataset.resources().hold_answer_bytes(bytes as usize).await?)
}

/// `GetFeatureInfo`: the value under pixel (`I`, `J`) of the map `GetMap`
/// would draw.
async fn feature_info(
    state: &AppState,
    dataset: &Dataset,
    params: &Params,
    asked: (&Method, &HeaderMap),
) -> Result<Response, Fault> {
    let var = ows::layer(dataset, params.required("QUERY_LAYERS")?).await?;
    // The map the client shows is one GetMap could draw: the same size limit.
    let frame = frame(params, state.wms_max_size)?;
    let query = PixelQuery::of(var, frame, params, params.get("INFO_FORMAT"))?;
    ows::feature_info(state, dataset, query, asked).await
}

/// `GetCapabilities`: every geo variable of the dataset as a layer.
async fn capabilities(dataset: &Dataset, ds: &str, origin: &str) -> Result<Response, Fault> {
    let origin = if origin.is_empty() { "http://localhost" } else { origin };
    let url = escape(&format!("{origin}/v1/datasets/{ds}/wms?"));
    let variables = dataset.geo_variables().await?;
    let mut layers = String::new();
    let mut all = [180.0f64, 90.0, -180.0, -90.0];
    for var in &variables {
        let [w, s, e, n] = var.grid.bounds();
        all = [all[0].min(w), all[1].min(s), all[2].max(e), all[3].max(n)];
        layers.push_str(&layer_xml(dataset, var, &url).await?);
    }
    if variables.is_empty() {
        all = [-180.0, -90.0, 180.0, 90.0];
    }
    let title = escape(dataset.description.as_deref().unwrap_or(ds));
    let mut xml = String::new();
    let _ = write!(
        xml,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<WMS_Capabilities version="1.3.0" xmlns="http://www.opengis.net/wms" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.opengis.net/wms http://schemas.opengis.net/wms/1.3.0/capabilities_1_3_0.xsd">
<Service><Name>WMS</Name><Title>{title}</Title><OnlineResource xlink:type="simple" xlink:href="{url}"/></Service>
<Capability>
<Request>
<GetCapabilities><Format>text/xml</Format>{dcp}</GetCapabilities>
<GetMap><Format>image/png</Format>{dcp}</GetMap>
<GetFeatureInfo><Format>application/json</Format><Format>text/plain</Format>{dcp}</GetFeatureInfo>
</Request>
<Exception><Format>XML</Format></Exception>
<Layer><Title>{title}</Title><CRS>CRS:84</CRS><CRS>EPSG:4326</CRS><CRS>EPSG:3857</CRS>
{bbox}
{layers}</Layer>
</Capability>
</WMS_Capabilities>
"#,
        dcp = format_args!(
            r#"<DCPType><HTTP><Get><OnlineResource xlink:type="simple" xlink:href="{url}"/></Get></HTTP></DCPType>"#
        ),
        bbox = geographic_box(all),
    );
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"))], xml).into_response())
}

fn geographic_box([w, s, e, n]: [f64; 4]) -> String {
    format!(
        "<EX_GeographicBoundingBox><westBoundLongitude>{w}</westBoundLongitude><eastBoundLongitude>{e}</eastBoundLongitude>\
         <southBoundLatitude>{s}</southBoundLatitude><northBoundLatitude>{n}</northBoundLatitude></EX_GeographicBoundingBox>"
    )
}

/// One `Layer` element.
async fn layer_xml(dataset: &Dataset, var: &GeoVariable, url: &str) -> Result<String, Fault> {
    let attrs = var
        .node
        .metadata
        .as_ref()
        .map(|m| m.attributes().clone())
        .unwrap_or(Value::Null);
    let name = escape(&var.node.path);
    let title = escape(attrs.get("long_name").and_then(Value::as_str).unwrap_or(&var.node.path));
    let [w, s, e, n] = var.grid.bounds();
    let (ew, ee) = if w <= e { (w, e) } else { (-180.0, 180.0) };
    let [mx0, my0] = to_mercator(ew, s);
    let [mx1, my1] = to_mercator(ee, n);
    let mut xml = format!(
        "<Layer queryable=\"1\"><Name>{name}</Name><Title>{title}</Title>{}\
         <BoundingBox CRS=\"CRS:84\" minx=\"{ew}\" miny=\"{s}\" maxx=\"{ee}\" maxy=\"{n}\"/>\
         <BoundingBox CRS=\"EPSG:4326\" minx=\"{s}\" miny=\"{ew}\" maxx=\"{n}\" maxy=\"{ee}\"/>\
         <BoundingBox CRS=\"EPSG:3857\" minx=\"{mx0}\" miny=\"{my0}\" maxx=\"{mx1}\" maxy=\"{my1}\"/>",
        geographic_box([w, s, e, n])
    );
    for dim in ows::layer_dimensions(dataset, var).await? {
        let _ = write!(
            xml,
            "<Dimension name=\"{}\" units=\"{}\" default=\"{}\">{}</Dimension>",
            dim.kind,
            escape(&dim.units),
            escape(&dim.default),
            escape(&dim.values.join(","))
        );
    }
    for colormap in Colormap::names() {
        let legend = format!(
            "{url}SERVICE=WMS&REQUEST=GetLegendGraphic&LAYER={}&STYLE=raster/{colormap}",
            var.node.path
        );
        let _ = write!(
            xml,
            "<Style><Name>raster/{colormap}</Name><Title>{colormap}</Title>\
             <LegendURL width=\"20\" height=\"256\"><Format>image/png</Format>\
             <OnlineResource xlink:type=\"simple\" xlink:href=\"{}\"/></LegendURL></Style>",
            escape(&legend)
        );
    }
    xml.push_str("</Layer>\n");
    Ok(xml)
}
