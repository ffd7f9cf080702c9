//! The HTTP contract (api.md) against the real server on an ephemeral port.

mod common;

use common::{client, config, fixtures, manifest, Server};
use reqwest::header;
use serde_json::Value;
use zarr_serve::config::Config;

async fn get(server: &Server, path: &str) -> reqwest::Response {
    client().get(server.url(path)).send().await.unwrap()
}

async fn problem(resp: reqwest::Response, status: u16) -> Value {
    assert_eq!(resp.status().as_u16(), status, "{}", resp.url());
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/problem+json");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["status"], status);
    assert!(
        body["type"].is_string() && body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    body
}

fn expected(path: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(path)).unwrap()
}

fn array_entry(path: &str) -> Value {
    manifest()["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["path"] == path)
        .cloned()
        .expect(path)
}

#[tokio::test]
async fn operational_endpoints() {
    let server = Server::start(config()).await;
    let health = get(&server, "/healthz").await;
    assert_eq!(
        (health.status().as_u16(), health.text().await.unwrap()),
        (200, "ok".to_string())
    );
    assert_eq!(get(&server, "/readyz").await.status(), 200);
    let openapi = get(&server, "/openapi.yaml").await;
    assert_eq!(openapi.status(), 200);
    assert!(openapi.text().await.unwrap().contains("openapi: 3.1"));
    let _ = get(&server, "/v1/datasets/fixtures/data/zarr_python/int16?select=0").await;
    let metrics = get(&server, "/metrics").await.text().await.unwrap();
    for family in [
        "zarr_serve_requests_total{route=\"/v1/datasets/{ds}/data/{*path}\",status=\"200\"} 1",
        "zarr_serve_request_duration_seconds_bucket",
        "zarr_serve_store_requests_total{dataset=\"fixtures\"}",
        "zarr_serve_store_bytes_total{dataset=\"fixtures\"}",
        "zarr_serve_cache_hits_total{cache=\"metadata\"}",
        "zarr_serve_cache_misses_total{cache=\"shard_index\"}",
        "zarr_serve_cache_entries{cache=\"decoded_chunk\"}",
    ] {
        assert!(metrics.contains(family), "{family} missing from\n{metrics}");
    }
}

/// The cache sizes in /metrics are those of the moment, not a housekeeping
/// round behind: one small read of a sharded array shows up at once.
#[tokio::test]
async fn metrics_count_a_cached_chunk_at_once() {
    let server = Server::start(config()).await;
    let path = "/v1/datasets/fixtures/data/zarr_python/shard_end_crc?select=0:2,0:2";
    assert_eq!(get(&server, path).await.status(), 200);
    let metrics = get(&server, "/metrics").await.text().await.unwrap();
    let value = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(name));
        let line = line.unwrap_or_else(|| panic!("{name} missing from\n{metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value("zarr_serve_cache_entries{cache=\"decoded_chunk\"}"), 1);
    assert!(value("zarr_serve_cache_size{cache=\"decoded_chunk\"}") > 0);
    assert_eq!(value("zarr_serve_cache_entries{cache=\"shard_index\"}"), 1);
}

#[tokio::test]
async fn readiness_names_an_unreachable_store() {
    let mut cfg = config();
    let mut s3 = common::dataset("s3://bucket/prefix");
    s3.options.insert("endpoint".into(), "http://127.0.0.1:9".into());
    s3.options.insert("region".into(), "us-east-1".into());
    s3.options.insert("allow_http".into(), "true".into());
    s3.options.insert("access_key_id".into(), "AKIDEXAMPLE".into());
    s3.options.insert("secret_access_key".into(), "very-secret-key".into());
    cfg.datasets.insert("down".into(), s3);
    cfg.store_retries = 0;
    cfg.store_timeout_secs = 2.0;
    let server = Server::start(cfg).await;
    let ready = get(&server, "/readyz").await;
    assert_eq!(ready.status(), 503);
    let body = ready.text().await.unwrap();
    assert!(body.contains("down") && !body.contains("fixtures:"), "{body}");
    // Other datasets keep serving; the dead one answers 503 with Retry-After.
    assert_eq!(get(&server, "/v1/datasets/fixtures/nodes").await.status(), 200);
    let resp = get(&server, "/v1/datasets/down/nodes").await;
    assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
    let detail = problem(resp, 503).await.to_string();
    let listing = get(&server, "/v1/datasets").await.text().await.unwrap();
    for text in [&detail, &listing, &body] {
        assert!(
            !text.contains("very-secret-key") && !text.contains("AKIDEXAMPLE"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn datasets_and_node_documents() {
    let server = Server::start(config()).await;
    let list: Value = get(&server, "/v1/datasets").await.json().await.unwrap();
    let names: Vec<&str> = list["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fixtures", "sample"]);

    let root: Value = get(&server, "/v1/datasets/fixtures/nodes").await.json().await.unwrap();
    assert_eq!(
        (
            root["path"].as_str(),
            root["node_type"].as_str(),
            root["implicit"].as_bool()
        ),
        (Some("/"), Some("group"), Some(false))
    );
    let children: Vec<&str> = root["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let mut sorted = children.clone();
    sorted.sort();
    assert_eq!(children, sorted);
    assert!(
        children.contains(&"implicit_parent") && !children.contains(&"README.txt"),
        "{children:?}"
    );
    let implicit: Value = get(&server, "/v1/datasets/fixtures/nodes/implicit_parent")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (implicit["implicit"].as_bool(), &implicit["attributes"]),
        (Some(true), &serde_json::json!({}))
    );

    let sample: Value = get(&server, "/v1/datasets/sample/nodes/temperature")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(sample["path"], "/temperature");
    assert_eq!(sample["chunk_shape"], serde_json::json!([16, 128, 128]));
    assert_eq!(sample["read_chunk_shape"], serde_json::json!([4, 32, 32]));
    assert_eq!(sample["chunk_grid_shape"], serde_json::json!([4, 2, 2]));
    assert_eq!(sample["readable"], true);
    assert_eq!(sample["metadata"]["node_type"], "array");

    let unsupported: Value = get(&server, "/v1/datasets/fixtures/nodes/unsupported/unknown_codec")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(unsupported["readable"], false);
    assert!(unsupported["unreadable_reason"].as_str().unwrap().contains("foo_codec"));

    // An unreadable array is still described as 2.1 says: its v3 data type
    // name and xarray's dimension names (v2 and v3 alike).
    let dir = tempfile::tempdir().unwrap();
    let v2 = dir.path().join("v2");
    std::fs::create_dir(&v2).unwrap();
    std::fs::write(
        v2.join(".zarray"),
        r#"{"zarr_format": 2, "shape": [4, 6], "chunks": [2, 3], "dtype": ">i2",
        "compressor": {"id": "no_such_codec"}, "fill_value": 0, "order": "C", "filters": null}"#,
    )
    .unwrap();
    std::fs::write(v2.join(".zattrs"), r#"{"_ARRAY_DIMENSIONS": ["y", "x"]}"#).unwrap();
    let v3 = dir.path().join("v3");
    std::fs::create_dir(&v3).unwrap();
    std::fs::write(
        v3.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "array", "shape": [4, 6],
        "data_type": "uint32", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "no_such_codec"}],
        "attributes": {"_ARRAY_DIMENSIONS": ["t", "x"]}}"#,
    )
    .unwrap();
    let mut cfg = config();
    cfg.datasets
        .insert("odd".into(), common::dataset(dir.path().to_string_lossy()));
    let odd = Server::start(cfg).await;
    for (path, data_type, dims) in [("v2", "int16", ["y", "x"]), ("v3", "uint32", ["t", "x"])] {
        let doc: Value = get(&odd, &format!("/v1/datasets/odd/nodes/{path}"))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(doc["readable"], false, "{doc}");
        assert!(
            doc["unreadable_reason"].as_str().unwrap().contains("no_such_codec"),
            "{doc}"
        );
        assert_eq!(doc["data_type"], data_type, "{doc}");
        assert_eq!(doc["dimension_names"], serde_json::json!(dims), "{doc}");
    }

    // Attributes exactly as stored, integers beyond 64 bits included.
    let big = manifest()["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| {
            a["features"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f == "big-int-attribute")
        })
        .cloned()
        .unwrap();
    let path = big["path"].as_str().unwrap();
    let doc = get(&server, &format!("/v1/datasets/fixtures/nodes/{path}"))
        .await
        .text()
        .await
        .unwrap();
    let stored = std::fs::read_to_string(fixtures().join("data.zarr").join(path).join("zarr.json")).unwrap();
    let digits = stored
        .split(|c: char| !c.is_ascii_digit())
        .find(|d| d.len() > 20)
        .expect("a >64-bit integer");
    assert!(doc.contains(digits), "{digits} not in {doc}");

    problem(get(&server, "/v1/datasets/fixtures/nodes/no/such/node").await, 404).await;
    problem(get(&server, "/v1/datasets/nope/nodes").await, 404).await;
    problem(get(&server, "/v1/datasets/fixtures/nodes/a%2F..%2F..%2Fetc").await, 400).await;
    let not_json = client()
        .get(server.url("/v1/datasets/fixtures/nodes"))
        .header(header::ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    problem(not_json, 406).await;
}

#[tokio::test]
async fn region_formats_match_numpy() {
    let server = Server::start(config()).await;
    for path in [
        "zarr_python/int16",
        "tensorstore/shard_end_crc",
        "zarr_python/complex128",
    ] {
        let Some(array) = manifest()["arrays"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["path"] == path)
            .cloned()
        else {
            continue;
        };
        for sel in array["selections"].as_array().unwrap() {
            let select = sel["select"].as_str().unwrap();
            let want = expected(sel["expected"].as_str().unwrap());
            let url = format!("/v1/datasets/fixtures/data/{path}");
            let binary = client()
                .get(server.url(&url))
                .query(&[("select", select)])
                .send()
                .await
                .unwrap();
            assert_eq!(binary.status(), 200, "{path} {select}");
            let shape: Vec<String> = sel["shape"].as_array().unwrap().iter().map(|n| n.to_string()).collect();
            assert_eq!(binary.headers()["zarr-shape"], shape.join(",").as_str());
            assert_eq!(binary.headers()["zarr-data-type"], array["data_type"].as_str().unwrap());
            assert_eq!(binary.headers()[header::CONTENT_TYPE], "application/octet-stream");
            assert_eq!(
                binary.headers()[header::CONTENT_LENGTH],
                want.len().to_string().as_str()
            );
            assert_eq!(binary.bytes().await.unwrap().to_vec(), want, "{path} {select}");

            let npy = client()
                .get(server.url(&url))
                .query(&[("select", select)])
                .header(header::ACCEPT, "application/x-npy")
                .send()
                .await
                .unwrap();
            assert_eq!(npy.headers()[header::CONTENT_TYPE], "application/x-npy");
            let body = npy.bytes().await.unwrap();
            assert_eq!(&body[..6], b"\x93NUMPY");
            let header_len = u16::from_le_bytes([body[8], body[9]]) as usize;
            assert_eq!(body[10 + header_len..].to_vec(), want);
        }
    }
    let json: Value = get(
        &server,
        "/v1/datasets/fixtures/data/zarr_python/int16?select=0:2,0:3&format=json",
    )
    .await
    .json()
    .await
    .unwrap();
    let raw = expected(array_entry("zarr_python/int16")["expected"].as_str().unwrap());
    let cols = array_entry("zarr_python/int16")["shape"][1].as_u64().unwrap() as usize;
    let at = |r: usize, c: usize| i16::from_le_bytes([raw[2 * (r * cols + c)], raw[2 * (r * cols + c) + 1]]) as i64;
    assert_eq!(json["shape"], serde_json::json!([2, 3]));
    assert_eq!(json["data"][1][2].as_i64(), Some(at(1, 2)));
    let scalar: Value = get(
        &server,
        "/v1/datasets/fixtures/data/zarr_python/int16?select=1,2&format=json",
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(scalar["data"].as_i64(), Some(at(1, 2)));
}

#[tokio::test]
async fn data_errors_follow_the_contract() {
    let mut cfg = config();
    cfg.max_response_bytes = 100;
    let server = Server::start(cfg).await;
    let base = "/v1/datasets/fixtures/data";
    let e = problem(get(&server, &format!("{base}/zarr_python/int16")).await, 413).await;
    let detail = e["detail"].as_str().unwrap();
    let size = 2 * array_entry("zarr_python/int16")["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .product::<u64>();
    assert!(detail.contains(&size.to_string()) && detail.contains("100"), "{detail}");
    problem(
        get(&server, &format!("{base}/zarr_python/int16?select=0:1,0:1:0")).await,
        400,
    )
    .await;
    problem(get(&server, &format!("{base}/zarr_python/int16?select=abc")).await, 400).await;
    problem(
        get(&server, &format!("{base}/zarr_python/int16?select=1000,0")).await,
        400,
    )
    .await;
    problem(
        get(&server, &format!("{base}/zarr_python/int16?select=0&select=1")).await,
        400,
    )
    .await;
    problem(
        get(&server, &format!("{base}/zarr_python/int16?select=0,0&format=xlsx")).await,
        400,
    )
    .await;
    let r = client()
        .get(server.url(&format!("{base}/zarr_python/int16?select=0,0")))
        .header(header::ACCEPT, "application/vnd.ms-excel")
        .send()
        .await
        .unwrap();
    problem(r, 406).await;
    problem(get(&server, &format!("{base}/zarr_python?select=0")).await, 400).await;
    problem(get(&server, base).await, 400).await;
    problem(get(&server, &format!("{base}/no_such_array")).await, 404).await;
    problem(get(&server, "/v1/datasets/nope/data/x").await, 404).await;
    for case in manifest()["unsupported"].as_array().unwrap() {
        problem(
            get(&server, &format!("{base}/{}?select=0", case["path"].as_str().unwrap())).await,
            501,
        )
        .await;
    }
    for case in manifest()["corrupt"].as_array().unwrap() {
        let url = format!(
            "{base}/{}?select={}",
            case["path"].as_str().unwrap(),
            case["select"].as_str().unwrap()
        );
        problem(get(&server, &url).await, 502).await;
    }
}

#[tokio::test]
async fn etags_heads_and_conditional_requests() {
    let server = Server::start(config()).await;
    let url = server.url("/v1/datasets/sample/data/temperature?select=0,0:8,0:8");
    let first = client().get(&url).send().await.unwrap();
    let etag = first.headers()[header::ETAG].to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && !etag.starts_with("W/"), "strong: {etag}");
    let body = first.bytes().await.unwrap();
    let head = client().head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()[header::ETAG], etag.as_str());
    assert_eq!(head.headers()[header::CONTENT_LENGTH], body.len().to_string().as_str());
    let cached = client()
        .get(&url)
        .header(header::IF_NONE_MATCH, &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), 304);
    let npy = client().get(format!("{url}&format=npy")).send().await.unwrap();
    assert_ne!(npy.headers()[header::ETAG], etag.as_str(), "format changes the ETag");
    let other = client()
        .get(server.url("/v1/datasets/sample/data/temperature?select=1,0:8,0:8"))
        .send()
        .await
        .unwrap();
    assert_ne!(
        other.headers()[header::ETAG],
        etag.as_str(),
        "selection changes the ETag"
    );
    let same = client()
        .get(server.url("/v1/datasets/sample/data/temperature?select=[0,:8,-256:8]"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        same.headers()[header::ETAG],
        etag.as_str(),
        "the same elements written differently"
    );
}

#[tokio::test]
async fn large_responses_stream_and_match() {
    let mut cfg = config();
    cfg.slab_bytes = 64;
    let server = Server::start(cfg).await;
    let mut checked = 0;
    for array in manifest()["arrays"].as_array().unwrap().iter().take(60) {
        let path = array["path"].as_str().unwrap();
        let want = expected(array["expected"].as_str().unwrap());
        let resp = get(&server, &format!("/v1/datasets/fixtures/data/{path}")).await;
        assert_eq!(resp.status(), 200, "{path}");
        let length: usize = resp.headers()[header::CONTENT_LENGTH]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let body = resp.bytes().await.unwrap();
        assert_eq!((length, body.to_vec()), (want.len(), want), "{path}");
        checked += 1;
    }
    assert!(checked >= 50);
    // The whole sample cube (16 MiB) in 64-byte-target slabs: far larger than any slab.
    let resp = get(&server, "/v1/datasets/sample/data/temperature?format=npy").await;
    let length: usize = resp.headers()[header::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(resp.bytes().await.unwrap().len(), length);
}

#[tokio::test]
async fn an_error_mid_stream_cuts_the_connection_short() {
    let mut cfg = config();
    cfg.slab_bytes = 64;
    let server = Server::start(cfg).await;
    // Reversed rows: the corrupt chunk (row block 0) is in the last slab.
    let resp = get(&server, "/v1/datasets/fixtures/data/corrupt/gzip_truncated?select=::-1").await;
    assert_eq!(resp.status(), 200, "headers go out before the corrupt chunk is reached");
    let length: usize = resp.headers()[header::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    if let Ok(body) = resp.bytes().await {
        assert!(body.len() < length, "a truncated body must not look whole");
    }
    let metrics = get(&server, "/metrics").await.text().await.unwrap();
    assert!(metrics.contains("zarr_serve_stream_errors_total 1"), "{metrics}");
    assert_eq!(get(&server, "/healthz").await.status(), 200);
}

#[tokio::test]
async fn passthrough_serves_raw_bytes_with_ranges() {
    let server = Server::start(config()).await;
    let key = "zarr_python/int16/zarr.json";
    let stored = std::fs::read(fixtures().join("data.zarr").join(key)).unwrap();
    let url = server.url(&format!("/v1/datasets/fixtures/zarr/{key}"));
    let whole = client().get(&url).send().await.unwrap();
    assert_eq!(whole.status(), 200);
    assert_eq!(whole.headers()[header::ACCEPT_RANGES], "bytes");
    assert!(whole.headers().contains_key(header::LAST_MODIFIED));
    let etag = whole.headers()[header::ETAG].to_str().unwrap().to_string();
    assert_eq!(whole.bytes().await.unwrap().to_vec(), stored);
    let n = stored.len();
    for (range, want, content_range) in [
        ("bytes=0-9", &stored[..10], format!("bytes 0-9/{n}")),
        ("bytes=5-", &stored[5..], format!("bytes 5-{}/{n}", n - 1)),
        ("bytes=-7", &stored[n - 7..], format!("bytes {}-{}/{n}", n - 7, n - 1)),
    ] {
        let resp = client()
            .get(&url)
            .header(header::RANGE, range)
            .header(header::ACCEPT_ENCODING, "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 206, "{range}");
        assert_eq!(resp.headers()[header::CONTENT_RANGE], content_range.as_str());
        assert!(
            !resp.headers().contains_key(header::CONTENT_ENCODING),
            "ranged responses are never compressed"
        );
        assert_eq!(resp.bytes().await.unwrap().to_vec(), want.to_vec());
    }
    for range in ["bytes=-0", &format!("bytes={n}-"), "bytes=9-3"] {
        let resp = client().get(&url).header(header::RANGE, range).send().await.unwrap();
        assert_eq!(resp.headers()[header::CONTENT_RANGE], format!("bytes */{n}").as_str());
        problem(resp, 416).await;
    }
    let head = client().head(&url).send().await.unwrap();
    assert_eq!(
        (
            head.status().as_u16(),
            head.headers()[header::CONTENT_LENGTH].to_str().unwrap()
        ),
        (200, n.to_string().as_str())
    );
    let not_modified = client()
        .get(&url)
        .header(header::IF_NONE_MATCH, &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), 304);
    problem(
        get(&server, "/v1/datasets/fixtures/zarr/zarr_python/int16/c/99/99").await,
        404,
    )
    .await;
    problem(get(&server, "/v1/datasets/fixtures/zarr/zarr_python").await, 404).await;
}

/// Send a request line as-is (HTTP clients normalise `..` and `%2e%2e` away).
async fn raw_status(server: &Server, target: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn traversal_and_bad_keys_never_reach_the_store() {
    let server = Server::start(config()).await;
    let probes = [
        "/v1/datasets/fixtures/zarr/..%2F..%2Fetc%2Fpasswd",
        "/v1/datasets/fixtures/zarr/%2e%2e/%2e%2e/etc/passwd",
        "/v1/datasets/fixtures/zarr/%252e%252e/etc/passwd",
        "/v1/datasets/fixtures/zarr/zarr_python/./zarr.json",
        "/v1/datasets/fixtures/zarr/a%5C..%5Cb",
        "/v1/datasets/fixtures/zarr/%2Fetc%2Fpasswd",
        "/v1/datasets/fixtures/zarr/a%00b",
        "/v1/datasets/fixtures/zarr/a%0Ab",
        "/v1/datasets/fixtures/zarr/zarr_python//zarr.json",
        "/v1/datasets/fixtures/nodes/..%2F..",
        "/v1/datasets/fixtures/data/..%2Fsample%2Ftemperature",
        "/v1/datasets/fixtures/zarr/../../../etc/passwd",
        "/v1/datasets/fixtures/zarr/zarr_python/../../x",
        "/v1/datasets/fixtures/zarr/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "/v1/datasets/fixtures/zarr/..%5C..%5Cwindows",
        "/v1/datasets/fixtures/zarr/%C0%AE%C0%AE/etc",
    ];
    let before = get(&server, "/metrics").await.text().await.unwrap();
    let count = |m: &str| {
        m.lines()
            .find(|l| l.starts_with("zarr_serve_store_requests_total{dataset=\"fixtures\"}"))
            .map(str::to_string)
    };
    for probe in probes {
        assert_eq!(raw_status(&server, probe).await, 400, "{probe}");
    }
    let after = get(&server, "/metrics").await.text().await.unwrap();
    assert_eq!(count(&before), count(&after), "no store request was made");
}

#[tokio::test]
async fn bearer_tokens_cors_and_compression() {
    let mut cfg: Config = config();
    cfg.datasets.get_mut("sample").unwrap().token = Some("s3cr3t-token".into());
    let server = Server::start(cfg).await;
    let url = server.url("/v1/datasets/sample/nodes");
    problem(client().get(&url).send().await.unwrap(), 401).await;
    problem(client().get(&url).bearer_auth("wrong").send().await.unwrap(), 403).await;
    assert_eq!(
        client()
            .get(&url)
            .bearer_auth("s3cr3t-token")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let listing = get(&server, "/v1/datasets").await.text().await.unwrap();
    assert!(!listing.contains("s3cr3t"));

    let allowed = client()
        .get(server.url("/v1/datasets"))
        .header(header::ORIGIN, "https://viewer.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        allowed.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "https://viewer.example"
    );
    let other = client()
        .get(server.url("/v1/datasets"))
        .header(header::ORIGIN, "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(!other.headers().contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
    // No origins configured: no CORS headers of any kind.
    let mut closed = config();
    closed.cors_origins.clear();
    let closed = Server::start(closed).await;
    let resp = client()
        .get(closed.url("/v1/datasets"))
        .header(header::ORIGIN, "https://viewer.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let cors: Vec<_> = resp
        .headers()
        .keys()
        .filter(|k| k.as_str().starts_with("access-control-"))
        .collect();
    assert!(cors.is_empty(), "{cors:?}");
    assert!(!resp
        .headers()
        .get_all(header::VARY)
        .iter()
        .any(|v| v.to_str().unwrap().contains("origin")));

    for encoding in ["gzip", "zstd", "br"] {
        let resp = client()
            .get(server.url("/v1/datasets/fixtures/nodes"))
            .header(header::ACCEPT_ENCODING, encoding)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()[header::CONTENT_ENCODING], encoding);
    }
}

/// Data responses up to `compress_max_bytes` compress on request and decode
/// to the same bytes; larger binary and npy ones are sent as they are, JSON
/// always compresses.
#[tokio::test]
async fn large_numeric_responses_are_not_compressed() {
    let mut cfg = config();
    cfg.compress_max_bytes = 1000;
    let server = Server::start(cfg).await;
    let fetch = |select: &'static str, format: &'static str| {
        let url = server.url(&format!(
            "/v1/datasets/sample/data/temperature?select={select}&format={format}"
        ));
        async move {
            let resp = client()
                .get(url)
                .header(header::ACCEPT_ENCODING, "zstd")
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let coding = resp
                .headers()
                .get(header::CONTENT_ENCODING)
                .map(|v| v.to_str().unwrap().to_string());
            (coding, resp.bytes().await.unwrap())
        }
    };
    let plain = |select: &'static str| {
        let url = server.url(&format!("/v1/datasets/sample/data/temperature?select={select}"));
        async move { client().get(url).send().await.unwrap().bytes().await.unwrap() }
    };
    let (coding, small) = fetch("0,0:8,0:8", "binary").await;
    assert_eq!(coding.as_deref(), Some("zstd"), "a small region compresses");
    assert_eq!(zstd::decode_all(&small[..]).unwrap(), plain("0,0:8,0:8").await);
    for format in ["binary", "npy"] {
        let (coding, large) = fetch("0", format).await;
        assert_eq!(coding, None, "{format} larger than compress_max_bytes");
        assert!(large.len() > 1000);
    }
    assert_eq!(fetch("0", "binary").await.1, plain("0").await);
    let (coding, _) = fetch("0", "json").await;
    assert_eq!(coding.as_deref(), Some("zstd"), "JSON always compresses");
    // Without format=, Accept picks the representation: caches must know.
    let resp = get(&server, "/v1/datasets/sample/data/temperature?select=0").await;
    let vary: Vec<String> = resp
        .headers()
        .get_all(header::VARY)
        .iter()
        .flat_map(|v| v.to_str().unwrap().split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    assert!(vary.contains(&"accept".to_string()), "{vary:?}");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let server = Server::start(config()).await;
    let long = format!("/v1/datasets/sample/data/mask?select={}", "0,".repeat(5000));
    problem(get(&server, &long).await, 414).await;
    let mut big = client().get(server.url("/healthz"));
    for i in 0..40 {
        big = big.header(format!("x-padding-{i}"), "y".repeat(1000));
    }
    problem(big.send().await.unwrap(), 431).await;
    problem(get(&server, "/v2/nothing").await, 404).await;
    let post = client().post(server.url("/v1/datasets")).send().await.unwrap();
    problem(post, 405).await;
}

#[tokio::test]
async fn shutdown_finishes_in_flight_requests() {
    let mut cfg = config();
    cfg.slab_bytes = 4096;
    let server = Server::start(cfg).await;
    let url = server.url("/v1/datasets/sample/data/temperature");
    let resp = client().get(&url).send().await.unwrap();
    let length: usize = resp.headers()[header::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let reading = tokio::spawn(async move { resp.bytes().await.map(|b| b.len()) });
    server.stop().await;
    assert_eq!(
        reading.await.unwrap().unwrap(),
        length,
        "the in-flight response completed"
    );
}

/// A store that accepts connections and never answers: 504 after the store
/// timeout, while other datasets keep serving.
#[tokio::test]
async fn a_silent_store_times_out_with_504() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let mut cfg = config();
    let mut s3 = common::dataset("s3://bucket/prefix");
    s3.options.insert("endpoint".into(), format!("http://{addr}"));
    s3.options.insert("region".into(), "us-east-1".into());
    s3.options.insert("allow_http".into(), "true".into());
    s3.options.insert("access_key_id".into(), "test".into());
    s3.options.insert("secret_access_key".into(), "test".into());
    cfg.datasets.insert("silent".into(), s3);
    cfg.store_retries = 0;
    cfg.store_timeout_secs = 0.5;
    let server = Server::start(cfg).await;
    let started = std::time::Instant::now();
    problem(get(&server, "/v1/datasets/silent/data/x").await, 504).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(get(&server, "/v1/datasets/fixtures/nodes").await.status(), 200);
    hold.abort();
}

/// A handler that panics is answered 500 (problem+json) and the server
/// keeps serving.
#[tokio::test]
async fn a_panicking_handler_is_a_500_and_the_server_keeps_serving() {
    use axum::routing::get;
    use zarr_serve::http::{routes, with_middleware, AppState};
    let state = AppState::from_config(&config()).unwrap();
    let app = with_middleware(
        routes().route(
            "/boom",
            get(|| async { panic!("deliberate test panic") as &'static str }),
        ),
        state,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let boom = client().get(format!("{base}/boom")).send().await.unwrap();
    assert_eq!(boom.status(), 500);
    assert_eq!(boom.headers()[header::CONTENT_TYPE], "application/problem+json");
    for _ in 0..3 {
        assert_eq!(
            client().get(format!("{base}/healthz")).send().await.unwrap().status(),
            200
        );
        assert_eq!(client().get(format!("{base}/boom")).send().await.unwrap().status(), 500);
    }
}

/// The Zarr v2 view: consolidated metadata, `.zarray` with the read chunk
/// shape, edge chunks padded to the full chunk with the array's elements in
/// place, 404 outside the grid; listings of the view and the passthrough.
#[tokio::test]
async fn v2_view_and_listings() {
    let server = Server::start(config()).await;
    let path = "zarr_python/int16"; // 13 x 17 in 5 x 6 chunks
    let entry = array_entry(path);
    let whole = expected(entry["expected"].as_str().unwrap());
    let zarray: Value = get(&server, &format!("/v1/datasets/fixtures/v2/{path}/.zarray"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(zarray["chunks"], serde_json::json!([5, 6]));
    assert_eq!(
        (zarray["dtype"].as_str(), zarray["order"].as_str()),
        (Some("<i2"), Some("C"))
    );
    // The corner chunk (2, 2) holds rows 10..13 and columns 12..17.
    let chunk = get(&server, &format!("/v1/datasets/fixtures/v2/{path}/2.2")).await;
    assert_eq!(chunk.status(), 200);
    let chunk = chunk.bytes().await.unwrap();
    assert_eq!(chunk.len(), 5 * 6 * 2, "padded to the full chunk");
    for row in 0..3 {
        let src = ((10 + row) * 17 + 12) * 2;
        assert_eq!(&chunk[row * 12..row * 12 + 10], &whole[src..src + 10], "row {row}");
    }
    assert_eq!(
        get(&server, &format!("/v1/datasets/fixtures/v2/{path}/3.0"))
            .await
            .status(),
        404
    );
    problem(
        get(&server, "/v1/datasets/fixtures/v2/zarr_python/nope/.zarray").await,
        404,
    )
    .await;
    let meta: Value = get(&server, "/v1/datasets/fixtures/v2/.zmetadata")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(meta["metadata"][format!("{path}/.zarray")], zarray);
    assert_eq!(
        meta["metadata"]["v2/zlib/.zarray"]["compressor"],
        Value::Null,
        "served decoded"
    );
    let root = json_listing(&server, "/v1/datasets/fixtures/zarr/").await;
    assert!(root["prefixes"].as_array().unwrap().iter().any(|p| p == "zarr_python"));
    assert!(root["keys"].as_array().unwrap().iter().any(|k| k == "zarr.json"));
    let view = json_listing(&server, &format!("/v1/datasets/fixtures/v2/{path}/")).await;
    assert_eq!(
        view["keys"].as_array().unwrap().len(),
        2 + 9,
        ".zarray, .zattrs and 3 x 3 chunks"
    );
    let html = get(&server, "/v1/datasets/fixtures/zarr/zarr_python/").await;
    assert!(html.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(html.text().await.unwrap().contains("<a href=\"int16/\">"));
}

async fn json_listing(server: &Server, path: &str) -> Value {
    let resp = client()
        .get(server.url(path))
        .header(header::ACCEPT, "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    resp.json().await.unwrap()
}

/// Contract 2.8: a path that is not UTF-8 once percent-decoded (overlong
/// forms included) is a 400 problem on every route.
#[tokio::test]
async fn undecodable_paths_are_problems_on_every_route() {
    let server = Server::start(config()).await;
    for bad in ["%c0%ae%c0%ae", "%ff", "a%80b"] {
        for route in [
            format!("/v1/datasets/{bad}"),
            format!("/v1/datasets/{bad}/nodes"),
            format!("/v1/datasets/sample/nodes/{bad}"),
            format!("/v1/datasets/sample/data/{bad}"),
            format!("/v1/datasets/sample/zarr/{bad}"),
            format!("/v1/datasets/sample/v2/{bad}"),
        ] {
            // reqwest would re-encode the path: send it as written.
            let resp = client().get(server.url(&route)).send().await.unwrap();
            assert_eq!(resp.url().path(), route, "sent as written");
            problem(resp, 400).await;
        }
    }
    assert_eq!(raw_status(&server, "/v1/datasets/sample/nodes/%ff%fe").await, 400);
}

/// Contract 2.8: node documents, `/v1/datasets` and listings have strong
/// ETags and answer 304; cacheable answers carry `Cache-Control`.
#[tokio::test]
async fn documents_have_etags_and_cache_control() {
    let mut cfg = config();
    cfg.cache_max_age_secs = 42;
    let server = Server::start(cfg).await;
    for path in [
        "/v1/datasets",
        "/v1/datasets/sample/nodes",
        "/v1/datasets/sample/nodes/temperature",
        "/v1/datasets/sample/zarr/",
        "/v1/datasets/sample/v2/.zmetadata",
    ] {
        let first = get(&server, path).await;
        assert_eq!(first.status(), 200, "{path}");
        assert_eq!(first.headers()[header::CACHE_CONTROL], "max-age=42", "{path}");
        let etag = first.headers()[header::ETAG].to_str().unwrap().to_string();
        assert!(etag.starts_with('"') && !etag.starts_with("W/"), "{path}: {etag}");
        let again = client()
            .get(server.url(path))
            .header(header::IF_NONE_MATCH, &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
        assert_eq!(again.headers()[header::ETAG].to_str().unwrap(), etag, "{path}");
    }
    for path in [
        "/v1/datasets/sample/data/mask?select=0:2,0:2",
        "/v1/datasets/sample/zarr/zarr.json",
    ] {
        let resp = get(&server, path).await;
        assert_eq!(resp.headers()[header::CACHE_CONTROL], "max-age=42", "{path}");
    }
    let missing = get(&server, "/v1/datasets/sample/nodes/nope").await;
    assert!(
        !missing.headers().contains_key(header::CACHE_CONTROL),
        "errors are not cached"
    );
}

/// Contract 2.8: with authentication on, `/v1/datasets` lists only what the
/// request may read, and `/metrics` can require its own token.
#[tokio::test]
async fn datasets_listing_and_metrics_follow_authentication() {
    let mut cfg = config();
    cfg.datasets.get_mut("sample").unwrap().token = Some("sample-token".into());
    cfg.metrics_token = Some("metrics-token".into());
    let server = Server::start(cfg).await;
    let names = |body: Value| -> Vec<String> {
        body["datasets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    let listing = |token: Option<&'static str>| {
        let mut request = client().get(server.url("/v1/datasets"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    assert_eq!(names(listing(None).await), vec!["fixtures"]);
    assert_eq!(names(listing(Some("unknown")).await), vec!["fixtures"]);
    assert_eq!(names(listing(Some("sample-token")).await), vec!["fixtures", "sample"]);
    problem(get(&server, "/metrics").await, 401).await;
    let wrong = client()
        .get(server.url("/metrics"))
        .bearer_auth("nope")
        .send()
        .await
        .unwrap();
    problem(wrong, 403).await;
    let ok = client()
        .get(server.url("/metrics"))
        .bearer_auth("metrics-token")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok.text().await.unwrap().contains("zarr_serve_requests_total"));
}

#[tokio::test]
async fn text_results_are_measured_for_413_and_have_etags() {
    // 70 strings: 560 bytes as decoded elements (8 bytes a handle), 587 as
    // JSON. The decoded result is what counts, in every format (api.md 3.6).
    let url = "/v1/datasets/fixtures/data/types/string";
    for (limit, status) in [(560, 200), (559, 413)] {
        let mut cfg = config();
        cfg.max_response_bytes = limit;
        let server = Server::start(cfg).await;
        for format in ["json", "npy"] {
            let resp = get(&server, &format!("{url}?format={format}")).await;
            assert_eq!(resp.status(), status, "{format} at {limit}");
        }
    }
    // Numbers: an .npy of exactly the limit is 200 (its header not
    // counted), one byte less is 413, for a whole slab and when streamed.
    let int16 = "/v1/datasets/fixtures/data/zarr_python/int16";
    let size = 2 * array_entry("zarr_python/int16")["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .product::<u64>();
    for slab_bytes in [1 << 24, 1] {
        for (limit, status) in [(size, 200), (size - 1, 413)] {
            let mut cfg = config();
            cfg.max_response_bytes = limit;
            cfg.slab_bytes = slab_bytes;
            let server = Server::start(cfg).await;
            for format in ["json", "npy", "binary"] {
                let resp = get(&server, &format!("{int16}?format={format}")).await;
                assert_eq!(resp.status(), status, "{format} at {limit}, slabs of {slab_bytes}");
            }
        }
    }
    let mut cfg = config();
    cfg.max_response_bytes = 559;
    let server = Server::start(cfg).await;
    let e = problem(get(&server, url).await, 413).await;
    assert!(e["detail"].as_str().unwrap().contains("559"), "{e}");
    let one = get(&server, &format!("{url}?select=0,0")).await;
    assert_eq!(one.status(), 200);
    assert_eq!(one.headers()[header::CONTENT_TYPE], "application/json");
    let etag = one.headers()[header::ETAG].clone();
    let again = client()
        .get(server.url(&format!("{url}?select=0,0")))
        .header(header::IF_NONE_MATCH, etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    let npy = get(&server, &format!("{url}?select=0,0&format=npy")).await;
    assert_ne!(npy.headers()[header::ETAG], etag);
    let head = client()
        .head(server.url(&format!("{url}?select=0,0")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        head.headers()[header::CONTENT_LENGTH],
        one.headers()[header::CONTENT_LENGTH]
    );
}

/// `format=png` limits: over 16,384 pixels on a side is 413 however small the
/// raster; the raster (4 bytes a pixel) is what `max_response_bytes` measures.
#[tokio::test]
async fn pictures_are_limited_by_side_and_by_raster_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let meta = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [2, 20000], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 5000]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 7,
        "codecs": [{"name": "bytes"}],
    });
    std::fs::create_dir_all(dir.path().join("wide")).unwrap();
    std::fs::write(dir.path().join("wide/zarr.json"), meta.to_string()).unwrap();
    let mut cfg = config();
    cfg.datasets
        .insert("tmp".into(), common::dataset(dir.path().to_string_lossy()));
    // 2 × 16,384 uint8 is 32 KiB of data and 128 KiB of raster.
    cfg.max_response_bytes = 100_000;
    let server = Server::start(cfg).await;
    let url = "/v1/datasets/tmp/data/wide";
    let e = problem(get(&server, &format!("{url}?format=png")).await, 413).await;
    assert!(e["detail"].as_str().unwrap().contains("16384"), "{e}");
    assert_eq!(get(&server, &format!("{url}?select=:,:16384")).await.status(), 200);
    let e = problem(get(&server, &format!("{url}?select=:,:16384&format=png")).await, 413).await;
    assert!(e["detail"].as_str().unwrap().contains("131072"), "{e}");
    // A raster of exactly the limit (2 × 12,500 × 4 bytes) is drawn; what
    // counts is the raster, not the PNG (here one colour: indexed, smaller).
    let at_limit = get(&server, &format!("{url}?select=:,:12500&format=png")).await;
    assert_eq!(at_limit.status(), 200);
    assert!(at_limit.bytes().await.unwrap().len() < 100_000);
    let ok = get(&server, &format!("{url}?select=:,:12000&format=png")).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()[header::CONTENT_TYPE], "image/png");
    let png = ok.bytes().await.unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width then height, big-endian.
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 12000);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 2);
}

/// The explorer (2.7): `/` is HTML for browsers only; its pages apply the
/// datasets' tokens exactly as the API does; assets are built in.
#[tokio::test]
async fn explorer_pages_follow_accept_and_authentication() {
    let mut cfg = config();
    cfg.datasets.get_mut("sample").unwrap().token = Some("explorer-token".into());
    let server = Server::start(cfg).await;
    let html = |path: &str, token: Option<&'static str>| {
        let mut request = client().get(server.url(path)).header(header::ACCEPT, "text/html");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let plain = get(&server, "/").await;
    assert!(plain.headers()[header::VARY].to_str().unwrap().contains("accept"));
    problem(plain, 404).await;
    let post = client()
        .post(server.url("/"))
        .header(header::ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    problem(post, 404).await;
    let anonymous = html("/", None).await.unwrap();
    assert_eq!(anonymous.status(), 200);
    assert!(anonymous.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .contains("script-src 'self'"));
    let text = anonymous.text().await.unwrap();
    assert!(
        text.contains("href=\"/explore/fixtures\"") && !text.contains("/explore/sample"),
        "{text}"
    );
    let with_token = html("/", Some("explorer-token")).await.unwrap().text().await.unwrap();
    assert!(with_token.contains("href=\"/explore/sample\""));
    problem(html("/explore/sample/temperature", None).await.unwrap(), 401).await;
    problem(html("/explore/sample/temperature", Some("wrong")).await.unwrap(), 403).await;
    let page = html("/explore/sample/temperature", Some("explorer-token"))
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("64 × 256 × 256") && page.contains("id=\"preview-img\""));
    // Not a geo variable: no map.
    assert!(!page.contains("id=\"map\""));
    problem(html("/explore/nope", None).await.unwrap(), 404).await;
    problem(html("/explore/fixtures/no/such/node", None).await.unwrap(), 404).await;
    for (asset, kind) in [
        ("/explore-assets/explorer.js", "text/javascript"),
        ("/explore-assets/explorer.css", "text/css"),
        ("/explore-assets/map.js", "text/javascript"),
        ("/explore-assets/leaflet.js", "text/javascript"),
        ("/explore-assets/leaflet.css", "text/css"),
        ("/favicon.ico", "image/svg+xml"),
    ] {
        let r = get(&server, asset).await;
        assert_eq!(r.status(), 200, "{asset}");
        assert!(r.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with(kind));
    }
    problem(get(&server, "/explore-assets/nope.js").await, 404).await;
}

/// `format=json` streams slab by slab (2.8): the document equals the one
/// built whole, comes without `Content-Length`, and an error mid-stream
/// leaves it unparseable instead of looking whole.
#[tokio::test]
async fn json_streams_like_binary() {
    let mut cfg = config();
    cfg.slab_bytes = 64;
    let streaming = Server::start(cfg).await;
    let whole = Server::start(config()).await;
    let mut streamed = 0;
    let arrays = manifest()["arrays"].as_array().unwrap().clone();
    let mut urls: Vec<String> = arrays
        .iter()
        .take(80)
        .map(|a| format!("/v1/datasets/fixtures/data/{}?format=json", a["path"].as_str().unwrap()))
        .collect();
    urls.push("/v1/datasets/sample/data/temperature?select=0:3,::7,5:40&format=json".into());
    urls.push("/v1/datasets/fixtures/data/xarray_grid/t2m?format=json&decode=cf".into());
    for url in &urls {
        let a = get(&streaming, url).await;
        let b = get(&whole, url).await;
        assert_eq!(a.status(), b.status(), "{url}");
        if a.status() != 200 {
            continue;
        }
        assert!(!a.headers()[header::ETAG].is_empty());
        if !a.headers().contains_key(header::CONTENT_LENGTH) {
            streamed += 1;
        }
        let (a, b): (Value, Value) = (a.json().await.unwrap(), b.json().await.unwrap());
        assert_eq!(a, b, "{url}");
    }
    assert!(streamed >= 40, "{streamed} streamed");
    let resp = get(
        &streaming,
        "/v1/datasets/fixtures/data/corrupt/gzip_truncated?select=::-1&format=json",
    )
    .await;
    assert_eq!(resp.status(), 200);
    if let Ok(body) = resp.bytes().await {
        assert!(
            serde_json::from_slice::<Value>(&body).is_err(),
            "a cut document must not parse"
        );
    }
}

/// Contract 3.1 over HTTP on the arrays zarr-python 3.4 and zarrs wrote
/// (tests/fixtures/codecs): rectilinear node documents give the edges per
/// dimension, both forms expanded, and the v2 view leaves them out; the
/// `bytes` data type keeps its name; a zfpy array reads as zarr-python
/// reads it; passthrough serves a rectilinear array's chunks as stored.
#[tokio::test]
async fn codecs_rectilinear_and_bytes_over_http() {
    let mut cfg = config();
    let corpus = common::repo().join("tests/fixtures/codecs/data.zarr");
    cfg.datasets
        .insert("codecs".into(), common::dataset(corpus.to_string_lossy()));
    let server = Server::start(cfg).await;
    let node = |path: &'static str| {
        let server = &server;
        async move {
            let resp = get(server, &format!("/v1/datasets/codecs/nodes/{path}")).await;
            assert_eq!(resp.status(), 200, "{path}");
            resp.json::<Value>().await.unwrap()
        }
    };
    let doc = node("rectilinear/r2d_missing").await;
    assert_eq!(
        doc["chunk_shape"],
        serde_json::json!([[3, 7, 10], [4, 4, 4, 8, 10]]),
        "{doc}"
    );
    assert_eq!(doc["read_chunk_shape"], doc["chunk_shape"]);
    assert_eq!(doc["chunk_grid_shape"], serde_json::json!([3, 5]));
    let bare = node("rectilinear/r2d_int_dim").await;
    assert_eq!(
        bare["chunk_shape"],
        serde_json::json!([[3, 7, 10], [10, 10, 10]]),
        "{bare}"
    );
    let sharded = node("rectilinear/sharded").await;
    assert!(
        sharded["read_chunk_shape"]
            .as_array()
            .unwrap()
            .iter()
            .all(Value::is_u64),
        "{sharded}"
    );
    // Reads: the whole array and a window across irregular edges.
    let want =
        std::fs::read(common::repo().join("tests/fixtures/codecs/expected/rectilinear/r2d_missing.bin")).unwrap();
    let whole = get(&server, "/v1/datasets/codecs/data/rectilinear/r2d_missing").await;
    assert_eq!(whole.status(), 200);
    assert_eq!(whole.bytes().await.unwrap().to_vec(), want);
    let window = get(
        &server,
        "/v1/datasets/codecs/data/rectilinear/r2d_missing?select=2:11,11:13",
    )
    .await;
    let got = window.bytes().await.unwrap();
    let rows: Vec<u8> = (2..11)
        .flat_map(|r| want[(r * 30 + 11) * 2..(r * 30 + 13) * 2].to_vec())
        .collect();
    assert_eq!(got.to_vec(), rows);
    // The v2 view has no rectilinear arrays; the passthrough serves them.
    let v2 = get(&server, "/v1/datasets/codecs/v2/rectilinear/r2d_missing/.zarray").await;
    assert_eq!(v2.status(), 404);
    let zmeta: Value = get(&server, "/v1/datasets/codecs/v2/.zmetadata")
        .await
        .json()
        .await
        .unwrap();
    let keys: Vec<&String> = zmeta["metadata"].as_object().unwrap().keys().collect();
    assert!(keys.iter().any(|k| k.ends_with("zlib_int16/.zarray")), "{keys:?}");
    assert!(
        !keys
            .iter()
            .any(|k| k.starts_with("rectilinear/") && k.ends_with(".zarray")),
        "{keys:?}"
    );
    let chunk = get(&server, "/v1/datasets/codecs/zarr/rectilinear/r2d_missing/c/0/0").await;
    assert_eq!(chunk.status(), 200);
    // The explorer shows the edges.
    let page = get(&server, "/explore/codecs/rectilinear/r2d_missing").await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("[3,7,10]"));
    // `bytes` keeps its name in the node document and the header.
    let bytes = node("types/bytes_1d").await;
    assert_eq!(bytes["data_type"], "bytes");
    let data = get(&server, "/v1/datasets/codecs/data/types/bytes_1d?format=json").await;
    assert_eq!(data.headers()["zarr-data-type"], "bytes");
    // zfpy: readable, values as zarr-python reads them; writes are 501.
    let zfp = node("v3_numcodecs/zfpy_accuracy_f64").await;
    assert_eq!(
        (zfp["readable"].clone(), zfp["data_type"].clone()),
        (Value::Bool(true), "float64".into())
    );
    let want = std::fs::read(common::repo().join("tests/fixtures/codecs/expected/v3_numcodecs/zfpy_accuracy_f64.bin"))
        .unwrap();
    let data = get(&server, "/v1/datasets/codecs/data/v3_numcodecs/zfpy_accuracy_f64").await;
    assert_eq!(data.status(), 200);
    assert_eq!(data.bytes().await.unwrap().to_vec(), want);
}

/// An explorer page's ETag covers the labels of its pickers: a coordinate
/// rewritten in place gives a new page once the metadata is read again,
/// never a 304 for the old labels.
#[tokio::test]
async fn explorer_pages_are_tagged_by_their_coordinate_labels() {
    let dir = common::geo::dataset();
    let mut cfg = config();
    cfg.metadata_ttl_secs = 0.2;
    cfg.datasets
        .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
    let server = Server::start(cfg).await;
    let page = |etag: Option<String>| {
        let mut request = client().get(server.url("/explore/geo/tas"));
        if let Some(etag) = etag {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        async move { request.send().await.unwrap() }
    };
    let first = page(None).await;
    let etag = first.headers()[header::ETAG].to_str().unwrap().to_string();
    assert!(first.text().await.unwrap().contains("2000-01-02"));
    assert_eq!(page(Some(etag.clone())).await.status(), 304);
    let days: Vec<u8> = [0.0f64, 31.0].iter().flat_map(|d| d.to_le_bytes()).collect();
    std::fs::write(dir.path().join("time/c/0"), days).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let second = page(Some(etag.clone())).await;
    assert_eq!(second.status(), 200, "a 304 would keep the old labels");
    assert_ne!(second.headers()[header::ETAG].to_str().unwrap(), etag);
    let body = second.text().await.unwrap();
    assert!(body.contains("2000-02-01") && !body.contains("2000-01-02"));
}
