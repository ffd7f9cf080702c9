//! The explorer (contract 2.7): HTML pages over the same node documents and
//! region reads every client uses, with the same authentication. `GET /`
//! from a browser lists the datasets; `/explore/{ds}/{path}` shows a
//! group's children or an array's metadata, and for numeric arrays of two
//! or more dimensions a PNG preview with a control per extra dimension,
//! a colormap and rescale choice, and the curl command and Python that
//! fetch what is shown. Pages are rendered here; `explorer.js` only
//! updates the preview when a control changes. Every asset is built in.

mod html;

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::Method;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;

pub(super) use self::html::url_path;
use self::html::{definitions, escape, explore_href, page};
use super::format::accept_items;
use super::nodes::document_bytes;
use super::problem::ApiError;
use super::respond::{Answer, Checked};
use super::AppState;
use crate::encode::json::json_body;
use crate::engine::render::{self, Colormap};
use crate::engine::{DataType, Dataset, GeoVariable, ReadPlan, ReadQuery, Selection, Versions};
use crate::identity::Caller;

/// The longest side of the preview, in pixels: larger arrays are coarsened to fit.
const PREVIEW_SIDE: u64 = 512;
/// A dimension gets a label picker when its coordinate has at most this many labels.
const MAX_PICKER_LABELS: u64 = 2000;
/// A group page describes at most this many children (type, shape, data type).
const MAX_DESCRIBED: usize = 500;
/// Above this many elements a preview picks every n-th element instead of
/// averaging blocks (which would read the whole slice).
const MAX_AVERAGED: u64 = 1 << 24;
/// How many values the table of a 0-d or 1-D array shows.
const TABLE_VALUES: u64 = 100;
/// Pages and scripts come from this origin only; previews may be blobs.
const CSP: &str = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; \
                   object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The explorer's routes.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", any(index))
        .route("/explore", get(datasets_page))
        .route("/explore/", get(datasets_page))
        .merge(
            // A node's page may read a preview of its values.
            Router::new()
                .route("/explore/{ds}", get(root_page))
                .route("/explore/{ds}/", get(root_page))
                .route("/explore/{ds}/{*path}", get(node_page))
                .route_layer(axum::middleware::from_fn(super::read_slot)),
        )
        .route("/explore-assets/{file}", get(asset))
        .route("/favicon.ico", get(favicon))
}

/// `GET /`: the explorer for a browser (`Accept: text/html`); other
/// clients get what they always got, a 404 naming the API description.
async fn index(state: State<Arc<AppState>>, caller: Caller, method: Method, headers: HeaderMap) -> Response {
    let wants_html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept_items(accept).any(|(media, q)| q > 0.0 && media == "text/html"));
    let mut response = match (wants_html, method) {
        (true, Method::GET) => datasets_page(state, caller).await.into_response(),
        _ => ApiError::NotFound("no such route; see /openapi.yaml".into()).into_response(),
    };
    // The answer depends on Accept: caches must keep them apart.
    response
        .headers_mut()
        .append(header::VARY, HeaderValue::from_static("accept"));
    response
}

/// The datasets this request may read.
async fn datasets_page(State(state): State<Arc<AppState>>, caller: Caller) -> Result<Response, ApiError> {
    let mut rows = String::new();
    for dataset in state.readable_datasets(&caller) {
        let _ = writeln!(
            rows,
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td></tr>",
            escape(&explore_href(&dataset.name, "")),
            escape(&dataset.name),
            escape(dataset.description.as_deref().unwrap_or("")),
        );
    }
    let main = format!(
        "<h1>Datasets</h1>\n<table>\n<caption>Datasets this server serves</caption>\n\
         <thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Description</th></tr></thead>\n\
         <tbody>\n{rows}</tbody>\n</table>\n"
    );
    Ok(html_response(page("Datasets", &[("Datasets".into(), None)], &main)))
}

async fn root_page(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    explore(&state, &caller, &ds, "", (&method, &headers)).await
}

async fn node_page(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, path)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    explore(&state, &caller, &ds, path.trim_end_matches('/'), (&method, &headers)).await
}

/// The page of one node: a group's children, or an array's metadata and
/// preview. An array's page (which may show its first values) goes through
/// the response pipeline: tagged by its metadata and the versions of the
/// values it shows, 304 and HEAD without reading them.
async fn explore(
    state: &AppState,
    caller: &Caller,
    ds: &str,
    path: &str,
    (method, headers): (&Method, &HeaderMap),
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(ds, caller).await?;
    let doc = document(dataset, path).await?;
    let name = path.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or(ds);
    if doc["node_type"].as_str() != Some("array") {
        let main = group_main(dataset, path, &doc).await?;
        return Ok(html_response(page(name, &breadcrumb(ds, path), &main)));
    }
    let origin = origin(state, headers);
    let table = table_plan(dataset, path, &doc).await;
    // The pickers' labels are part of the page: they are in its tag (read
    // through the coordinate cache, as fresh as the metadata).
    let labels = picker_labels(dataset, path, &doc_shape(&doc)).await;
    let mut described = Answer::new(state, dataset, "explorer", "text/html; charset=utf-8")
        .key(path)
        .key(doc.to_string())
        .key(format!("{labels:?}"))
        .key(&origin);
    if let Some(Ok(plan)) = &table {
        described = described.plan(plan);
    }
    let ready = match described.check(method, headers).await? {
        Checked::Answered(response) => return Ok(with_page_headers(response)),
        Checked::Read(ready) => ready,
    };
    let table = table.map(|plan| (plan, ready.versions()));
    let main = array_main(dataset, path, (&doc, &labels), &origin, table).await;
    let body = page(name, &breadcrumb(ds, path), &main);
    Ok(with_page_headers(ready.whole(Bytes::from(body))))
}

async fn document(dataset: &Dataset, path: &str) -> Result<Value, ApiError> {
    let bytes = document_bytes(dataset, path).await?;
    Ok(serde_json::from_slice(&bytes).expect("node documents are JSON"))
}

/// Datasets / ds / each ancestor / this node.
fn breadcrumb(ds: &str, path: &str) -> Vec<(String, Option<String>)> {
    let mut crumbs = vec![("Datasets".to_string(), Some("/explore".to_string()))];
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    crumbs.push((ds.to_string(), (!segments.is_empty()).then(|| explore_href(ds, ""))));
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let href = (!last).then(|| explore_href(ds, &segments[..=i].join("/")));
        crumbs.push((segment.to_string(), href));
    }
    crumbs
}

/// A group: its attributes and a table of its children with their type,
/// shape and data type.
async fn group_main(dataset: &Dataset, path: &str, doc: &Value) -> Result<String, ApiError> {
    let children: Vec<(String, String)> = doc["children"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| {
                    let name = c["name"].as_str().unwrap_or_default().to_string();
                    let path = c["path"]
                        .as_str()
                        .unwrap_or_default()
                        .trim_start_matches('/')
                        .to_string();
                    (name, path)
                })
                .collect()
        })
        .unwrap_or_default();
    // Beyond MAX_DESCRIBED children, the listing's node type alone.
    let paths: Vec<String> = children
        .iter()
        .take(MAX_DESCRIBED)
        .map(|(_, child)| child.clone())
        .collect();
    let docs: Vec<Result<Value, ApiError>> = futures::stream::iter(paths)
        .map(|child| async move { document(dataset, &child).await })
        .buffered(16)
        .collect()
        .await;
    let mut rows = String::new();
    let listed_types: Vec<String> = doc["children"]
        .as_array()
        .map(|c| c.iter().map(|c| value_text(&c["node_type"])).collect())
        .unwrap_or_default();
    let docs = docs.into_iter().map(Some).chain(std::iter::repeat_with(|| None));
    for (((name, child), doc), listed) in children.iter().zip(docs).zip(&listed_types) {
        let (kind, shape, data_type) = match &doc {
            None => (listed.as_str(), String::new(), String::new()),
            Some(doc) => match doc {
                Ok(d) if d["node_type"] == "array" => (
                    if d["readable"] == false {
                        "array (unreadable)"
                    } else {
                        "array"
                    },
                    shape_text(&d["shape"]),
                    value_text(&d["data_type"]),
                ),
                Ok(_) => ("group", String::new(), String::new()),
                Err(e) => ("unreadable", String::new(), e.to_string()),
            },
        };
        let _ = writeln!(
            rows,
            "<tr><td><a href=\"{}\">{}</a></td><td>{kind}</td><td>{}</td><td>{}</td></tr>",
            escape(&explore_href(&dataset.name, child)),
            escape(name),
            escape(&shape),
            escape(&data_type),
        );
    }
    let title = if path.is_empty() {
        dataset.name.to_string()
    } else {
        path.to_string()
    };
    Ok(format!(
        "<h1>{} <span class=\"kind\">group</span></h1>\n\
         <table>\n<caption>Children</caption>\n<thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Type</th>\
         <th scope=\"col\">Shape</th><th scope=\"col\">Data type</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n\
         <h2>Attributes</h2>\n<pre class=\"json\">{}</pre>\n{}",
        escape(&title),
        escape(&pretty(&doc["attributes"])),
        api_links(&dataset.name, path, None),
    ))
}

/// An array: metadata as text; a preview of numeric arrays of two or more
/// dimensions, or a table of the first values of 0-d and 1-D arrays.
async fn array_main(
    dataset: &Dataset,
    path: &str,
    (doc, labels): (&Value, &PickerLabels),
    origin: &str,
    table: Option<(Result<ReadPlan, crate::engine::Error>, &Versions)>,
) -> String {
    let shape = doc_shape(doc);
    let names: Vec<Option<String>> = doc["dimension_names"]
        .as_array()
        .map(|n| n.iter().map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let mut items = vec![
        ("Shape", shape_text(&doc["shape"])),
        ("Data type", value_text(&doc["data_type"])),
        ("Chunk shape", shape_text(&doc["chunk_shape"])),
        ("Read chunk shape", shape_text(&doc["read_chunk_shape"])),
        ("Chunk grid", shape_text(&doc["chunk_grid_shape"])),
        (
            "Dimension names",
            names
                .iter()
                .map(|n| n.clone().unwrap_or_else(|| "(unnamed)".into()))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("Fill value", doc["fill_value"].to_string()),
        ("Zarr format", doc["zarr_format"].to_string()),
    ];
    if let Some(reason) = doc["unreadable_reason"].as_str() {
        items.push(("Unreadable", reason.to_string()));
    }
    let mut out = format!(
        "<h1>{} <span class=\"kind\">array</span></h1>\n<div class=\"array-layout\">\n\
         <section aria-labelledby=\"metadata\">\n<h2 id=\"metadata\">Metadata</h2>\n{}\
         <h3>Codecs</h3>\n{}<h3>Attributes</h3>\n<pre class=\"json\">{}</pre>\n{}</section>\n",
        escape(if path.is_empty() { &dataset.name } else { path }),
        definitions(&items),
        codec_list(&doc["codecs"]),
        escape(&pretty(&doc["attributes"])),
        api_links(&dataset.name, path, doc["zarr_format"].as_u64()),
    );
    let readable = doc["readable"] != false;
    let data_type = doc["data_type"].as_str().unwrap_or_default();
    let real = DataType::from_json(&doc["data_type"]).is_ok_and(|t| render::check(t, &[1, 1]).is_ok());
    if readable && shape.len() >= 2 && real && !shape.contains(&0) {
        // Packed CF data is shown unpacked, its fill values transparent.
        let cf = ["scale_factor", "add_offset", "_FillValue", "missing_value"]
            .iter()
            .any(|k| doc["attributes"].get(k).is_some());
        out.push_str(&preview(
            dataset,
            path,
            (&shape, &names, labels),
            (data_type, cf),
            origin,
        ));
        if let Ok(var) = dataset.geo_variable(path).await {
            out.push_str(&map_section(&dataset.name, path, &var, origin));
        }
    } else if let Some((plan, pinned)) = table {
        out.push_str(&values_table(dataset, plan, pinned, (&shape, &names)).await);
    }
    out.push_str("</div>\n");
    out
}

/// A geo variable's map (contract 3.3): Leaflet over its Web Mercator
/// tiles, the colour bar and the value under the cursor from WMS, and the
/// addresses to paste into QGIS, GDAL or a web map. `map.js` follows the
/// preview's controls.
fn map_section(ds: &str, path: &str, var: &GeoVariable, origin: &str) -> String {
    let [west, south, east, north] = var.grid.bounds();
    let ds_url = url_path(ds);
    // A path, its segments encoded, is a query value too.
    let layer = url_path(path);
    let tilejson = format!("/v1/datasets/{ds_url}/tiles/WebMercatorQuad/tilejson.json?variable={layer}");
    let wms = format!("/v1/datasets/{ds_url}/wms");
    let legend = format!("{wms}?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetLegendGraphic&LAYER={layer}&WIDTH=20&HEIGHT=256");
    let template = format!("{origin}/v1/datasets/{ds_url}/tiles/WebMercatorQuad/{{z}}/{{y}}/{{x}}?variable={layer}");
    let capabilities = format!("{origin}{wms}?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities");
    let wmts = format!("{origin}/v1/datasets/{ds_url}/wmts/1.0.0/WMTSCapabilities.xml");
    format!(
        "<section id=\"map\" class=\"map\" aria-labelledby=\"map-title\" data-layer=\"{path_attr}\" \
         data-tilejson=\"{tilejson_attr}\" data-wms=\"{wms_attr}\" data-bounds=\"{west},{south},{east},{north}\">\n\
         <h2 id=\"map-title\">Map</h2>\n<link rel=\"stylesheet\" href=\"/explore-assets/leaflet.css\">\n\
         <div class=\"map-row\"><div id=\"map-view\" class=\"map-view\" role=\"application\" \
         aria-label=\"{label}\"></div>\n<img id=\"map-legend\" class=\"legend\" src=\"{legend_attr}\" width=\"20\" \
         height=\"256\" alt=\"Colour bar: high values at the top\"></div>\n\
         <p>Value under the cursor: <output id=\"map-value\" aria-live=\"polite\">move over the map</output></p>\n\
         <h3>Open it elsewhere</h3>\n<dl class=\"meta\">\n\
         <dt>TileJSON (Leaflet, OpenLayers, MapLibre)</dt><dd><code>{origin_attr}{tilejson_attr}</code></dd>\n\
         <dt>XYZ tiles (QGIS, GDAL)</dt><dd><code id=\"map-xyz\">{template_attr}</code></dd>\n\
         <dt>WMS 1.3.0 (QGIS, GDAL, OWSLib)</dt><dd><code>{capabilities_attr}</code></dd>\n\
         <dt>WMTS 1.0.0 (QGIS, GDAL, OpenLayers, ArcGIS)</dt><dd><code>{wmts_attr}</code></dd>\n</dl>\n\
         <script src=\"/explore-assets/leaflet.js\" defer></script>\n\
         <script src=\"/explore-assets/map.js\" defer></script>\n</section>\n",
        path_attr = escape(path),
        tilejson_attr = escape(&tilejson),
        wms_attr = escape(&wms),
        legend_attr = escape(&legend),
        label = escape(&format!("Map of {path}")),
        origin_attr = escape(origin),
        template_attr = escape(&template),
        capabilities_attr = escape(&capabilities),
        wmts_attr = escape(&wmts),
    )
}

/// Each codec on a line: its name, then its configuration as compact JSON.
fn codec_list(codecs: &Value) -> String {
    let Some(codecs) = codecs.as_array() else {
        return format!("<pre class=\"json\">{}</pre>\n", escape(&codecs.to_string()));
    };
    let mut out = String::from("<ol class=\"codecs\">");
    for codec in codecs {
        let name = codec["name"].as_str().or_else(|| codec["id"].as_str()).unwrap_or("?");
        let configuration = match codec.get("configuration") {
            Some(c) => c.to_string(),
            None => {
                let mut rest = codec.clone();
                if let Some(map) = rest.as_object_mut() {
                    map.remove("name");
                    map.remove("id");
                }
                if rest.as_object().is_some_and(|m| m.is_empty()) {
                    String::new()
                } else {
                    rest.to_string()
                }
            }
        };
        let _ = write!(out, "<li><code>{}</code> {}</li>", escape(name), escape(&configuration));
    }
    out.push_str("</ol>\n");
    out
}

/// The preview section: controls, the picture, and how to fetch it.
fn preview(
    dataset: &Dataset,
    path: &str,
    (shape, names, labels): (&[u64], &[Option<String>], &PickerLabels),
    (data_type, cf): (&str, bool),
    origin: &str,
) -> String {
    let rank = shape.len();
    let decode = if cf { "&decode=cf" } else { "" };
    let data_type = if cf { "float64" } else { data_type };
    let (height, width) = (shape[rank - 2], shape[rank - 1]);
    let factor = |n: u64| n.div_ceil(PREVIEW_SIDE).max(1);
    let (fy, fx) = (factor(height), factor(width));
    // Shown at most PREVIEW_SIDE on its longer side, small arrays enlarged.
    let scale = PREVIEW_SIDE as f64 / height.max(width) as f64;
    let (show_w, show_h) = (
        ((width as f64 * scale).round() as u64).max(1),
        ((height as f64 * scale).round() as u64).max(1),
    );
    let api = format!("/v1/datasets/{}/data/{}", url_path(&dataset.name), url_path(path));
    let mut controls = String::new();
    for d in 0..rank - 2 {
        let name = names
            .get(d)
            .cloned()
            .flatten()
            .unwrap_or_else(|| format!("dimension {d}"));
        let _ = write!(
            controls,
            "<div class=\"control\"><label for=\"dim-{d}\">{} (index, 0 to {})</label>\
             <input type=\"range\" id=\"dim-{d}\" data-dim=\"{d}\" min=\"0\" max=\"{}\" value=\"0\" step=\"1\">\
             <output id=\"dim-{d}-value\" for=\"dim-{d}\">0</output>",
            escape(&name),
            shape[d] - 1,
            shape[d] - 1,
        );
        if let Some(labels) = &labels[d] {
            let _ = write!(
                controls,
                "<label for=\"dim-{d}-label\">{} (label)</label><select id=\"dim-{d}-label\" data-label-for=\"{d}\"{}>",
                escape(&name),
                match names.get(d).cloned().flatten() {
                    Some(n) => format!(" data-name=\"{}\"", escape(&n)),
                    None => String::new(),
                }
            );
            for (i, label) in labels.iter().enumerate() {
                let _ = write!(controls, "<option value=\"{i}\">{}</option>", escape(label));
            }
            controls.push_str("</select>");
        }
        controls.push_str("</div>\n");
    }
    let mut options = String::new();
    for name in colormaps() {
        let _ = write!(options, "<option value=\"{name}\">{name}</option>");
    }
    // Shrunk by block means, or for a huge slice by taking every n-th
    // element (a mean would read all of it on every page view).
    let shrink = fy > 1 || fx > 1;
    let strided = shrink && height * width > MAX_AVERAGED;
    let tail = match strided {
        true => format!("::{fy},::{fx}"),
        false => ":,:".to_string(),
    };
    let select = std::iter::repeat_n("0".to_string(), rank - 2)
        .chain([tail.clone()])
        .collect::<Vec<_>>()
        .join(",");
    let coarsen_factors = match shrink && !strided {
        true => format!("{fy},{fx}"),
        false => String::new(),
    };
    let coarsen = match coarsen_factors.as_str() {
        "" => String::new(),
        factors => format!("&coarsen={factors}"),
    };
    let src = format!(
        "{api}?select={select}{coarsen}{decode}&format=png&colormap={}",
        colormaps()[0]
    );
    let curl = format!("curl -o preview.png '{origin}{src}'");
    let python = python_snippet(origin, &api, &select, (data_type, cf));
    format!(
        "<section id=\"preview\" aria-labelledby=\"preview-title\" data-api=\"{api}\" data-path=\"{path_attr}\" \
         data-dtype=\"{data_type}\" data-decode=\"{decode_attr}\" data-coarsen=\"{coarsen_factors}\" data-tail=\"{tail_attr}\">\n<h2 id=\"preview-title\">Preview</h2>\n\
         <form id=\"controls\" class=\"controls\">\n{controls}\
         <div class=\"control\"><label for=\"colormap\">Colormap</label><select id=\"colormap\">{options}</select></div>\n\
         <div class=\"control\"><label for=\"rescale-lo\">Rescale from</label>\
         <input type=\"number\" id=\"rescale-lo\" step=\"any\" placeholder=\"auto\">\
         <label for=\"rescale-hi\">to</label><input type=\"number\" id=\"rescale-hi\" step=\"any\" placeholder=\"auto\"></div>\n\
         </form>\n<figure>\n<img id=\"preview-img\" src=\"{src_attr}\" width=\"{show_w}\" height=\"{show_h}\" \
         alt=\"{alt}\">\n<figcaption id=\"preview-caption\">{caption}</figcaption>\n</figure>\n\
         <h3>Fetch what is shown</h3>\n<p>The picture:</p>\n<pre><code id=\"curl\">{curl}</code></pre>\n\
         <p>The values of this slice, with Python:</p>\n<pre><code id=\"python\">{python}</code></pre>\n</section>\n",
        api = escape(&api),
        path_attr = escape(path),
        data_type = escape(data_type),
        decode_attr = if cf { "cf" } else { "" },
        tail_attr = escape(&tail),
        src_attr = escape(&src),
        alt = escape(&format!("{path}[{select}] drawn with viridis")),
        caption = escape(&format!(
            "select={select}{}; transparent: NaN",
            match (coarsen.is_empty(), strided) {
                (false, _) => format!(", block means of {fy}×{fx}"),
                (true, true) => format!(", every {fy}th row and {fx}th column"),
                (true, false) => String::new(),
            }
        )),
        curl = escape(&curl),
        python = escape(&python),
    )
}

/// The built-in colormaps, the explorer's default (viridis) first.
fn colormaps() -> Vec<&'static str> {
    let mut names = Colormap::names();
    names.sort_by_key(|n| *n != "viridis");
    names
}

/// Each dimension's picker labels, where it has them.
type PickerLabels = [Option<Vec<String>>];

/// The labels of each dimension with a coordinate of at most
/// [`MAX_PICKER_LABELS`] labels.
async fn picker_labels(dataset: &Dataset, path: &str, shape: &[u64]) -> Vec<Option<Vec<String>>> {
    let mut out = vec![None; shape.len()];
    // The two drawn dimensions get no picker.
    for (d, &len) in shape.iter().enumerate().take(shape.len().saturating_sub(2)) {
        if len > MAX_PICKER_LABELS {
            continue;
        }
        if let Ok(Some(labels)) = dataset.dimension_labels(path, d).await {
            out[d] = Some(labels.iter().map(value_text).collect());
        }
    }
    out
}

fn python_snippet(origin: &str, api: &str, select: &str, (data_type, cf): (&str, bool)) -> String {
    let decode = if cf { ", \"decode\": \"cf\"" } else { "" };
    format!(
        "import io\nimport numpy as np\nimport requests\n\n\
         r = requests.get(\"{origin}{api}\", params={{\"select\": \"{select}\"{decode}, \"format\": \"npy\"}})\n\
         r.raise_for_status()\na = np.load(io.BytesIO(r.content))  # {data_type}\nprint(a.shape, np.nanmin(a), np.nanmax(a))"
    )
}

/// The read of the first values of a readable 0-d or 1-D array.
/// An array's shape, from its node document.
fn doc_shape(doc: &Value) -> Vec<u64> {
    doc["shape"]
        .as_array()
        .map(|s| s.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

async fn table_plan(dataset: &Dataset, path: &str, doc: &Value) -> Option<Result<ReadPlan, crate::engine::Error>> {
    let shape = doc_shape(doc);
    if doc["readable"] == false || shape.len() > 1 {
        return None;
    }
    let selection = match shape.first() {
        Some(&n) => format!("0:{}", n.min(TABLE_VALUES)),
        None => String::new(),
    };
    let plan = async {
        let query = ReadQuery {
            selection: Selection::parse(&selection)?,
            ..ReadQuery::default()
        };
        dataset.plan_query(path, &query).await
    };
    Some(plan.await)
}

/// The first values of a 0-d or 1-D array, with their coordinate labels.
async fn values_table(
    dataset: &Dataset,
    plan: Result<ReadPlan, crate::engine::Error>,
    pinned: &Versions,
    (shape, names): (&[u64], &[Option<String>]),
) -> String {
    let read = async {
        let plan = plan?;
        let (data, _) = dataset.read_pinned(&plan, Some(pinned)).await?;
        let labels = dataset.result_coords(&plan).await?;
        let text = json_body(plan.data_type(), &plan.output_shape(), &data, Some(&labels))
            .map_err(|reason| crate::engine::Error::corrupt(plan.node().path.clone(), reason))?;
        Ok::<Value, crate::engine::Error>(serde_json::from_str(&text).expect("a JSON document"))
    };
    let body = match read.await {
        Ok(body) => body,
        Err(e) => return format!("<h2>Values</h2>\n<p class=\"error\">{}</p>\n", escape(&e.to_string())),
    };
    let name = names.first().cloned().flatten();
    let coords = name
        .as_ref()
        .and_then(|n| body["coords"].get(n))
        .and_then(Value::as_array);
    let values: Vec<Value> = match &body["data"] {
        Value::Array(items) => items.clone(),
        scalar => vec![scalar.clone()],
    };
    let label_head = if coords.is_some() {
        "<th scope=\"col\">Label</th>"
    } else {
        ""
    };
    let mut rows = String::new();
    for (i, value) in values.iter().enumerate() {
        let label = coords
            .and_then(|c| c.get(i))
            .map(|l| format!("<td>{}</td>", escape(&value_text(l))))
            .unwrap_or_default();
        let _ = writeln!(
            rows,
            "<tr><td>{i}</td>{label}<td>{}</td></tr>",
            escape(&value_text(value))
        );
    }
    let caption = match shape.first() {
        Some(&n) if n > TABLE_VALUES => format!("The first {TABLE_VALUES} of {n} values"),
        Some(&n) => format!("All {n} values"),
        None => "The value".to_string(),
    };
    format!(
        "<section aria-labelledby=\"values\"><h2 id=\"values\">Values</h2>\n<table id=\"values-table\">\n\
         <caption>{caption}</caption>\n<thead><tr><th scope=\"col\">Index</th>{label_head}\
         <th scope=\"col\">Value</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n</section>\n"
    )
}

/// Links to the same node in the API; an array's stored metadata
/// (`zarr.json`, or `.zarray` for Zarr v2) when `array_format` is given.
fn api_links(ds: &str, path: &str, array_format: Option<u64>) -> String {
    let (ds, path) = (url_path(ds), url_path(path));
    let node = match path.as_str() {
        "" => format!("/v1/datasets/{ds}/nodes"),
        p => format!("/v1/datasets/{ds}/nodes/{p}"),
    };
    let mut links = format!("<li><a href=\"{}\">Node document (JSON)</a></li>", escape(&node));
    if array_format.is_none() {
        // A group is an OPeNDAP dataset: its URL opens in netCDF tools and pydap.
        let dap = match path.as_str() {
            "" => format!("/v1/datasets/{ds}/dap"),
            p => format!("/v1/datasets/{ds}/dap/{p}"),
        };
        let _ = write!(
            links,
            "<li>OPeNDAP DAP2 dataset <code>{}</code>: <a href=\"{}.dds\">DDS</a>, <a href=\"{}.das\">DAS</a></li>",
            escape(&dap),
            escape(&dap),
            escape(&dap),
        );
        let dap4 = match path.as_str() {
            "" => format!("/v1/datasets/{ds}/dap4"),
            p => format!("/v1/datasets/{ds}/dap4/{p}"),
        };
        let _ = write!(
            links,
            "<li>OPeNDAP DAP4 dataset <code>{}</code> (<code>dap4://</code> in netCDF-C): <a href=\"{}.dmr\">DMR</a>, <a href=\"{}.dsr\">DSR</a></li>",
            escape(&dap4),
            escape(&dap4),
            escape(&dap4),
        );
        // The dataset's maps: every geo variable a WMTS layer.
        let wmts = format!("/v1/datasets/{ds}/wmts/1.0.0/WMTSCapabilities.xml");
        let _ = write!(
            links,
            "<li>WMTS 1.0.0 (the dataset's geo variables): <a href=\"{}\">capabilities</a></li>",
            escape(&wmts)
        );
    }
    if let Some(format) = array_format {
        let file = if format == 2 { ".zarray" } else { "zarr.json" };
        let key = if path.is_empty() {
            file.to_string()
        } else {
            format!("{path}/{file}")
        };
        let zarr = format!("/v1/datasets/{ds}/zarr/{key}");
        let _ = write!(links, "<li><a href=\"{}\">Stored metadata</a></li>", escape(&zarr));
    }
    format!("<h2>In the API</h2>\n<ul class=\"links\">{links}</ul>\n")
}

/// `[64, 256, 256]` as `64 × 256 × 256` (`()` for 0-d, `—` when absent).
fn shape_text(shape: &Value) -> String {
    match shape.as_array() {
        Some(dims) if dims.is_empty() => "() (0-d)".into(),
        Some(dims) => dims.iter().map(value_text).collect::<Vec<_>>().join(" × "),
        None => "—".into(),
    }
}

/// A JSON value as plain text: strings unquoted.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The scheme and host the browser used (or `public_url`), for commands to copy.
fn origin(state: &AppState, headers: &HeaderMap) -> String {
    match super::origin(state, headers) {
        o if o.is_empty() => "http://127.0.0.1:8080".into(),
        o => o,
    }
}

fn html_response(body: String) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    with_page_headers(response)
}

/// The headers every explorer page carries.
fn with_page_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// The built-in assets.
async fn asset(Path(file): Path<String>) -> Result<Response, ApiError> {
    let (body, content_type): (&'static str, &'static str) = match file.as_str() {
        "explorer.js" => (include_str!("assets/explorer.js"), "text/javascript; charset=utf-8"),
        "explorer.css" => (include_str!("assets/explorer.css"), "text/css; charset=utf-8"),
        "favicon.svg" => (include_str!("assets/favicon.svg"), "image/svg+xml"),
        "map.js" => (include_str!("assets/map.js"), "text/javascript; charset=utf-8"),
        // Leaflet 1.9.4 (BSD-2-Clause, assets/leaflet/LICENSE), unmodified.
        "leaflet.js" => (
            include_str!("assets/leaflet/leaflet.js"),
            "text/javascript; charset=utf-8",
        ),
        "leaflet.css" => (include_str!("assets/leaflet/leaflet.css"), "text/css; charset=utf-8"),
        // Natural Earth 1:110m countries and land (public domain) as the
        // world-atlas 2.0.2 package builds them (ISC, assets/world-atlas/LICENSE), unmodified.
        "countries-110m.json" => (
            include_str!("assets/world-atlas/countries-110m.json"),
            "application/json",
        ),
        other => return Err(ApiError::NotFound(format!("no explorer asset named '{other}'"))),
    };
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    Ok(response)
}

async fn favicon() -> Result<Response, ApiError> {
    asset(Path("favicon.svg".to_string())).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breadcrumbs_link_every_ancestor() {
        let crumbs = breadcrumb("ds", "a/b/c");
        let texts: Vec<&str> = crumbs.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(texts, ["Datasets", "ds", "a", "b", "c"]);
        assert_eq!(crumbs[3].1.as_deref(), Some("/explore/ds/a/b"));
        assert_eq!(crumbs[4].1, None);
        assert_eq!(breadcrumb("ds", "")[1].1, None);
    }

    #[test]
    fn shapes_and_origins() {
        assert_eq!(shape_text(&serde_json::json!([64, 256, 256])), "64 × 256 × 256");
        assert_eq!(shape_text(&serde_json::json!([])), "() (0-d)");
        let state = AppState::from_config(&crate::config::Config::default()).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("example.org:8080"));
        assert_eq!(origin(&state, &headers), "http://example.org:8080");
        headers.insert(header::HOST, HeaderValue::from_static("evil'host"));
        assert_eq!(origin(&state, &headers), "http://127.0.0.1:8080");
        let config = crate::config::Config {
            public_url: Some("https://maps.example.org/zarr/".into()),
            ..Default::default()
        };
        let state = AppState::from_config(&config).unwrap();
        assert_eq!(origin(&state, &headers), "https://maps.example.org/zarr");
        assert_eq!(
            super::super::absolute(&state, &headers, "/v1/datasets/a/wms?"),
            "https://maps.example.org/zarr/v1/datasets/a/wms?"
        );
    }
}
