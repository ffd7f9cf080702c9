//! WMS 1.3.0 (api.md 3.3) against the real server, on the CF lat/lon
//! dataset of tests/common/geo.rs: capabilities, maps in the three CRSs checked
//! pixel by pixel against the cell rule, legends, feature info, and the
//! exception reports with their codes.

mod common;

use common::geo::{cell, dataset, pixels, LATS, LONS};
use common::{client, config, Server};
use serde_json::{json, Value};

async fn server(dir: &tempfile::TempDir) -> Server {
    let mut cfg = config();
    cfg.datasets
        .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
    cfg.wms_max_size = 1024;
    Server::start(cfg).await
}

async fn get(server: &Server, path: &str) -> reqwest::Response {
    client().get(server.url(path)).send().await.unwrap()
}

const MAP: &str = "/v1/datasets/geo/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=tas&STYLES=&FORMAT=image/png&TRANSPARENT=TRUE";

#[tokio::test]
async fn capabilities_list_layers_with_dimensions_and_styles() {
    let dir = dataset();
    let server = server(&dir).await;
    // Names are case-insensitive; unknown parameters are ignored.
    let resp = get(
        &server,
        "/v1/datasets/geo/wms?service=wms&request=getcapabilities&whatever=1",
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/xml");
    let xml = resp.text().await.unwrap();
    assert!(xml.contains("<WMS_Capabilities version=\"1.3.0\""), "{xml}");
    assert!(xml.contains("<Name>tas</Name><Title>air temperature</Title>"), "{xml}");
    assert!(!xml.contains("<Name>lat</Name>"), "coordinates are not layers");
    assert!(
        xml.contains("<BoundingBox CRS=\"EPSG:4326\" minx=\"-40\" miny=\"-180\" maxx=\"40\" maxy=\"180\"/>"),
        "{xml}"
    );
    assert!(
        xml.contains("<Dimension name=\"time\" units=\"ISO8601\" default=\"2000-01-02"),
        "{xml}"
    );
    assert!(xml.contains("<Style><Name>raster/viridis</Name>"), "{xml}");
}

#[tokio::test]
async fn maps_sample_cells_in_every_crs() {
    let dir = dataset();
    let server = server(&dir).await;
    let slice = get(
        &server,
        "/v1/datasets/geo/data/tas?select=1,:,:&format=png&rescale=100,131",
    )
    .await;
    let (_, _, cells) = pixels(&slice.bytes().await.unwrap());
    let colour = |i: usize, j: usize| cells[(i * 8 + j) * 4..(i * 8 + j) * 4 + 4].to_vec();
    // CRS:84, a window across the antimeridian of the 0..360 grid.
    let (w, h, bbox) = (40u32, 20u32, [-60.0, -50.0, 60.0, 50.0]);
    let url = format!(
        "{MAP}&CRS=CRS:84&BBOX={},{},{},{}&WIDTH={w}&HEIGHT={h}",
        bbox[0], bbox[1], bbox[2], bbox[3]
    );
    let resp = get(&server, &url).await;
    assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
    let resp = get(&server, &url).await;
    let (pw, ph, map) = pixels(&resp.bytes().await.unwrap());
    assert_eq!((pw, ph), (w, h));
    let mut drawn = 0;
    for i in 0..h {
        let lat = bbox[3] - (f64::from(i) + 0.5) * (bbox[3] - bbox[1]) / f64::from(h);
        for j in 0..w {
            let lon = bbox[0] + (f64::from(j) + 0.5) * (bbox[2] - bbox[0]) / f64::from(w);
            let at = ((i * w + j) * 4) as usize;
            match (cell(&LATS, lat), cell(&LONS, lon).or_else(|| cell(&LONS, lon + 360.0))) {
                (Some(ci), Some(cj)) => {
                    assert_eq!(&map[at..at + 4], colour(ci, cj).as_slice(), "pixel {i},{j}");
                    drawn += 1;
                }
                _ => assert_eq!(map[at + 3], 0, "pixel {i},{j} off the grid"),
            }
        }
    }
    assert!(drawn > 0);
    // EPSG:4326 takes latitude first: the same map.
    let url4326 = format!(
        "{MAP}&CRS=EPSG:4326&BBOX={},{},{},{}&WIDTH={w}&HEIGHT={h}",
        bbox[1], bbox[0], bbox[3], bbox[2]
    );
    let same = get(&server, &url4326).await.bytes().await.unwrap();
    assert_eq!(pixels(&same).2, map);
    // EPSG:3857 over the world at 256x256 is the WebMercatorQuad zoom-0 tile.
    let half = 20_037_508.342_789_244;
    let url3857 = format!(
        "{MAP}&CRS=EPSG:3857&BBOX={},{},{},{}&WIDTH=256&HEIGHT=256&COLORSCALERANGE=100,131",
        -half, -half, half, half
    );
    let world = get(&server, &url3857).await.bytes().await.unwrap();
    let tile = get(
        &server,
        "/v1/datasets/geo/tiles/WebMercatorQuad/0/0/0?variable=tas&rescale=100,131",
    )
    .await;
    assert_eq!(pixels(&world).2, pixels(&tile.bytes().await.unwrap()).2);
    // TIME picks the time; an opaque map is white where there is no data.
    let first = get(
        &server,
        &format!("{url}&TIME=2000-01-01T00:00:00Z&COLORSCALERANGE=100,131"),
    )
    .await;
    assert_eq!(first.status(), 200);
    assert_ne!(pixels(&first.bytes().await.unwrap()).2, map);
    // Strong ETags and 304, as on every route.
    let etag = get(&server, &url).await.headers()["etag"].clone();
    let again = client()
        .get(server.url(&url))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    let opaque = get(&server, &url.replace("TRANSPARENT=TRUE", "TRANSPARENT=FALSE")).await;
    let (_, _, opaque) = pixels(&opaque.bytes().await.unwrap());
    assert!(opaque.chunks(4).all(|p| p[3] == 255));
    assert!(opaque.chunks(4).any(|p| p == [255, 255, 255, 255]));
}

#[tokio::test]
async fn feature_info_and_legend() {
    let dir = dataset();
    let server = server(&dir).await;
    // A 8x4 map of the grid's extent: pixel (I=j, J=i) is cell (i, j).
    let frame = "&CRS=CRS:84&BBOX=-22.5,-40,337.5,40&WIDTH=8&HEIGHT=4";
    let info = |i: u32, j: u32, format: &str| {
        format!("/v1/datasets/geo/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetFeatureInfo&LAYERS=tas&QUERY_LAYERS=tas&STYLES={frame}&I={i}&J={j}&INFO_FORMAT={format}")
    };
    let doc: Value = get(&server, &info(5, 2, "application/json"))
        .await
        .json()
        .await
        .unwrap();
    let feature = &doc["features"][0];
    assert_eq!(doc["type"], "FeatureCollection");
    assert_eq!(feature["properties"]["value"], json!(100.0 + 8.0 * 2.0 + 5.0), "{doc}");
    assert_eq!(
        (feature["properties"]["x"].clone(), feature["properties"]["y"].clone()),
        (json!(225.0), json!(-10.0))
    );
    let text = get(&server, &info(0, 0, "text/plain")).await.text().await.unwrap();
    assert!(text.contains("value: 100"), "{text}");
    let outside = "&CRS=CRS:84&BBOX=-10,50,10,60&WIDTH=2&HEIGHT=2";
    let url = info(0, 0, "application/json").replace(frame, outside);
    let doc: Value = get(&server, &url).await.json().await.unwrap();
    assert_eq!(doc["features"][0]["properties"]["value"], Value::Null, "{doc}");
    // The legend: a bar, the top in the colour of the range's top.
    let legend = get(
        &server,
        "/v1/datasets/geo/wms?SERVICE=WMS&REQUEST=GetLegendGraphic&LAYER=tas&STYLE=raster/viridis",
    )
    .await;
    assert_eq!(legend.status(), 200);
    let (w, h, bar) = pixels(&legend.bytes().await.unwrap());
    assert_eq!((w, h), (20, 256));
    let top = get(
        &server,
        "/v1/datasets/geo/data/tas?select=1,3:4,7:8&format=png&rescale=100,131&colormap=viridis",
    )
    .await;
    assert_eq!(&bar[..4], &pixels(&top.bytes().await.unwrap()).2[..4]);
}

#[tokio::test]
async fn exceptions_carry_wms_codes() {
    let dir = dataset();
    let server = server(&dir).await;
    let frame = "&CRS=CRS:84&BBOX=-10,-10,10,10&WIDTH=10&HEIGHT=10";
    for (url, status, code) in [
        (format!("{MAP}{frame}").replace("LAYERS=tas", "LAYERS=nope"), 404, Some("LayerNotDefined")),
        (format!("{MAP}{frame}").replace("CRS:84", "EPSG:32633"), 400, Some("InvalidCRS")),
        (format!("{MAP}{frame}").replace("image/png", "image/jpeg"), 400, Some("InvalidFormat")),
        (format!("{MAP}{frame}&TIME=1999-01-01"), 400, Some("InvalidDimensionValue")),
        (format!("{MAP}&CRS=CRS:84&WIDTH=10&HEIGHT=10"), 400, Some("MissingParameterValue")),
        (format!("{MAP}{frame}").replace("STYLES=", "STYLES=nope"), 400, Some("StyleNotDefined")),
        (format!("{MAP}&CRS=CRS:84&BBOX=-10,-10,10,10&WIDTH=5000&HEIGHT=10"), 400, None),
        ("/v1/datasets/geo/wms?SERVICE=WMS&REQUEST=GetFeatureInfo&QUERY_LAYERS=tas&CRS=CRS:84&BBOX=-10,-10,10,10&WIDTH=10&HEIGHT=10&I=10&J=0".to_string(), 400, Some("InvalidPoint")),
    ] {
        let resp = get(&server, &url).await;
        assert_eq!(resp.status(), status, "{url}");
        assert_eq!(resp.headers()["content-type"], "text/xml", "{url}");
        let xml = resp.text().await.unwrap();
        assert!(xml.contains("<ServiceExceptionReport"), "{xml}");
        match code {
            Some(code) => assert!(xml.contains(&format!("code=\"{code}\"")), "{url}: {xml}"),
            None => assert!(!xml.contains("code="), "{url}: {xml}"),
        }
    }
}
