//! The guarantees of api.md 4.1, checked the same way on every route that
//! reads array data (as object_store runs one suite against every
//! backend): admission (a read slot, 503 when none frees up in time), 413
//! and 304 before any chunk is fetched, HEAD with GET's headers, and for
//! every format that streams, a body cut short when a chunk fails after
//! the status went out and the reading stopped when the client goes away.
//! Bounded memory while streaming each format is `tests/memory.rs`'s.

mod common;

use std::time::Duration;

use common::{client, config, Server};

/// Every route that reads array data, as a request of the `big` dataset.
const DATA_ROUTES: [(&str, &str); 13] = [
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
    (
        "WMTS GetTile",
        "/v1/datasets/big/wmts?SERVICE=WMTS&VERSION=1.0.0&REQUEST=GetTile&LAYER=tas&STYLE=gray\
         &FORMAT=image/png&TILEMATRIXSET=WebMercatorQuad&TILEMATRIX=0&TILEROW=0&TILECOL=0",
    ),
    ("DAP2 .dods", "/v1/datasets/big/dap.dods?tas[0:1][0:1]"),
    ("DAP2 .ascii", "/v1/datasets/big/dap.ascii?tas[0:1][0:1]"),
    ("DAP4 .dap", "/v1/datasets/big/dap4.dap?dap4.ce=/tas%5B0:1%5D%5B0:1%5D"),
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
            n if n.starts_with("WMTS") => "ExceptionReport",
            n if n.starts_with("DAP2") => "Error {",
            n if n.starts_with("DAP4") => "<Error httpcode=\"503\">",
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
    // The held stream is the one read in flight, on its route.
    let in_flight = |metrics: &str| -> Vec<String> {
        metrics
            .lines()
            .filter(|l| l.starts_with("zarr_serve_reads_in_flight{") && !l.ends_with(" 0"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        in_flight(&metrics(&server).await),
        ["zarr_serve_reads_in_flight{route=\"/v1/datasets/{ds}/data/{*path}\"} 1"]
    );
    // Once the stream is gone its slot is free again.
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(in_flight(&metrics(&server).await), Vec::<String>::new());
    for (name, path) in DATA_ROUTES {
        let resp = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{name}");
    }
    let metrics = metrics(&server).await;
    // Every refusal above was counted.
    let refused: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("zarr_serve_overloaded_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no overloaded counter in {metrics}"));
    assert_eq!(refused, DATA_ROUTES.len() as u64, "{metrics}");
}

/// The server's `/metrics` text.
async fn metrics(server: &Server) -> String {
    let resp = client().get(server.url("/metrics")).send().await.unwrap();
    resp.text().await.unwrap()
}

/// Bytes the server has fetched from the `big` dataset's store so far.
async fn bytes_fetched(server: &Server) -> u64 {
    metrics(server)
        .await
        .lines()
        .find_map(|l| l.strip_prefix("zarr_serve_store_bytes_total{dataset=\"big\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A server over a 2048² grid with no decoded-chunk cache, so every answer
/// that reads chunk data fetches it from the store.
async fn uncached_big_server(dir: &std::path::Path, change: impl FnOnce(&mut zarr_serve::config::Config)) -> Server {
    uncached_grid_server(dir, 2048, change).await
}

/// [`uncached_big_server`] over an `n` x `n` grid.
async fn uncached_grid_server(
    dir: &std::path::Path,
    n: usize,
    change: impl FnOnce(&mut zarr_serve::config::Config),
) -> Server {
    common::geo::big_grid(dir, n);
    let mut cfg = config();
    cfg.datasets
        .insert("big".into(), common::dataset(dir.to_string_lossy()));
    cfg.decoded_chunk_cache_bytes = 0;
    change(&mut cfg);
    Server::start(cfg).await
}

/// api.md 4.1 (3, 7): every data route names its answer with a strong ETag
/// known before reading, answers a matching `If-None-Match` 304 and a HEAD
/// with GET's headers (`Content-Length` on both, when it is known before
/// reading), neither fetching any chunk data.
#[tokio::test]
async fn every_data_route_answers_304_and_head_without_reading_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let server = uncached_big_server(dir.path(), |_| {}).await;
    let mut failures = Vec::new();
    for (name, path) in DATA_ROUTES {
        let get = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(get.status(), 200, "{name}");
        let Some(etag) = get.headers().get("etag").cloned() else {
            failures.push(format!("{name}: no ETag"));
            continue;
        };
        let (get_type, get_length) = (
            get.headers().get("content-type").cloned(),
            get.headers().get("content-length").cloned(),
        );
        let body = get.bytes().await.unwrap();
        assert!(!body.is_empty(), "{name}");
        let before = bytes_fetched(&server).await;
        let again = client()
            .get(server.url(path))
            .header("if-none-match", etag.clone())
            .send()
            .await
            .unwrap();
        let fetched = bytes_fetched(&server).await - before;
        if again.status() != 304 || fetched != 0 {
            failures.push(format!(
                "{name}: If-None-Match answered {} after fetching {fetched} bytes",
                again.status()
            ));
        }
        let before = bytes_fetched(&server).await;
        let head = client().head(server.url(path)).send().await.unwrap();
        let fetched = bytes_fetched(&server).await - before;
        let same = head.status() == 200
            && head.headers().get("etag") == Some(&etag)
            && head.headers().get("content-type") == get_type.as_ref()
            && head.headers().get("content-length") == get_length.as_ref();
        if !same || fetched != 0 {
            failures.push(format!(
                "{name}: HEAD answered {} {:?} after fetching {fetched} bytes (GET: {etag:?} {get_type:?} {get_length:?})",
                head.status(),
                head.headers()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// api.md 4.1 (1): an answer above `max_response_bytes` (or, for pictures of
/// maps, chunk bytes above `tile_read_limit_bytes`) is 413 before any chunk
/// data is fetched, on every data route.
#[tokio::test]
async fn every_data_route_refuses_a_large_answer_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let server = uncached_big_server(dir.path(), |cfg| {
        cfg.max_response_bytes = 200_000;
        cfg.tile_read_limit_bytes = 200_000;
    })
    .await;
    // Each asks for more than 200 kB decoded (a chunk is 256 KiB).
    // The chunk keys, the tile and the map of DATA_ROUTES are large as they
    // are (a chunk is 256 KiB; the tile and the map decode every chunk).
    let as_they_are = [
        "passthrough chunk",
        "v2 view chunk",
        "tile",
        "WMTS GetTile",
        "WMS GetMap",
    ];
    let larger: [(&str, &str); 6] = [
        ("region read", "/v1/datasets/big/data/tas?select=0:512,0:512"),
        (
            "region read as JSON",
            "/v1/datasets/big/data/tas?select=0:512,0:512&format=json",
        ),
        ("DAP2 .dods", "/v1/datasets/big/dap.dods?tas[0:511][0:511]"),
        ("DAP2 .ascii", "/v1/datasets/big/dap.ascii?tas[0:511][0:511]"),
        (
            "DAP4 .dap",
            "/v1/datasets/big/dap4.dap?dap4.ce=/tas%5B0:511%5D%5B0:511%5D",
        ),
        (
            "EDR cube",
            "/v1/datasets/big/edr/collections/big/cube?bbox=-180,-90,180,90",
        ),
    ];
    let large = DATA_ROUTES
        .into_iter()
        .filter(|(name, _)| as_they_are.contains(name))
        .chain(larger);
    // Metadata and coordinates are read and cached first (a small EDR
    // query): only the variable's chunk bytes are counted below.
    let warm = client()
        .get(server.url("/v1/datasets/big/edr/collections/big/position?coords=POINT(0%200)"))
        .send()
        .await
        .unwrap();
    assert_eq!(warm.status(), 200);
    let mut failures = Vec::new();
    for (name, path) in large {
        let before = bytes_fetched(&server).await;
        let resp = client().get(server.url(path)).send().await.unwrap();
        let fetched = bytes_fetched(&server).await - before;
        let status = resp.status();
        let body = resp.text().await.unwrap();
        if status != 413 || fetched != 0 {
            failures.push(format!("{name}: {status} after fetching {fetched} bytes: {body:.200}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A HEAD before any GET reads no chunk data where the length is known
/// before reading, or GET streams without one; for an answer whose length
/// is known only once made (JSON, pictures, EDR NetCDF, whose file head is
/// built from the values read) it is made once to be measured, and its
/// second HEAD reads nothing.
#[tokio::test]
async fn a_first_head_reads_no_chunk_data_when_the_length_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let server = uncached_big_server(dir.path(), |_| {}).await;
    let known = [
        "/v1/datasets/big/data/tas?select=0:2,0:2",
        "/v1/datasets/big/zarr/tas/c/0/0",
        "/v1/datasets/big/v2/tas/0.0",
        "/v1/datasets/big/dap.dods?tas[0:1][0:1]",
        "/v1/datasets/big/dap.ascii?tas[0:1][0:1]",
        "/v1/datasets/big/dap4.dap?dap4.ce=/tas%5B0:1%5D%5B0:1%5D",
        "/v1/datasets/big/edr/collections/big/position?coords=POINT(0%200)",
    ];
    // Metadata and coordinates first: only chunk data is counted below.
    for path in [
        "/v1/datasets/big/nodes/tas",
        "/v1/datasets/big/dap.dds",
        "/v1/datasets/big/dap4.dmr",
        "/v1/datasets/big/edr/collections/big",
    ] {
        let warm = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(warm.status(), 200, "{path}");
    }
    let mut failures = Vec::new();
    for path in known {
        let before = bytes_fetched(&server).await;
        let head = client().head(server.url(path)).send().await.unwrap();
        let fetched = bytes_fetched(&server).await - before;
        if head.status() != 200 || !head.headers().contains_key("etag") || fetched != 0 {
            failures.push(format!("{path}: HEAD {} after fetching {fetched} bytes", head.status()));
        }
    }
    let measured = "/v1/datasets/big/data/tas?select=0:2,0:2&format=json";
    let first = client().head(server.url(measured)).send().await.unwrap();
    let length = first.headers().get("content-length").cloned();
    assert!(length.is_some(), "{:?}", first.headers());
    let before = bytes_fetched(&server).await;
    let second = client().head(server.url(measured)).send().await.unwrap();
    assert_eq!(second.headers().get("content-length"), length.as_ref());
    assert_eq!(bytes_fetched(&server).await - before, 0, "the second HEAD read");
    let get = client().get(server.url(measured)).send().await.unwrap();
    assert_eq!(get.headers().get("content-length"), length.as_ref());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every format that streams a large answer, as requests of the whole of
/// the `big` dataset's `tas`.
const STREAMED: [(&str, &str); 12] = [
    ("binary", "/v1/datasets/big/data/tas"),
    ("npy", "/v1/datasets/big/data/tas?format=npy"),
    ("JSON", "/v1/datasets/big/data/tas?format=json"),
    ("CSV", "/v1/datasets/big/data/tas?format=csv"),
    ("NetCDF", "/v1/datasets/big/data/tas?format=netcdf"),
    ("DAP2 .dods", "/v1/datasets/big/dap.dods?tas"),
    ("DAP2 .ascii", "/v1/datasets/big/dap.ascii?tas"),
    ("DAP4 .dap", "/v1/datasets/big/dap4.dap?dap4.ce=/tas"),
    (
        "EDR CoverageJSON",
        "/v1/datasets/big/edr/collections/big/cube?bbox=-180,-90,180,90",
    ),
    (
        "EDR GeoJSON",
        "/v1/datasets/big/edr/collections/big/cube?bbox=-180,-90,180,90&f=GeoJSON",
    ),
    (
        "EDR CSV",
        "/v1/datasets/big/edr/collections/big/cube?bbox=-180,-90,180,90&f=CSV",
    ),
    (
        "EDR NetCDF",
        "/v1/datasets/big/edr/collections/big/cube?bbox=-180,-90,180,90&f=NetCDF",
    ),
];

/// A counter or gauge of `/metrics` without labels, or with exactly `labels`.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// The read slots held now, over every route.
fn reads_in_flight(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with("zarr_serve_reads_in_flight"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A body read until it ends or fails: the bytes that came, and whether
/// it ended cleanly.
async fn drain(resp: reqwest::Response) -> (u64, bool) {
    use futures::StreamExt;
    let mut stream = resp.bytes_stream();
    let mut bytes = 0;
    while let Some(piece) = stream.next().await {
        match piece {
            Ok(piece) => bytes += piece.len() as u64,
            Err(_) => return (bytes, false),
        }
    }
    (bytes, true)
}

/// api.md 4.1 (6): a chunk that fails after the status went out ends the
/// connection short in every streaming format (never a body that looks
/// whole), is counted, and leaves no read slot held.
#[tokio::test]
async fn a_failure_mid_stream_cuts_every_streamed_body_short() {
    let dir = tempfile::tempdir().unwrap();
    let server = uncached_big_server(dir.path(), |cfg| cfg.slab_bytes = 256 << 10).await;
    // The last chunk in C order, cut short: found corrupt only when reached.
    let last = dir.path().join("tas/c/7/7");
    let stored = std::fs::read(&last).unwrap();
    std::fs::write(&last, &stored[..stored.len() / 2]).unwrap();
    let mut failures = Vec::new();
    for (name, path) in STREAMED {
        let before = metric(&metrics(&server).await, "zarr_serve_stream_errors_total");
        let resp = client().get(server.url(path)).send().await.unwrap();
        let status = resp.status();
        let length = resp.content_length();
        let (got, clean) = drain(resp).await;
        let after = metrics(&server).await;
        let counted = metric(&after, "zarr_serve_stream_errors_total") - before;
        let looks_whole = clean && length.is_none_or(|l| got >= l);
        if status != 200 || looks_whole || counted != 1 {
            failures.push(format!(
                "{name}: {status}, {got} of {length:?} bytes, ended cleanly: {clean}, stream errors counted: {counted}"
            ));
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        reads_in_flight(&metrics(&server).await),
        0,
        "slots held after the failures"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// api.md 4.1 (5): a client that goes away after the first bytes of a
/// large streamed answer stops the reading: the read slot frees, the store
/// is asked for at most the slabs in flight once it has (the slab being
/// read and the one read ahead: the reading notices at its next piece),
/// and for less than half the
/// answer (what was in flight: a slab read ahead, a piece queued and the
/// sockets' buffers, which loopback autotuning lets grow to tens of MiB;
/// about 8 MiB here), in every streaming format.
#[tokio::test]
async fn a_client_that_goes_away_stops_every_stream() {
    let dir = tempfile::tempdir().unwrap();
    let server = uncached_grid_server(dir.path(), 4096, |cfg| cfg.slab_bytes = 256 << 10).await;
    // The whole array is 64 MiB of chunks; a stream that went on would
    // fetch all of it.
    let whole = 4096 * 4096 * 4;
    let mut failures = Vec::new();
    for (name, path) in STREAMED {
        let before = bytes_fetched(&server).await;
        let mut resp = client().get(server.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{name}");
        assert!(resp.chunk().await.unwrap().is_some(), "{name}: no first piece");
        drop(resp);
        // Until the server has noticed: its slot freed.
        let started = std::time::Instant::now();
        while reads_in_flight(&metrics(&server).await) > 0 && started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let held = reads_in_flight(&metrics(&server).await);
        let fetched = bytes_fetched(&server).await - before;
        // Then until the reading has stopped: nothing fetched for 300 ms.
        let mut later = fetched;
        let settling = std::time::Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let now = bytes_fetched(&server).await - before;
            if now == later || settling.elapsed() > Duration::from_secs(5) {
                break;
            }
            later = now;
        }
        // The slabs in flight when the slot freed (the one being read and
        // the one read ahead, each a few reads of whole chunk rows that a
        // blocking thread finishes once begun) may still finish: at most a
        // few slabs, never the rest of the answer.
        let in_flight = 8 * (256 << 10);
        if held > 0 || later > fetched + in_flight || later > whole / 2 {
            failures.push(format!(
                "{name}: {held} slots held 5 s after the client left; {fetched} of {whole} bytes fetched, {later} once the reading stopped"
            ));
        }
        println!("{name}: {fetched} of {whole} bytes fetched before the stream stopped");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
