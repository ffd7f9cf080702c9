//! Hostile requests and hostile data (issue 39, api.md 2.8 and 3.7): each
//! probe that once crashed the service, swamped it, or read outside what a
//! dataset allows, against the real server. Memory under the worst of them
//! is measured on a server process of its own in tests/memory.rs.

mod common;

use axum::http::StatusCode;
use common::geo::dataset;
use common::{client, config, Server};
use serde_json::{json, Value};

async fn get(server: &Server, path: &str) -> reqwest::Response {
    client().get(server.url(path)).send().await.unwrap()
}

/// The geo dataset of tests/common/geo.rs as `geo`, with `change` applied.
async fn geo_server(dir: &tempfile::TempDir, change: impl FnOnce(&mut zarr_serve::config::Config)) -> Server {
    let mut cfg = config();
    cfg.datasets
        .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
    change(&mut cfg);
    Server::start(cfg).await
}

const WMS: &str = "/v1/datasets/geo/wms?SERVICE=WMS&VERSION=1.3.0";

#[tokio::test]
async fn every_wms_size_is_bounded_before_anything_is_drawn() {
    let dir = dataset();
    let server = geo_server(&dir, |c| c.wms_max_size = 2048).await;
    // The request that once aborted the process on a 32 GiB allocation.
    for (width, height) in [("4294967295", "4294967295"), ("50000000", "1"), ("2049", "1")] {
        let resp = get(
            &server,
            &format!(
                "{WMS}&REQUEST=GetFeatureInfo&LAYERS=tas&QUERY_LAYERS=tas&CRS=CRS:84&BBOX=-180,-90,180,90\
                 &WIDTH={width}&HEIGHT={height}&I=0&J=0"
            ),
        )
        .await;
        assert_eq!(resp.status(), 400, "{width}x{height}");
        let text = resp.text().await.unwrap();
        assert!(text.contains("wms_max_size = 2048"), "{text}");
    }
    let resp = get(&server, &format!("{WMS}&REQUEST=GetLegendGraphic&LAYER=tas&WIDTH=5000")).await;
    assert_eq!(resp.status(), 400);
    // Within the limits: answered, and the service is still there.
    let resp = get(
        &server,
        &format!(
            "{WMS}&REQUEST=GetFeatureInfo&QUERY_LAYERS=tas&CRS=CRS:84&BBOX=-180,-90,180,90&WIDTH=2048&HEIGHT=2048&I=0&J=0"
        ),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let legend = get(
        &server,
        &format!("{WMS}&REQUEST=GetLegendGraphic&LAYER=tas&WIDTH=30&HEIGHT=100"),
    )
    .await;
    assert_eq!(legend.status(), 200);
    let (w, h, rgba) = common::geo::pixels(&legend.bytes().await.unwrap());
    assert_eq!((w, h), (30, 100));
    // High values on top, each row one colour.
    assert_ne!(rgba[..4], rgba[rgba.len() - 4..]);
    assert!(rgba[..30 * 4].chunks(4).all(|p| p == &rgba[..4]));
    assert_eq!(get(&server, "/healthz").await.status(), 200);
}

#[tokio::test]
async fn wms_maps_obey_the_tile_read_limit() {
    let dir = dataset();
    // tas is one chunk of 2 x 4 x 8 float32: 256 bytes decoded.
    let server = geo_server(&dir, |c| c.tile_read_limit_bytes = 255).await;
    let map = format!(
        "{WMS}&REQUEST=GetMap&LAYERS=tas&STYLES=&FORMAT=image/png&CRS=CRS:84&BBOX=-180,-90,180,90&WIDTH=64&HEIGHT=32"
    );
    let resp = get(&server, &map).await;
    assert_eq!(resp.status(), 413);
    let text = resp.text().await.unwrap();
    assert!(
        text.contains("tile_read_limit_bytes = 255") && text.contains("ServiceExceptionReport"),
        "{text}"
    );
    let server = geo_server(&dir, |c| c.tile_read_limit_bytes = 256).await;
    assert_eq!(get(&server, &map).await.status(), 200);
}

/// Characters XML 1.0 forbids anywhere in a document.
fn forbidden_in_xml(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| matches!(c, '\0'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}'))
        .collect()
}

#[tokio::test]
async fn control_characters_never_reach_xml() {
    let dir = dataset();
    let name = "air\u{1}temp\u{b}erature\u{1f}";
    let meta = dir.path().join("tas/zarr.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    doc["attributes"]["long_name"] = json!(name);
    std::fs::write(&meta, doc.to_string()).unwrap();
    let server = geo_server(&dir, |_| {}).await;
    let resp = get(&server, &format!("{WMS}&REQUEST=GetCapabilities")).await;
    assert_eq!(resp.status(), 200);
    let xml = resp.text().await.unwrap();
    assert_eq!(forbidden_in_xml(&xml), Vec::<char>::new());
    assert!(
        xml.contains("<Title>air\u{fffd}temp\u{fffd}erature\u{fffd}</Title>"),
        "{xml}"
    );
    // Echoed parameters in exception reports.
    let resp = get(&server, &format!("{WMS}&REQUEST=Get%01Map%0B%1F%26%3C")).await;
    assert_eq!(resp.status(), 400);
    let xml = resp.text().await.unwrap();
    assert_eq!(forbidden_in_xml(&xml), Vec::<char>::new());
    assert!(xml.contains("Get\u{fffd}Map\u{fffd}\u{fffd}&amp;&lt;"), "{xml}");
}

#[tokio::test]
async fn capabilities_links_use_public_url_never_a_raw_host() {
    let dir = dataset();
    let server = geo_server(&dir, |_| {}).await;
    let caps = |server: &Server, host: &'static str| {
        let request = client()
            .get(server.url(&format!("{WMS}&REQUEST=GetCapabilities")))
            .header("host", host);
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let xml = caps(&server, "maps.example:8080").await;
    assert!(
        xml.contains("xlink:href=\"http://maps.example:8080/v1/datasets/geo/wms?\""),
        "{xml}"
    );
    let xml = caps(&server, "evil\"><x a=\"").await;
    assert!(!xml.contains("evil"), "{xml}");
    let server = geo_server(&dir, |c| c.public_url = Some("https://data.example.org/zarr/".into())).await;
    let xml = caps(&server, "maps.example:8080").await;
    assert!(
        xml.contains("xlink:href=\"https://data.example.org/zarr/v1/datasets/geo/wms?\""),
        "{xml}"
    );
    assert!(!xml.contains("maps.example"), "{xml}");
    let edr = get(&server, "/v1/datasets/geo/edr")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        edr["links"][0]["href"],
        "https://data.example.org/zarr/v1/datasets/geo/edr"
    );
}

#[tokio::test]
async fn edr_parameters_count_once_and_windows_stream_past_the_slab_budget() {
    let dir = dataset();
    let server = geo_server(&dir, |_| {}).await;
    let cube = "/v1/datasets/geo/edr/collections/geo/cube?bbox=-180,-90,180,90";
    let once: Value = get(&server, &format!("{cube}&parameter-name=tas"))
        .await
        .json()
        .await
        .unwrap();
    let names = vec!["tas"; 1500].join(",");
    let resp = get(&server, &format!("{cube}&parameter-name={names}")).await;
    assert_eq!(resp.status(), 200);
    let repeated: Value = resp.json().await.unwrap();
    assert_eq!(repeated, once);
    assert_eq!(repeated["ranges"].as_object().unwrap().len(), 1);
    // Every format writes the same values.
    let csv = get(&server, &format!("{cube}&parameter-name=tas&f=CSV"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 4 * 8, "{csv}");
    let geo: Value = get(&server, &format!("{cube}&parameter-name=tas&f=GeoJSON"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(geo["features"].as_array().unwrap().len(), 4 * 8);
    assert_eq!(geo["features"][0]["properties"]["tas"].as_array().unwrap().len(), 2);

    // A window's values beyond the whole slab budget stream a part at a
    // time (api.md 4.1, 4): the whole 1024 x 1024 grid with a 4 MiB budget
    // (16 MiB of values) answers, every cell in row order.
    let tiny = tempfile::tempdir().unwrap();
    common::geo::big_grid(tiny.path(), 1024);
    let mut cfg = config();
    cfg.datasets
        .insert("big".into(), common::dataset(tiny.path().to_string_lossy()));
    cfg.slab_budget_bytes = 4 << 20;
    let server = Server::start(cfg).await;
    let big = "/v1/datasets/big/edr/collections/big/cube?bbox=-180,-90,180,90";
    let resp = get(&server, big).await;
    assert_eq!(resp.status(), 200);
    let doc: Value = resp.json().await.unwrap();
    let values = doc["ranges"]["tas"]["values"].as_array().unwrap();
    assert_eq!(values.len(), 1024 * 1024);
    // tas[y, x] = y * 1024 + x: the grid's first cell, its second row's first, its last.
    let at = |k: usize| values[k].as_f64().unwrap();
    assert_eq!(
        (at(0), at(1024), at(1024 * 1024 - 1)),
        (0.0, 1024.0, (1024 * 1024 - 1) as f64)
    );
    let quarter = "/v1/datasets/big/edr/collections/big/cube?bbox=-180,45,180,90&f=CSV";
    let resp = get(&server, quarter).await;
    assert_eq!(resp.status(), 200);
    let csv = resp.text().await.unwrap();
    assert_eq!(csv.lines().count(), 1 + 256 * 1024);
    // Row by row: the first cell of the grid, then along the row.
    let last = |line: usize| -> f64 {
        csv.lines()
            .nth(line)
            .unwrap()
            .rsplit(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!((last(1), last(2)), (0.0, 1.0));

    // Positions are read whole: beyond the whole budget they are refused
    // before reading (200 points, 16 bytes each held, over a 2 KiB budget).
    let mut cfg = config();
    cfg.datasets
        .insert("big".into(), common::dataset(tiny.path().to_string_lossy()));
    cfg.slab_budget_bytes = 2 << 10;
    let server = Server::start(cfg).await;
    let points: Vec<String> = (0..200).map(|i| format!("({}%20{})", i % 180, i / 4)).collect();
    let position = format!(
        "/v1/datasets/big/edr/collections/big/position?coords=MULTIPOINT({})",
        points.join(",")
    );
    let resp = get(&server, &position).await;
    assert_eq!(resp.status(), 413);
    let problem: Value = resp.json().await.unwrap();
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("slab_budget_bytes = 2048") && detail.contains("3200"),
        "{detail}"
    );
}

#[tokio::test]
async fn links_out_of_a_dataset_serve_nothing() {
    use std::os::unix::fs::symlink;
    let base = tempfile::tempdir().unwrap();
    let (open, guarded) = (base.path().join("open.zarr"), base.path().join("guarded.zarr"));
    std::fs::create_dir_all(open.join("a")).unwrap();
    std::fs::create_dir_all(guarded.join("secret/c")).unwrap();
    std::fs::write(open.join("zarr.json"), r#"{"zarr_format": 3, "node_type": "group"}"#).unwrap();
    std::fs::write(guarded.join("zarr.json"), r#"{"zarr_format": 3, "node_type": "group"}"#).unwrap();
    std::fs::write(guarded.join("secret/c/0"), b"guarded bytes").unwrap();
    std::fs::write(base.path().join("passwd"), b"root:x:0:0:root:/root:/bin/bash\n").unwrap();
    std::fs::write(open.join("a/real"), b"open bytes").unwrap();
    symlink(base.path().join("passwd"), open.join("passwd")).unwrap();
    symlink(&guarded, open.join("guarded")).unwrap();
    symlink(guarded.join("secret/c/0"), open.join("a/stolen")).unwrap();
    symlink("real", open.join("a/alias")).unwrap();
    let mut cfg = config();
    cfg.datasets
        .insert("open".into(), common::dataset(open.to_string_lossy()));
    let mut protected = common::dataset(guarded.to_string_lossy());
    protected.token = Some("s3cret-token".into());
    cfg.datasets.insert("guarded".into(), protected);
    let server = Server::start(cfg).await;
    let alias = get(&server, "/v1/datasets/open/zarr/a/alias").await;
    assert_eq!(alias.status(), 200);
    assert_eq!(&alias.bytes().await.unwrap()[..], b"open bytes");
    for key in ["passwd", "guarded/secret/c/0", "a/stolen", "guarded/zarr.json"] {
        let resp = get(&server, &format!("/v1/datasets/open/zarr/{key}")).await;
        assert_eq!(resp.status(), 404, "{key}");
        let text = resp.text().await.unwrap();
        assert!(!text.contains("root:x") && !text.contains("guarded bytes"), "{text}");
        let head = client()
            .head(server.url(&format!("/v1/datasets/open/zarr/{key}")))
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), 404, "HEAD {key}");
    }
    // Listing through the link names nothing of the other dataset.
    let listing = get(&server, "/v1/datasets/open/zarr/guarded/").await;
    let text = listing.text().await.unwrap();
    assert!(!text.contains("secret"), "{text}");
    // The guarded dataset itself still wants its token.
    assert_eq!(get(&server, "/v1/datasets/guarded/zarr/secret/c/0").await.status(), 401);
}

/// A kerchunk reference set (version 0) of one uint8 array `a` of 4
/// elements whose chunk is the object at `chunk_url`.
fn reference_set(dir: &std::path::Path, chunk_url: &str) -> String {
    let zarray = r#"{"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}"#;
    let set = json!({".zgroup": "{\"zarr_format\": 2}", "a/.zarray": zarray, "a/0": [chunk_url]});
    let path = dir.join("refs.json");
    std::fs::write(&path, set.to_string()).unwrap();
    format!("refs+file://{}", path.display())
}

/// Array `a` of a reference set (written in `dir`) whose chunk is at
/// `chunk_url`, read as JSON by a server allowing the container `prefix`.
async fn read_through(dir: &std::path::Path, chunk_url: String, prefix: &str) -> (StatusCode, String) {
    let mut ds = common::dataset(reference_set(dir, &chunk_url));
    ds.virtual_chunk_containers = vec![zarr_serve::config::VirtualChunkContainer::Prefix(prefix.to_string())];
    let mut cfg = config();
    cfg.datasets.insert("r".into(), ds);
    let server = Server::start(cfg).await;
    let resp = get(&server, "/v1/datasets/r/data/a?format=json").await;
    (resp.status(), resp.text().await.unwrap())
}

/// A server on a free port answering `app`.
async fn side_server(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

#[tokio::test]
async fn redirects_never_leave_the_allowed_prefix() {
    use axum::response::Redirect;
    use axum::routing::get as route;
    let elsewhere = side_server(axum::Router::new().route("/x.bin", route(|| async { vec![9u8, 9, 9, 9] }))).await;
    let target = format!("{elsewhere}/x.bin");
    let allowed = side_server(
        axum::Router::new()
            .route(
                "/files/out.bin",
                route(move || async move { Redirect::temporary(&target) }),
            )
            .route(
                "/files/sideways.bin",
                route(|| async { Redirect::temporary("/other/x.bin") }),
            )
            .route(
                "/files/in.bin",
                route(|| async { Redirect::temporary("/files/real.bin") }),
            )
            .route("/files/real.bin", route(|| async { vec![1u8, 2, 3, 4] })),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("{allowed}/files/");
    let read = |chunk: &str| read_through(dir.path(), format!("{prefix}{chunk}"), &prefix);
    let (status, text) = read("in.bin").await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("[1,2,3,4]"), "{text}");
    for chunk in ["out.bin", "sideways.bin"] {
        let (status, text) = read(chunk).await;
        assert!(status.is_server_error(), "{chunk}: {status} {text}");
        assert!(!text.contains("9,9,9,9"), "{text}");
        assert!(
            text.contains("redirect") || status == StatusCode::BAD_GATEWAY,
            "{chunk}: {text}"
        );
    }
}

#[tokio::test]
async fn a_container_prefix_is_a_directory() {
    let base = tempfile::tempdir().unwrap();
    for (dir, byte) in [("allowed", 1u8), ("allowed_evil", 6)] {
        std::fs::create_dir_all(base.path().join(dir)).unwrap();
        std::fs::write(base.path().join(dir).join("x.bin"), [byte; 4]).unwrap();
    }
    let prefix = format!("file://{}/allowed", base.path().display());
    let read = |chunk: String| read_through(base.path(), chunk, &prefix);
    let (status, text) = read(format!("{prefix}/x.bin")).await;
    assert_eq!(status, 200, "{text}");
    let (status, text) = read(format!("{prefix}_evil/x.bin")).await;
    assert_eq!(status, 403, "{text}");
}

#[tokio::test]
async fn a_hostile_reference_set_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let sets = [
        // 4e9 keys: once an abort on allocation.
        json!({"version": 1, "refs": {".zgroup": "{\"zarr_format\": 2}"},
               "gen": [{"key": "a/{{i}}", "url": "file:///x", "dimensions": {"i": {"stop": 4_000_000_000u64}}}]}),
        // Ten million keys from 300 bytes: once 2.1 GiB and 20 s.
        json!({"version": 1, "refs": {".zgroup": "{\"zarr_format\": 2}"},
               "gen": [{"key": "a/{{i}}.{{j}}", "url": "file:///x", "dimensions": {"i": {"stop": 10_000}, "j": {"stop": 1000}}}]}),
        // An offset expression nested 100,000 deep: once a blown stack.
        json!({"version": 1, "refs": {".zgroup": "{\"zarr_format\": 2}"},
               "gen": [{"key": "a/{{i}}", "url": "file:///x", "offset": format!("{{{{{}i{}}}}}", "(".repeat(100_000), ")".repeat(100_000)),
                        "length": "1", "dimensions": {"i": [0]}}]}),
    ];
    let mut cfg = config();
    for (k, set) in sets.iter().enumerate() {
        let path = dir.path().join(format!("set{k}.json"));
        std::fs::write(&path, set.to_string()).unwrap();
        cfg.datasets.insert(
            format!("r{k}"),
            common::dataset(format!("refs+file://{}", path.display())),
        );
    }
    let server = Server::start(cfg).await;
    for k in 0..sets.len() {
        let started = std::time::Instant::now();
        let resp = get(&server, &format!("/v1/datasets/r{k}/nodes")).await;
        assert!(resp.status().is_server_error(), "set {k}: {}", resp.status());
        let text = resp.text().await.unwrap();
        assert!(text.contains("more than") || text.contains("deeper"), "set {k}: {text}");
        assert!(started.elapsed().as_secs() < 5, "set {k} took {:?}", started.elapsed());
    }
    // Every other dataset is served as before.
    assert_eq!(get(&server, "/v1/datasets/sample/nodes").await.status(), 200);
}

#[tokio::test]
async fn netcdf_downloads_carry_only_valid_names() {
    let dir = dataset();
    let meta = dir.path().join("tas/zarr.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    doc["attributes"] =
        json!({"long_name": "air temperature", "a/b": 1, "bell\u{7}": 2, "-x": 3, "trail ": 4, "ok_name": 5});
    std::fs::write(&meta, doc.to_string()).unwrap();
    let server = geo_server(&dir, |_| {}).await;
    let resp = get(&server, "/v1/datasets/geo/data/tas?format=netcdf").await;
    assert_eq!(resp.status(), 200);
    let bytes = resp.bytes().await.unwrap();
    let path = dir.path().join("tas.nc");
    std::fs::write(&path, &bytes).unwrap();
    let mut file = netcdf3::FileReader::open(&path).unwrap();
    let var = file.data_set().get_var("tas").unwrap();
    let names: Vec<String> = var.get_attrs().iter().map(|a| a.name().to_string()).collect();
    assert!(
        names.contains(&"ok_name".to_string()) && names.contains(&"long_name".to_string()),
        "{names:?}"
    );
    for bad in ["a/b", "bell\u{7}", "-x", "trail "] {
        assert!(!names.iter().any(|n| n == bad), "{bad} in {names:?}");
    }
    let values = file.read_var_f32("tas").unwrap();
    assert_eq!(values.len(), 2 * 4 * 8);
}

#[tokio::test]
async fn long_request_lines_are_414() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start(config()).await;
    let address = server.base.trim_start_matches("http://").to_string();
    for (length, problem) in [(9_000, true), (60_000, true), (1_000_000, false)] {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let request = format!(
            "GET /v1/datasets?{} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "a".repeat(length)
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 414"), "{length}: {answer}");
        // Up to 64 KiB the URI parses and the answer is problem+json; past
        // that the HTTP library refuses it itself (same status, no body).
        assert_eq!(
            answer.contains("application/problem+json"),
            problem,
            "{length}: {answer}"
        );
    }
}
