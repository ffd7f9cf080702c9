//! OGC API EDR (api.md 3.5) against the real server on the CF dataset of
//! tests/common/geo.rs (`tas[t, i, j] = 100 t + 8 i + j`, latitudes
//! descending, longitudes 0..360): the cells each query picks and their
//! values, CoverageJSON's shape, errors and the 413 rule. Runs on every
//! store backend; the clients (edr-pydantic, covjson-pydantic, OWSLib,
//! edr-xarray) read the sample data in tests/dap/test_edr_clients.py.

mod common;

use common::geo::{dataset, LONS};
use common::{client, config, Server};
use serde_json::Value;

async fn start(limit: Option<u64>) -> (tempfile::TempDir, Server) {
    let dir = dataset();
    let mut cfg = config();
    cfg.datasets
        .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
    if let Some(limit) = limit {
        cfg.max_response_bytes = limit;
    }
    (dir, Server::start(cfg).await)
}

async fn query(server: &Server, q: &str, params: &str) -> (u16, Value) {
    let url = server.url(&format!("/v1/datasets/geo/edr/collections/geo/{q}?{params}"));
    let resp = client().get(url).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

fn tas(t: usize, i: usize, j: usize) -> f64 {
    (100 * t + 8 * i + j) as f64
}

fn values(range: &Value) -> Vec<f64> {
    range["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect()
}

#[tokio::test]
async fn collections_describe_the_geo_groups() {
    let (_dir, server) = start(None).await;
    let url = server.url("/v1/datasets/geo/edr/collections");
    let doc: Value = client().get(url).send().await.unwrap().json().await.unwrap();
    let c = &doc["collections"][0];
    assert_eq!(c["id"], "geo");
    assert_eq!(c["extent"]["temporal"]["values"][1], "2000-01-02T00:00:00Z");
    let bbox: Vec<f64> = c["extent"]["spatial"]["bbox"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // Cell edges: the longitudes go all the way round.
    assert_eq!(bbox, [-180.0, -40.0, 180.0, 40.0]);
    assert!(c["parameter_names"]["tas"]["observedProperty"]["label"].is_string());
    assert!(c["data_queries"]["trajectory"]["link"]["href"]
        .as_str()
        .unwrap()
        .ends_with("/trajectory"));
}

#[tokio::test]
async fn position_takes_the_cell_holding_each_point() {
    let (_dir, server) = start(None).await;
    // lon -44 is 316 on the grid: column 7 (315); lat 12 is row 1 (10).
    let (status, doc) = query(&server, "position", "coords=POINT(-44%2012)").await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["domain"]["domainType"], "PointSeries");
    assert_eq!(values(&doc["ranges"]["tas"]), [tas(0, 1, 7), tas(1, 1, 7)]);
    assert_eq!(doc["domain"]["axes"]["x"]["values"][0], LONS[7] - 360.0);
    // Several points: a collection; one instant: Point domains.
    let (_, doc) = query(
        &server,
        "position",
        "coords=MULTIPOINT((0%2030),(90%20-30))&datetime=2000-01-02",
    )
    .await;
    assert_eq!(doc["type"], "CoverageCollection");
    let got: Vec<f64> = doc["coverages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| values(&c["ranges"]["tas"]))
        .collect();
    assert_eq!(got, [tas(1, 0, 0), tas(1, 3, 2)]);
    assert_eq!(doc["coverages"][0]["domain"]["domainType"], "Point");
}

#[tokio::test]
async fn areas_honour_holes_and_cubes_take_their_box() {
    let (_dir, server) = start(None).await;
    // Around the cells of rows 0..2 and columns 0..3 (lon 0..135), a hole
    // around lon 45, lat 10.
    let outer = "-10%2040,140%2040,140%200,-10%200,-10%2040";
    let hole = "40%205,50%205,50%2015,40%2015,40%205";
    let (status, doc) = query(
        &server,
        "area",
        &format!("coords=POLYGON(({outer}),({hole}))&datetime=2000-01-01"),
    )
    .await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["domain"]["domainType"], "Grid");
    assert_eq!(doc["ranges"]["tas"]["shape"], serde_json::json!([1, 2, 4]));
    let got = values(&doc["ranges"]["tas"]);
    let want: Vec<f64> = (0..2)
        .flat_map(|i| (0..4).map(move |j| if (i, j) == (1, 1) { f64::NAN } else { tas(0, i, j) }))
        .collect();
    assert!(
        got.iter().zip(&want).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())),
        "{got:?}"
    );
    // A cube across the antimeridian: columns 315, 0 and 45 in that order.
    let (_, doc) = query(&server, "cube", "bbox=-50,-15,50,15&datetime=2000-01-02").await;
    let xs: Vec<f64> = doc["domain"]["axes"]["x"]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(xs, [-45.0, 0.0, 45.0]);
    let want: Vec<f64> = [1, 2].iter().flat_map(|&i| [7, 0, 1].map(|j| tas(1, i, j))).collect();
    assert_eq!(values(&doc["ranges"]["tas"]), want);
}

#[tokio::test]
async fn radius_and_trajectory() {
    let (_dir, server) = start(None).await;
    // 1200 km around (90, 10): the cell centred there and none of its
    // neighbours (45 degrees of longitude, 20 of latitude away).
    let (_, doc) = query(
        &server,
        "radius",
        "coords=POINT(90%2010)&within=1200&within-units=km&datetime=2000-01-01",
    )
    .await;
    let got: Vec<f64> = values(&doc["ranges"]["tas"])
        .into_iter()
        .filter(|v| !v.is_nan())
        .collect();
    assert_eq!(got, [tas(0, 1, 2)]);
    // M picks each vertex's instant: 2000-01-02 is 946771200 s.
    let (status, doc) = query(
        &server,
        "trajectory",
        "coords=LINESTRINGM(0%2030%20946684800,%2090%20-30%20946771200)",
    )
    .await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["domain"]["domainType"], "Trajectory");
    assert_eq!(values(&doc["ranges"]["tas"]), [tas(0, 0, 0), tas(1, 3, 2)]);
    let first = &doc["domain"]["axes"]["composite"]["values"][0];
    assert_eq!(first[0], "2000-01-01T00:00:00Z");
}

#[tokio::test]
async fn errors_say_what_is_wrong() {
    let (_dir, server) = start(None).await;
    for (q, params, needle) in [
        ("position", "coords=POINT(1%20x)", "character 8"),
        ("position", "coords=POINT(1%2060)", "extent"),
        ("position", "coords=POINT(1%201)&crs=EPSG:3857", "CRS84"),
        ("area", "coords=POINT(1%201)", "POLYGON"),
        ("position", "coords=POINT(1%201)&parameter-name=nope", "tas"),
        ("position", "coords=POINT(1%201)&f=NetCDF", "area and cube"),
        (
            "position",
            "coords=POINT(1%201)&datetime=1999-01-01/1999-02-01",
            "no time step",
        ),
    ] {
        let (status, doc) = query(&server, q, params).await;
        assert_eq!(status, 400, "{q}?{params}: {doc}");
        assert!(doc["detail"].as_str().unwrap().contains(needle), "{q}?{params}: {doc}");
    }
    // 2 steps x 32 cells x 8 bytes = 512: the whole grid is over a 500-byte limit.
    let (_dir2, small) = start(Some(500)).await;
    let (status, _) = query(&small, "cube", "bbox=-180,-90,180,90").await;
    assert_eq!(status, 413);
    let (status, _) = query(&small, "cube", "bbox=-180,-90,180,90&datetime=2000-01-01").await;
    assert_eq!(status, 200);
}

/// api.md 4.1 (4): a window's values are read a part at a time as they are
/// written (parts of about `slab_bytes`, ended at chunk boundaries). Cut
/// into parts of a few values each (here a row of a step each, which the
/// one chunk of each array allows, and runs ended at the antimeridian's
/// gap in columns), every format's answer is byte for byte the answer read
/// in one part, with two parameters and both time steps.
#[tokio::test]
async fn a_window_read_in_parts_is_the_window_read_whole() {
    let dir = dataset();
    // A second parameter on the same grid: pr = -tas.
    let pr: Vec<u8> = (0..2)
        .flat_map(|t| (0..4).flat_map(move |i| (0..8).map(move |j| -tas(t, i, j) as f32)))
        .flat_map(f32::to_le_bytes)
        .collect();
    common::geo::write_array(
        dir.path(),
        "pr",
        &[2, 4, 8],
        "float32",
        &["time", "lat", "lon"],
        serde_json::json!({"units": "mm"}),
        &pr,
    );
    let serve = |slab_bytes: u64| {
        let mut cfg = config();
        cfg.datasets
            .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
        cfg.slab_bytes = slab_bytes;
        Server::start(cfg)
    };
    let whole = serve(16 << 20).await;
    // 40 bytes: 5 values a part, 2 of each parameter's.
    let parted = serve(40).await;
    let outer = "-10%2040,140%2040,140%200,-10%200,-10%2040";
    let hole = "40%205,50%205,50%2015,40%2015,40%205";
    let area = format!("area?coords=POLYGON(({outer}),({hole}))");
    let queries = [
        area.as_str(),
        "cube?bbox=-50,-40,50,40",
        "cube?bbox=-180,-90,180,90&parameter-name=pr,tas",
        "cube?bbox=-180,-90,180,90&parameter-name=tas&datetime=2000-01-02",
        "radius?coords=POINT(90%2010)&within=3000",
    ];
    let mut compared = 0;
    for q in queries {
        // NetCDF answers areas and cubes.
        let formats = match q.starts_with("radius") {
            true => &["CoverageJSON", "GeoJSON", "CSV"][..],
            false => &["CoverageJSON", "GeoJSON", "CSV", "NetCDF"][..],
        };
        for f in formats {
            let path = format!("/v1/datasets/geo/edr/collections/geo/{q}&f={f}");
            let a = client().get(whole.url(&path)).send().await.unwrap();
            let b = client().get(parted.url(&path)).send().await.unwrap();
            assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200), "{path}");
            let (a, b) = (a.bytes().await.unwrap(), b.bytes().await.unwrap());
            assert!(a.len() > 100, "{path}: {a:?}");
            assert!(a == b, "{path}: read whole {a:?}\nread in parts {b:?}");
            compared += 1;
        }
    }
    // The values are the grid's: the first cube's pr and tas, every cell.
    let url = whole.url("/v1/datasets/geo/edr/collections/geo/cube?bbox=-180,-90,180,90&parameter-name=pr,tas");
    let doc: Value = client().get(url).send().await.unwrap().json().await.unwrap();
    let axis = |name: &str| -> Vec<f64> {
        let values = doc["domain"]["axes"][name]["values"].as_array().unwrap();
        values.iter().map(|v| v.as_f64().unwrap()).collect()
    };
    let cols: Vec<usize> = axis("x")
        .iter()
        .map(|x| LONS.iter().position(|l| *l == x.rem_euclid(360.0)).unwrap())
        .collect();
    let rows: Vec<usize> = axis("y")
        .iter()
        .map(|y| common::geo::LATS.iter().position(|l| l == y).unwrap())
        .collect();
    assert_eq!((rows.len(), cols.len()), (4, 8));
    let (rows, cols) = (&rows, &cols);
    let want: Vec<f64> = (0..2)
        .flat_map(move |t| rows.iter().flat_map(move |&i| cols.iter().map(move |&j| tas(t, i, j))))
        .collect();
    assert_eq!(values(&doc["ranges"]["tas"]), want);
    let negated: Vec<f64> = want.iter().map(|v| -v).collect();
    assert_eq!(values(&doc["ranges"]["pr"]), negated);
    assert_eq!(compared, 19);
}
