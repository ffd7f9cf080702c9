//! Map tiles and TileJSON (api.md 3.2, 3.3) against the real server, on a
//! CF lat/lon dataset written here: descending latitudes, longitudes in
//! 0..360, a time dimension. Each tile pixel is checked against the cell
//! the contract's rule picks, computed here from the pixel centre, and that
//! cell's colour in a PNG of the whole slice from the region route.

mod common;

use common::geo::{cell, dataset, pixels, LATS, LONS};
use common::{client, config, Server};
use serde_json::{json, Value};

async fn server(dir: &tempfile::TempDir, tile_limit: Option<u64>) -> Server {
    let mut cfg = config();
    cfg.datasets
        .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
    if let Some(limit) = tile_limit {
        cfg.tile_read_limit_bytes = limit;
    }
    Server::start(cfg).await
}

async fn get(server: &Server, path: &str) -> reqwest::Response {
    client().get(server.url(path)).send().await.unwrap()
}

#[tokio::test]
async fn tiles_sample_the_cell_under_each_pixel() {
    let dir = dataset();
    let server = server(&dir, None).await;
    // The whole slice at the latest time, drawn by the region route.
    let slice = get(
        &server,
        "/v1/datasets/geo/data/tas?select=1,:,:&format=png&rescale=100,131",
    )
    .await;
    assert_eq!(slice.status(), 200);
    let (w, _, cells) = pixels(&slice.bytes().await.unwrap());
    assert_eq!(w, 8);
    let colour = |i: usize, j: usize| cells[(i * 8 + j) * 4..(i * 8 + j) * 4 + 4].to_vec();
    for (tms, z, row, col) in [
        ("WebMercatorQuad", 0, 0, 0),
        ("WebMercatorQuad", 1, 1, 0),
        ("WorldCRS84Quad", 0, 0, 1),
    ] {
        let url = format!("/v1/datasets/geo/tiles/{tms}/{z}/{row}/{col}?variable=tas&rescale=100,131");
        let resp = get(&server, &url).await;
        assert_eq!(resp.status(), 200, "{url}");
        assert_eq!(resp.headers()["content-type"], "image/png");
        let (w, h, tile) = pixels(&resp.bytes().await.unwrap());
        assert_eq!((w, h), (256, 256));
        let (cols, rows) = if tms == "WebMercatorQuad" {
            (1u64 << z, 1u64 << z)
        } else {
            (2u64 << z, 1u64 << z)
        };
        let (mut drawn, mut clear) = (0, 0);
        for i in 0..256u64 {
            let t = ((row * 256 + i) as f64 + 0.5) / (rows * 256) as f64;
            let lat = match tms {
                "WebMercatorQuad" => (std::f64::consts::PI * (1.0 - 2.0 * t)).sinh().atan().to_degrees(),
                _ => 90.0 - 180.0 * t,
            };
            for j in 0..256u64 {
                let lon = -180.0 + ((col * 256 + j) as f64 + 0.5) * 360.0 / (cols * 256) as f64;
                let x = cell(&LONS, lon).or_else(|| cell(&LONS, lon + 360.0));
                let at = ((i * 256 + j) * 4) as usize;
                let got = &tile[at..at + 4];
                match (cell(&LATS, lat), x) {
                    (Some(ci), Some(cj)) => {
                        assert_eq!(
                            got,
                            colour(ci, cj).as_slice(),
                            "{url} pixel {i},{j} (lat {lat}, lon {lon})"
                        );
                        drawn += 1;
                    }
                    _ => {
                        assert_eq!(got[3], 0, "{url} pixel {i},{j} off the grid is transparent");
                        clear += 1;
                    }
                }
            }
        }
        assert!(drawn > 0, "{url}: {drawn} drawn, {clear} clear");
        // Longitude before latitude in the array: the same tile.
        let xy = get(&server, &url.replace("variable=tas", "variable=tas_xy")).await;
        assert_eq!(xy.status(), 200, "{url} with lon first");
        assert_eq!(pixels(&xy.bytes().await.unwrap()).2, tile, "{url} with lon first");
    }
}

#[tokio::test]
async fn tile_selection_default_range_errors_and_etags() {
    let dir = dataset();
    let server = server(&dir, None).await;
    let tile = |q: &str| format!("/v1/datasets/geo/tiles/WorldCRS84Quad/0/0/0?variable=tas{q}");
    // sel picks the time; without it the latest time is drawn.
    let latest = get(&server, &tile("&rescale=0,131")).await.bytes().await.unwrap();
    let first = get(&server, &tile("&rescale=0,131&sel=time=2000-01-01")).await;
    assert_eq!(first.status(), 200);
    let first = first.bytes().await.unwrap();
    assert_ne!(latest, first);
    let explicit = get(&server, &tile("&rescale=0,131&sel=time=2000-01-02"))
        .await
        .bytes()
        .await
        .unwrap();
    assert_eq!(latest, explicit);
    // The default range is the slice's (no seams): as rescale=100,131 for the latest.
    let default = get(&server, &tile("")).await.bytes().await.unwrap();
    let given = get(&server, &tile("&rescale=100,131")).await.bytes().await.unwrap();
    assert_eq!(pixels(&default).2, pixels(&given).2);
    // ETag and 304.
    let resp = get(&server, &tile("")).await;
    let etag = resp.headers()["etag"].clone();
    let again = client()
        .get(server.url(&tile("")))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    // Errors.
    for (url, status) in [
        (
            "/v1/datasets/geo/tiles/WebMercatorQuad/25/0/0?variable=tas".to_string(),
            404,
        ),
        (
            "/v1/datasets/geo/tiles/WebMercatorQuad/1/2/0?variable=tas".to_string(),
            404,
        ),
        ("/v1/datasets/geo/tiles/NoSuchSet/0/0/0?variable=tas".to_string(), 404),
        (
            "/v1/datasets/geo/tiles/WebMercatorQuad/0/0/0?variable=nope".to_string(),
            404,
        ),
        ("/v1/datasets/geo/tiles/WebMercatorQuad/0/0/0".to_string(), 400),
        (
            "/v1/datasets/geo/tiles/WebMercatorQuad/0/0/0?variable=tas&bogus=1".to_string(),
            400,
        ),
        (
            "/v1/datasets/geo/tiles/WebMercatorQuad/0/0/0?variable=tas&colormap=nope".to_string(),
            400,
        ),
        (
            "/v1/datasets/sample/tiles/WebMercatorQuad/0/0/0?variable=temperature".to_string(),
            400,
        ),
    ] {
        let resp = get(&server, &url).await;
        assert_eq!(resp.status(), status, "{url}");
        assert_eq!(resp.headers()["content-type"], "application/problem+json", "{url}");
    }
    // A tile off the grid is a transparent 200.
    let off = get(&server, "/v1/datasets/geo/tiles/WebMercatorQuad/2/0/0?variable=tas").await;
    assert_eq!(off.status(), 200);
    assert!(pixels(&off.bytes().await.unwrap()).2.chunks(4).all(|p| p[3] == 0));
    // tile_read_limit_bytes: 413 naming a zoom.
    let small = server_with_limit(&dir, 64).await;
    let resp = get(&small, "/v1/datasets/geo/tiles/WebMercatorQuad/0/0/0?variable=tas").await;
    assert_eq!(resp.status(), 413);
    let body: Value = resp.json().await.unwrap();
    assert!(body["detail"].as_str().unwrap().contains("zoom"), "{body}");
}

async fn server_with_limit(dir: &tempfile::TempDir, limit: u64) -> Server {
    server(dir, Some(limit)).await
}

#[tokio::test]
async fn tilejson_and_tile_matrix_sets() {
    let dir = dataset();
    let server = server(&dir, None).await;
    let doc: Value = get(
        &server,
        "/v1/datasets/geo/tiles/WebMercatorQuad/tilejson.json?variable=tas&colormap=viridis",
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(doc["tilejson"], "3.0.0");
    // Longitude edges -22.5..337.5 go all the way round; latitude edges ±40.
    assert_eq!(doc["bounds"], json!([-180.0, -40.0, 180.0, 40.0]));
    assert_eq!((doc["minzoom"].clone(), doc["maxzoom"].clone()), (json!(0), json!(0)));
    assert_eq!(doc["attribution"], "zarr-serve tests");
    let template = doc["tiles"][0].as_str().unwrap();
    assert!(
        template.contains("/tiles/WebMercatorQuad/{z}/{y}/{x}?variable=tas&colormap=viridis"),
        "{template}"
    );
    // The explorer's page of a geo variable shows it on a map.
    let page = get(&server, "/explore/geo/tas").await.text().await.unwrap();
    for part in [
        "id=\"map\"",
        "data-tilejson=\"/v1/datasets/geo/tiles/WebMercatorQuad/tilejson.json?variable=tas\"",
        "REQUEST=GetLegendGraphic&amp;LAYER=tas",
        "/explore-assets/leaflet.js",
        "REQUEST=GetCapabilities",
    ] {
        assert!(page.contains(part), "{part} not in {page}");
    }
    let url = template.replace("{z}", "0").replace("{y}", "0").replace("{x}", "0");
    let resp = client().get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{url}");
    let sets: Value = get(&server, "/v1/datasets/geo/tiles/tileMatrixSets")
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = sets["tileMatrixSets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["WebMercatorQuad", "WorldCRS84Quad"]);
    let wm: Value = get(&server, "/v1/datasets/geo/tiles/tileMatrixSets/WebMercatorQuad")
        .await
        .json()
        .await
        .unwrap();
    let z0 = &wm["tileMatrices"][0];
    assert!((z0["scaleDenominator"].as_f64().unwrap() - 559_082_264.028_717_2).abs() < 1e-3);
    assert_eq!(
        (z0["matrixWidth"].clone(), wm["tileMatrices"].as_array().unwrap().len()),
        (json!(1), 25)
    );
    let crs84: Value = get(&server, "/v1/datasets/geo/tiles/tileMatrixSets/WorldCRS84Quad")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(crs84["tileMatrices"][0]["matrixWidth"], 2);
    assert_eq!(
        get(&server, "/v1/datasets/geo/tiles/tileMatrixSets?x=1").await.status(),
        400
    );
}

/// A UTM 33N grid (x, y in metres, 100 km cells around 15°E, 0..300 km
/// north) named four ways: `utm` by a CF grid_mapping whose spatial_ref WKT
/// ends in EPSG:32633, `rotated` by a grid mapping the contract leaves out,
/// `lost` by a grid_mapping naming no array, `bare` by nothing.
fn projected_dataset() -> tempfile::TempDir {
    use common::geo::{f64s, write_array};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("zarr.json"), r#"{"zarr_format": 3, "node_type": "group"}"#).unwrap();
    let metres = |axis: &str| json!({"units": "m", "axis": axis});
    write_array(
        root,
        "x",
        &[3],
        "float64",
        &["x"],
        metres("X"),
        &f64s(&[400e3, 500e3, 600e3]),
    );
    write_array(
        root,
        "y",
        &[3],
        "float64",
        &["y"],
        metres("Y"),
        &f64s(&[250e3, 150e3, 50e3]),
    );
    let wkt = r#"PROJCS["WGS 84 / UTM zone 33N",GEOGCS["WGS 84",AUTHORITY["EPSG","4326"]],PROJECTION["Transverse_Mercator"],AUTHORITY["EPSG","32633"]]"#;
    write_array(root, "crs", &[], "int32", &[], json!({"spatial_ref": wkt}), &[0; 4]);
    let rotated = json!({"grid_mapping_name": "rotated_latitude_longitude", "grid_north_pole_latitude": 40.0});
    write_array(root, "rotated_pole", &[], "int32", &[], rotated, &[0; 4]);
    let values: Vec<u8> = (0..9).flat_map(|v| (v as f32).to_le_bytes()).collect();
    for (name, mapping) in [
        ("utm", json!("crs")),
        ("rotated", json!("rotated_pole")),
        ("lost", json!("nowhere")),
        ("bare", Value::Null),
    ] {
        let attrs = match mapping {
            Value::Null => json!({}),
            m => json!({"grid_mapping": m}),
        };
        write_array(root, name, &[3, 3], "float32", &["y", "x"], attrs, &values);
    }
    dir
}

#[tokio::test]
async fn projected_grids_draw_and_unknown_mappings_say_why() {
    let dir = projected_dataset();
    let server = server(&dir, None).await;
    // 15°E, 1.35°N (about 150 km north): the centre column, middle row.
    let doc: Value = get(
        &server,
        "/v1/datasets/geo/tiles/WorldCRS84Quad/tilejson.json?variable=utm",
    )
    .await
    .json()
    .await
    .unwrap();
    let bounds: Vec<f64> = serde_json::from_value(doc["bounds"].clone()).unwrap();
    assert!(
        bounds[0] > 13.0 && bounds[2] < 17.0 && bounds[1] > -0.1 && bounds[3] < 2.8,
        "{bounds:?}"
    );
    let info: Value = get(
        &server,
        "/v1/datasets/geo/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetFeatureInfo&QUERY_LAYERS=utm&LAYERS=utm\
         &CRS=CRS:84&BBOX=14.5,0.85,15.5,1.85&WIDTH=3&HEIGHT=3&I=1&J=1&INFO_FORMAT=application/json",
    )
    .await
    .json()
    .await
    .unwrap();
    let props = &info["features"][0]["properties"];
    assert_eq!(
        (props["value"].clone(), props["x"].clone(), props["y"].clone()),
        (json!(4.0), json!(500e3), json!(150e3))
    );
    let point = info["features"][0]["geometry"]["coordinates"][0].as_f64().unwrap();
    assert!((point - 15.0).abs() < 1e-9, "{info}");
    let tile = get(&server, "/v1/datasets/geo/tiles/WorldCRS84Quad/3/3/8?variable=utm").await;
    assert_eq!(tile.status(), 200);
    let (_, _, rgba) = pixels(&tile.bytes().await.unwrap());
    assert!(rgba.chunks(4).any(|p| p[3] == 255) && rgba.chunks(4).any(|p| p[3] == 0));
    for (variable, says) in [
        ("rotated", "rotated_latitude_longitude"),
        ("lost", "nowhere"),
        ("bare", "no CRS"),
    ] {
        let resp = get(
            &server,
            &format!("/v1/datasets/geo/tiles/WebMercatorQuad/0/0/0?variable={variable}"),
        )
        .await;
        assert_eq!(resp.status(), 400, "{variable}");
        let text = resp.text().await.unwrap();
        assert!(text.contains(says), "{variable}: {text}");
    }
    let caps = get(&server, "/v1/datasets/geo/wms?SERVICE=WMS&REQUEST=GetCapabilities")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        caps.contains("<Name>utm</Name>") && !caps.contains("<Name>rotated</Name>"),
        "{caps}"
    );
}

/// Two pyramids of one field over 0..16°E, 0..16°N at 0.25°, 0.5° and 1°
/// cells, each level a constant (10, 20, 30) so a tile shows which it read:
/// `pyr` in the zarr-conventions group layout (levels `0`, `1`, `2` each with
/// `tas`, `lat`, `lon`), `ome` in OME-Zarr's array layout (arrays `s0`..`s2`
/// on coordinates of their own).
fn pyramid_dataset() -> tempfile::TempDir {
    use common::geo::{f64s, write_array};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let group = |path: &std::path::Path, attrs: Value| {
        std::fs::create_dir_all(path).unwrap();
        let doc = json!({"zarr_format": 3, "node_type": "group", "attributes": attrs});
        std::fs::write(path.join("zarr.json"), doc.to_string()).unwrap();
    };
    group(root, json!({}));
    let layout =
        json!({"layout": [{"asset": "0"}, {"asset": "1", "derived_from": "0"}, {"asset": "2", "derived_from": "1"}]});
    group(&root.join("pyr"), json!({"multiscales": layout}));
    let ome = json!([{"datasets": [{"path": "s0"}, {"path": "s1"}, {"path": "s2"}]}]);
    group(&root.join("ome"), json!({"multiscales": ome}));
    for (k, cell) in [0.25, 0.5, 1.0].into_iter().enumerate() {
        let n = (16.0 / cell) as u64;
        let centres: Vec<f64> = (0..n).map(|i| (i as f64 + 0.5) * cell).collect();
        let values: Vec<u8> = (0..n * n).flat_map(|_| (10.0 * (k + 1) as f32).to_le_bytes()).collect();
        let level = root.join("pyr").join(k.to_string());
        group(&level, json!({}));
        write_array(
            &level,
            "lat",
            &[n],
            "float64",
            &["lat"],
            json!({"units": "degrees_north"}),
            &f64s(&centres),
        );
        write_array(
            &level,
            "lon",
            &[n],
            "float64",
            &["lon"],
            json!({"units": "degrees_east"}),
            &f64s(&centres),
        );
        write_array(&level, "tas", &[n, n], "float32", &["lat", "lon"], json!({}), &values);
        let (lat, lon) = (format!("lat{k}"), format!("lon{k}"));
        let ome = root.join("ome");
        write_array(
            &ome,
            &lat,
            &[n],
            "float64",
            &[&lat],
            json!({"units": "degrees_north"}),
            &f64s(&centres),
        );
        write_array(
            &ome,
            &lon,
            &[n],
            "float64",
            &[&lon],
            json!({"units": "degrees_east"}),
            &f64s(&centres),
        );
        write_array(
            &ome,
            &format!("s{k}"),
            &[n, n],
            "float32",
            &[&lat, &lon],
            json!({}),
            &values,
        );
    }
    dir
}

#[tokio::test]
async fn tiles_and_maps_read_the_pyramid_level_of_their_pixels() {
    let dir = pyramid_dataset();
    let server = server(&dir, None).await;
    // gray over 0..30: 10 -> 85, 20 -> 170, 30 -> 255.
    let shade = |level: usize| [85u8, 170, 255][level];
    let centre_shade = |png: &[u8], x: u32, y: u32| {
        let (w, _, rgba) = pixels(png);
        let p = &rgba[((y * w + x) * 4) as usize..][..4];
        assert_eq!(p[3], 255, "no data where the pyramid is");
        p[0]
    };
    // Pixels of 1.41° (WebMercatorQuad zoom 0), 0.70° (zoom 1, and
    // WorldCRS84Quad zoom 0), 0.35° (zoom 2): levels of 1°, 0.5°, 0.25°.
    for variable in ["pyr/0/tas", "pyr/2/tas", "ome/s0", "ome/s1"] {
        for (tile, x, y, level) in [
            ("WebMercatorQuad/0/0/0", 133, 122, 2),
            ("WebMercatorQuad/1/0/1", 10, 245, 1),
            ("WorldCRS84Quad/0/0/1", 10, 120, 1),
            ("WebMercatorQuad/2/1/2", 10, 250, 0),
        ] {
            let resp = get(
                &server,
                &format!("/v1/datasets/geo/tiles/{tile}?variable={variable}&colormap=gray&rescale=0,30"),
            )
            .await;
            assert_eq!(resp.status(), 200);
            let got = centre_shade(&resp.bytes().await.unwrap(), x, y);
            assert!(
                got.abs_diff(shade(level)) <= 1,
                "{variable} {tile}: {got}, level {level} is {}",
                shade(level)
            );
        }
    }
    // WMS picks by its pixel width too: 16° over 16 pixels reads the 1° level, over 64 the 0.25° one.
    for (width, level) in [(16, 2), (32, 1), (64, 0)] {
        let url = format!(
            "/v1/datasets/geo/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pyr/0/tas&STYLES=gray\
             &CRS=CRS:84&BBOX=0,0,16,16&WIDTH={width}&HEIGHT={width}&FORMAT=image/png&COLORSCALERANGE=0,30"
        );
        let resp = get(&server, &url).await;
        assert_eq!(resp.status(), 200);
        let got = centre_shade(&resp.bytes().await.unwrap(), width / 2, width / 2);
        assert!(got.abs_diff(shade(level)) <= 1, "width {width}: {got}");
    }
}
