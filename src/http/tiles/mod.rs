//! Map tiles (contract 3.3): OGC tile matrix sets `WebMercatorQuad` and
//! `WorldCRS84Quad`, 256-pixel PNG tiles of a geo variable by OGC zoom, row
//! and column, and TileJSON 3.0.0. A thin adapter: the engine finds the
//! grid cells the tile's pixels sample (one lookup per pixel row and per
//! pixel column) and reads them in one orthogonal read; this module turns
//! the request into that and the values into a PNG.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::query::TileQuery;
use super::{absolute, ApiError, AppState};
use crate::engine::geo::{TileMatrixSet, MERCATOR_HALF, TILE_SIZE};
use crate::engine::{Dataset, GeoVariable};
use crate::identity::Caller;

/// The tile routes.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/datasets/{ds}/tiles/tileMatrixSets", get(matrix_sets))
        .route("/v1/datasets/{ds}/tiles/tileMatrixSets/{tms}", get(matrix_set))
        .route_layer(axum::middleware::from_fn(super::no_query_parameters))
        .route("/v1/datasets/{ds}/tiles/{tms}/tilejson.json", get(tilejson))
        .merge(
            Router::new()
                .route("/v1/datasets/{ds}/tiles/{tms}/{z}/{row}/{col}", get(tile).head(tile))
                .route_layer(axum::middleware::from_fn(super::read_slot)),
        )
}

fn tile_matrix_set(id: &str) -> Result<TileMatrixSet, ApiError> {
    TileMatrixSet::named(id).ok_or_else(|| {
        let known: Vec<&str> = TileMatrixSet::ALL.iter().map(|t| t.id()).collect();
        ApiError::NotFound(format!("no tile matrix set '{id}' (sets: {})", known.join(", ")))
    })
}

/// `GET /v1/datasets/{ds}/tiles/tileMatrixSets`.
async fn matrix_sets(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(ds): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.dataset(&ds, &caller).await?;
    let sets: Vec<Value> = TileMatrixSet::ALL
        .iter()
        .map(|t| {
            json!({
                "id": t.id(),
                "title": title(*t),
                "uri": uri(*t),
                "links": [{"rel": "self", "type": "application/json",
                    "href": format!("/v1/datasets/{ds}/tiles/tileMatrixSets/{}", t.id())}],
            })
        })
        .collect();
    Ok(Json(json!({ "tileMatrixSets": sets })))
}

fn title(t: TileMatrixSet) -> &'static str {
    match t {
        TileMatrixSet::WebMercatorQuad => "Google Maps Compatible for the World",
        TileMatrixSet::WorldCrs84Quad => "CRS84 for the World",
    }
}

fn uri(t: TileMatrixSet) -> String {
    format!("http://www.opengis.net/def/tilematrixset/OGC/1.0/{}", t.id())
}

/// `GET /v1/datasets/{ds}/tiles/tileMatrixSets/{tms}`: the OGC
/// TileMatrixSet 2.0 document.
async fn matrix_set(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, tms)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    state.dataset(&ds, &caller).await?;
    let t = tile_matrix_set(&tms)?;
    let (crs, origin, extent) = match t {
        TileMatrixSet::WebMercatorQuad => {
            let half = MERCATOR_HALF;
            (
                "http://www.opengis.net/def/crs/EPSG/0/3857",
                json!([-half, half]),
                json!({"lowerLeft": [-half, -half], "upperRight": [half, half]}),
            )
        }
        TileMatrixSet::WorldCrs84Quad => (
            "http://www.opengis.net/def/crs/OGC/1.3/CRS84",
            json!([-180.0, 90.0]),
            json!({"lowerLeft": [-180.0, -90.0], "upperRight": [180.0, 90.0]}),
        ),
    };
    let matrices: Vec<Value> = (0..=t.max_zoom())
        .map(|z| {
            let (cols, rows) = t.matrix_size(z);
            json!({
                "id": z.to_string(),
                "scaleDenominator": t.scale_denominator(z),
                "cellSize": t.cell_size(z),
                "cornerOfOrigin": "topLeft",
                "pointOfOrigin": origin,
                "tileWidth": TILE_SIZE,
                "tileHeight": TILE_SIZE,
                "matrixWidth": cols,
                "matrixHeight": rows,
            })
        })
        .collect();
    Ok(Json(json!({
        "id": t.id(),
        "title": title(t),
        "uri": uri(t),
        "crs": crs,
        "orderedAxes": match t { TileMatrixSet::WebMercatorQuad => json!(["X", "Y"]), _ => json!(["Lon", "Lat"]) },
        "boundingBox": extent,
        "tileMatrices": matrices,
    })))
}

/// `GET /v1/datasets/{ds}/tiles/{tms}/tilejson.json?variable=PATH`.
async fn tilejson(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, tms)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let t = tile_matrix_set(&tms)?;
    let request = TileQuery::parse(query.as_deref())?;
    request.render.resolve()?;
    let dataset = &state.dataset(&ds, &caller).await?;
    let var = dataset.geo_variable(&request.variable).await?;
    let [west, south, east, north] = var.grid.bounds();
    let maxzoom = t.zoom_for(var.grid.smallest_cell_degrees());
    let centre_lon = if west <= east {
        (west + east) / 2.0
    } else {
        ((west + east + 360.0) / 2.0 + 180.0).rem_euclid(360.0) - 180.0
    };
    let template = format!(
        "/v1/datasets/{ds}/tiles/{}/{{z}}/{{y}}/{{x}}?{}",
        t.id(),
        query.as_deref().unwrap_or("")
    );
    let mut doc = json!({
        "tilejson": "3.0.0",
        "name": request.variable,
        "tiles": [absolute(&state, &headers, &template)],
        "scheme": "xyz",
        "bounds": [west, south, east, north],
        "center": [centre_lon, (south + north) / 2.0, 0],
        "minzoom": 0,
        "maxzoom": maxzoom,
    });
    if let Some(attribution) = attribution(dataset, &var).await {
        doc["attribution"] = json!(attribution);
    }
    Ok(Json(doc))
}

/// The `source` or `institution` attribute of the variable, else of its group.
async fn attribution(dataset: &Dataset, var: &GeoVariable) -> Option<String> {
    let pick = |attrs: &Value| {
        ["source", "institution"]
            .iter()
            .find_map(|k| attrs.get(*k).and_then(Value::as_str).map(str::to_string))
    };
    if let Some(found) = var.node.metadata.as_ref().and_then(|m| pick(m.attributes())) {
        return Some(found);
    }
    let parent = var.node.path.rsplit_once('/').map_or("", |(p, _)| p);
    let group = dataset.node(parent).await.ok()?;
    group.metadata.as_ref().and_then(|m| pick(m.attributes()))
}

/// `GET /v1/datasets/{ds}/tiles/{tms}/{z}/{row}/{col}?variable=PATH`
/// (also WMTS's `GetTile`).
pub(super) async fn tile(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, tms, z, row, col)): Path<(String, String, String, String, String)>,
    RawQuery(query): RawQuery,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let t = tile_matrix_set(&tms)?;
    let request = TileQuery::parse(query.as_deref())?;
    let position = || -> Option<(u8, u64, u64)> {
        let (z, row, col) = (z.parse().ok()?, row.parse().ok()?, col.parse().ok()?);
        t.contains(z, row, col).then_some((z, row, col))
    };
    let (z, row, col) = position().ok_or_else(|| {
        ApiError::NotFound(format!(
            "no tile {z}/{row}/{col} in {} (zooms 0 to {})",
            t.id(),
            t.max_zoom()
        ))
    })?;
    let key = query.unwrap_or_default();
    super::picture::tile(
        &state,
        &caller,
        &ds,
        (t, z, row, col),
        &request,
        &key,
        (&method, &headers),
    )
    .await
}
