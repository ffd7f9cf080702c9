//! The guarantees of api.md 4.1, checked the same way on every route that
//! reads array data (as object_store runs one suite against every
//! backend): here, admission. Each route takes one of
//! `max_concurrent_reads` read slots and answers 503 with `Retry-After`
//! when none frees up in time; a streamed answer holds its slot until it
//! has been sent.

mod common;

use std::time::Duration;

use common::{client, config, Server};

/// Every route that reads array data, as a request of the `big` dataset.
const DATA_ROUTES: [(&str, &str); 11] = [
    ("region read", "/v1/datasets/big/data/tas?select=0:2,0:2"),
    (
        "region read as JSON",
        "/v1/datasets/big/data/tas?select=0:2,0:2&format=json",
    ),
    ("passthrough chunk", "/v1/datasets/big/zarr/tas/c/0/0"),
    ("v2 view chunk", "/v1/datasets/big/v2/tas/0.0"),
    ("tile", "/v1/datasets/big/tiles/WebMercatorQuad/0/0/0?variable=tas"),
    (
        "WMS GetMap",
        "/v1/datasets/big/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=tas&STYLES=&FORMAT=image/png\
         &CRS=CRS:84&BBOX=-180,-90,180,90&WIDTH=16&HEIGHT=8&COLORSCALERANGE=0,1",
    ),
    (
        "WMS GetFeatureInfo",
        "/v1/datasets/big/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetFeatureInfo&QUERY_LAYERS=tas\
         &CRS=CRS:84&BBOX=-180,-90,180,90&WIDTH=16&HEIGHT=8&I=1&J=1",
    ),
    ("DAP2 .dods", "/v1/datasets/big/dap.dods?tas[0:1][0:1]"),
    ("DAP2 .ascii", "/v1/datasets/big/dap.ascii?tas[0:1][0:1]"),
    (
        "EDR position",
        "/v1/datasets/big/edr/collections/big/position?coords=POINT(0%200)",
    ),
    ("explorer page", "/explore/big/tas"),
];

#[tokio::test]
async fn every_data_route_waits_for_a_read_slot_then_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    common::geo::big_grid(dir.path(), 2048);
    let mut cfg = config();
    cfg.datasets
        .insert("big".into(), common::dataset(dir.path().to_string_lossy()));
    let mut guarded = common::dataset(dir.path().to_string_lossy());
    guarded.token = Some("a-long-secret".into());
    cfg.datasets.insert("guarded".into(), guarded);
    cfg.max_concurrent_reads = 1;
    cfg.read_slot_wait_secs = 0.3;
    cfg.slab_bytes = 1 << 20;
    let server = Server::start(cfg).await;
    // Each route answers while the slot is free.
    for (name, path) in DATA_ROUTES {
        let resp = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{name}: {}", resp.text().await.unwrap());
    }
    // A 16 MiB answer streams and its client reads nothing: its slot stays held.
    let held = client()
        .get(server.url("/v1/datasets/big/data/tas"))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    for (name, path) in DATA_ROUTES {
        let started = std::time::Instant::now();
        let resp = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 503, "{name}");
        assert!(resp.headers().contains_key("retry-after"), "{name}");
        assert!(started.elapsed() >= Duration::from_millis(250), "{name} did not wait");
        // Each protocol says so in its own error format.
        let body = resp.text().await.unwrap();
        let format = match name {
            n if n.starts_with("WMS") => "ServiceExceptionReport",
            n if n.starts_with("DAP2") => "Error {",
            _ => "\"status\":503",
        };
        assert!(body.contains(format), "{name}: {body}");
    }
    // A request the service refuses anyway (an unknown dataset, a guarded
    // one without its token) is answered at once, without a slot.
    for (path, status) in [
        ("/v1/datasets/nosuch/data/tas", 404),
        ("/v1/datasets/guarded/data/tas", 401),
    ] {
        let started = std::time::Instant::now();
        let resp = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), status, "{path}");
        assert!(started.elapsed() < Duration::from_millis(250), "{path} waited");
    }
    // Routes that read no array data do not wait.
    for path in [
        "/v1/datasets/big/nodes/tas",
        "/v1/datasets/big/tiles/WebMercatorQuad/tilejson.json?variable=tas",
        "/v1/datasets/big/edr/collections",
    ] {
        let resp = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    // Once the stream is gone its slot is free again.
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (name, path) in DATA_ROUTES {
        let resp = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{name}");
    }
    let metrics = client()
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Every refusal above was counted.
    let refused: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("zarr_serve_overloaded_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no overloaded counter in {metrics}"));
    assert_eq!(refused, DATA_ROUTES.len() as u64, "{metrics}");
}
