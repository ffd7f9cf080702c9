//! OPeNDAP DAP2 (api.md 3.4) against the real server: every fixture array
//! zarr-python and tensorstore wrote, decoded from `.dods` XDR and compared
//! with what they read (whole, and through a strided hyperslab); strings
//! and datetimes; the DDS, DAS and ASCII of the CF dataset of
//! tests/common/geo.rs; constraint expressions, errors, 413, ETag/304,
//! HEAD, tokens and streamed bodies. Runs on every store backend
//! (`ZARR_FIXTURES_STORE`).

mod common;

use common::geo::{dataset, empty_group, write_array};
use common::{client, config, expected, manifest, odd_positions, same, Server};
use serde_json::{json, Value};

async fn get(server: &Server, path: &str) -> reqwest::Response {
    client().get(server.url(path)).send().await.unwrap()
}

/// The DDS and the XDR of a `.dods` answer.
async fn dods(server: &Server, path: &str) -> (String, Vec<u8>) {
    let resp = get(server, path).await;
    assert_eq!(resp.status(), 200, "{path}: {}", resp.text().await.unwrap());
    assert_eq!(resp.headers()["content-description"], "dods_data");
    assert_eq!(resp.headers()["xdods-server"], "dods/3.2");
    let body = resp.bytes().await.unwrap().to_vec();
    let at = body
        .windows(7)
        .position(|w| w == b"\nData:\n")
        .expect("a DDS, then Data:");
    (
        String::from_utf8(body[..at + 1].to_vec()).unwrap(),
        body[at + 7..].to_vec(),
    )
}

/// Reads XDR as DAP2 writes it.
struct Xdr<'a>(&'a [u8]);

impl Xdr<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take(4).try_into().unwrap())
    }
    /// An array's count, given twice (once for strings).
    fn count(&mut self, twice: bool) -> usize {
        let n = self.u32();
        if twice {
            assert_eq!(self.u32(), n, "an array's length is given twice");
        }
        n as usize
    }
    /// `n` elements (or a scalar) of a numeric DAP type, as f64.
    fn numbers(&mut self, dap: &str, scalar: bool) -> Vec<f64> {
        let n = if scalar { 1 } else { self.count(true) };
        let one = |x: &mut Self| -> f64 {
            match dap {
                "Int16" | "Int32" => x.u32() as i32 as f64,
                "UInt16" | "UInt32" => x.u32() as f64,
                "Float32" => f32::from_be_bytes(x.take(4).try_into().unwrap()) as f64,
                "Float64" => f64::from_be_bytes(x.take(8).try_into().unwrap()),
                other => panic!("{other}"),
            }
        };
        match dap {
            // A Byte scalar is an XDR int; Byte arrays are padded to 4.
            "Byte" if scalar => vec![self.u32() as f64],
            "Byte" => {
                let out = self.take(n).iter().map(|&b| b as f64).collect();
                self.take((4 - n % 4) % 4);
                out
            }
            _ => (0..n).map(|_| one(self)).collect(),
        }
    }
    fn strings(&mut self, scalar: bool) -> Vec<String> {
        let n = if scalar { 1 } else { self.count(false) };
        (0..n)
            .map(|_| {
                let len = self.u32() as usize;
                let text = String::from_utf8(self.take(len).to_vec()).unwrap();
                self.take((4 - len % 4) % 4);
                text
            })
            .collect()
    }
}

/// The DAP2 type the contract gives a Zarr data type.
fn dap_type(data_type: &str) -> Option<&'static str> {
    Some(match data_type {
        "bool" | "uint8" => "Byte",
        "int8" | "int16" => "Int16",
        "uint16" => "UInt16",
        "int32" => "Int32",
        "uint32" => "UInt32",
        "float16" | "float32" => "Float32",
        "float64" | "int64" | "uint64" => "Float64",
        _ => return None,
    })
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap()
}

#[tokio::test]
async fn every_fixture_array_reads_as_zarr_python_read_it() {
    let server = Server::start(config()).await;
    let manifest = manifest();
    let mut checked = 0;
    for entry in manifest["arrays"].as_array().unwrap() {
        let Some(dap) = dap_type(entry["data_type"].as_str().unwrap()) else {
            continue;
        };
        let (group, name) = split(entry["path"].as_str().unwrap());
        let shape: Vec<usize> = entry["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap() as usize)
            .collect();
        let want = expected(entry);
        let (dds, xdr) = dods(&server, &format!("/v1/datasets/fixtures/dap/{group}.dods?{name}")).await;
        let decl = format!("    {dap} {name}");
        assert!(dds.contains(&decl), "{group}/{name}: {dds}");
        let mut reader = Xdr(&xdr);
        let got = reader.numbers(dap, shape.is_empty());
        assert!(reader.0.is_empty(), "{group}/{name}: bytes left over");
        assert!(same(&got, &want), "{group}/{name} ({dap})");
        // A strided hyperslab, stop inclusive.
        if !shape.is_empty() && shape.iter().all(|&n| n > 2) {
            let ce: String = shape.iter().map(|n| format!("[1:2:{}]", n - 1)).collect();
            let (_, xdr) = dods(&server, &format!("/v1/datasets/fixtures/dap/{group}.dods?{name}{ce}")).await;
            let got = Xdr(&xdr).numbers(dap, false);
            assert!(same(&got, &odd_positions(&want, &shape)), "{group}/{name}{ce}");
        }
        checked += 1;
    }
    assert!(checked > 150, "only {checked} arrays checked");
}

#[tokio::test]
async fn strings_and_datetimes_read_as_zarr_python_read_them() {
    let server = Server::start(config()).await;
    let manifest = manifest();
    let mut checked = 0;
    for entry in manifest["typed"].as_array().unwrap() {
        let (group, name) = split(entry["path"].as_str().unwrap());
        let whole = &entry["whole"]["json"];
        let kind = entry["data_type"].as_str().unwrap();
        let scalar = entry["whole"]["shape"].as_array().unwrap().is_empty();
        let path = format!("/v1/datasets/fixtures/dap/{group}.dods?{name}");
        match kind {
            "string" | "fixed_length_utf32" => {
                let (dds, xdr) = dods(&server, &path).await;
                assert!(dds.contains(&format!("String {name}")), "{dds}");
                let got = Xdr(&xdr).strings(scalar);
                let want: Vec<String> = whole
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().trim_end_matches('\0').to_string())
                    .collect();
                assert_eq!(got, want, "{group}/{name}");
            }
            "numpy.datetime64" => {
                let resp = get(&server, &format!("/v1/datasets/fixtures/dap/{group}.das")).await;
                let das = resp.text().await.unwrap();
                let unit = match entry["numpy"].as_str().unwrap() {
                    n if n.ends_with("[ns]") => "nanoseconds",
                    n if n.ends_with("[ms]") => "milliseconds",
                    n if n.ends_with("[s]") => "seconds",
                    n if n.ends_with("[D]") => "days",
                    other => panic!("{other}"),
                };
                let units = format!("String units \"{unit} since 1970-01-01\";");
                assert!(das.contains(&units), "{das}");
                // The read's JSON is text; the counts are what the region read gives.
                let counts: Value = get(
                    &server,
                    &format!("/v1/datasets/fixtures/data/{group}/{name}?format=json"),
                )
                .await
                .json()
                .await
                .unwrap();
                let (_, xdr) = dods(&server, &path).await;
                let got = Xdr(&xdr).numbers("Float64", scalar);
                let texts: Vec<&Value> = flatten(&counts["data"]);
                assert_eq!(got.len(), texts.len());
                for (g, t) in got.iter().zip(texts) {
                    assert_eq!(g.is_nan(), t.is_null(), "{group}/{name}: NaT is NaN");
                }
                // The values: the stored counts (these units have no scale).
                let raw = get(
                    &server,
                    &format!("/v1/datasets/fixtures/data/{group}/{name}?format=binary"),
                )
                .await
                .bytes()
                .await
                .unwrap();
                let counts: Vec<f64> = raw
                    .chunks_exact(8)
                    .map(|b| match i64::from_le_bytes(b.try_into().unwrap()) {
                        i64::MIN => f64::NAN,
                        n => n as f64,
                    })
                    .collect();
                assert!(same(&got, &counts), "{group}/{name}: {got:?} != {counts:?}");
            }
            _ => continue,
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} typed arrays checked");
}

fn flatten(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().flat_map(flatten).collect(),
        other => vec![other],
    }
}

async fn geo_server(dir: &tempfile::TempDir, limit: Option<u64>, token: Option<&str>) -> Server {
    let mut cfg = config();
    let mut ds = common::dataset(dir.path().to_string_lossy());
    ds.token = token.map(str::to_string);
    cfg.datasets.insert("geo".into(), ds);
    if let Some(limit) = limit {
        cfg.max_response_bytes = limit;
    }
    Server::start(cfg).await
}

const DDS: &str = "Dataset {
    Float64 lat[lat = 4];
    Float64 lon[lon = 8];
    Grid {
      ARRAY:
        Float32 tas[time = 2][lat = 4][lon = 8];
      MAPS:
        Float64 time[time = 2];
        Float64 lat[lat = 4];
        Float64 lon[lon = 8];
    } tas;
    Grid {
      ARRAY:
        Float32 tas_xy[lon = 8][lat = 4];
      MAPS:
        Float64 lon[lon = 8];
        Float64 lat[lat = 4];
    } tas_xy;
    Float64 time[time = 2];
}";

#[tokio::test]
async fn dds_das_and_ascii_describe_the_group() {
    let dir = dataset();
    let server = geo_server(&dir, None, None).await;
    let resp = get(&server, "/v1/datasets/geo/dap.dds").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-description"], "dods_dds");
    assert!(resp.headers().contains_key("xopendap-server"));
    let dds = resp.text().await.unwrap();
    assert!(dds.starts_with(DDS), "{dds}");
    let das = get(&server, "/v1/datasets/geo/dap.das").await.text().await.unwrap();
    for line in [
        "    tas {\n        String long_name \"air temperature\";\n    }",
        "        String units \"days since 2000-01-01\";",
        "    NC_GLOBAL {\n        String institution \"zarr-serve tests\";\n    }",
    ] {
        assert!(das.contains(line), "{line} in {das}");
    }
    // The explorer's group page names the group's DAP2 dataset.
    let page = client()
        .get(server.url("/explore/geo"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("<a href=\"/v1/datasets/geo/dap.dds\">DDS</a>"), "{page}");
    let ascii = get(&server, "/v1/datasets/geo/dap.ascii?tas[1][0:1][6:1:7],lat[0:1:1]").await;
    assert_eq!(ascii.status(), 200);
    let text = ascii.text().await.unwrap();
    let values = text
        .split("---------------------------------------------\n")
        .nth(1)
        .unwrap();
    assert_eq!(
        values,
        "lat[2]\n30.0, 10.0\n\ntas.tas[1][2][2]\n[0][0], 106.0, 107.0\n[0][1], 114.0, 115.0\n\n\
         tas.time[1]\n1.0\n\ntas.lat[2]\n30.0, 10.0\n\ntas.lon[2]\n270.0, 315.0\n\n"
    );
}

#[tokio::test]
async fn constraints_pick_grids_components_and_hyperslabs() {
    let dir = dataset();
    let server = geo_server(&dir, None, None).await;
    // A hyperslab on a grid applies to its maps; data in grid order.
    let (dds, xdr) = dods(&server, "/v1/datasets/geo/dap.dods?tas[1][1:2:3][0:3:7]").await;
    assert!(dds.contains("Float32 tas[time = 1][lat = 2][lon = 3];"), "{dds}");
    assert!(dds.contains("  MAPS:\n        Float64 time[time = 1];"), "{dds}");
    let mut x = Xdr(&xdr);
    let tas = x.numbers("Float32", false);
    assert_eq!(tas, [108.0, 111.0, 114.0, 124.0, 127.0, 130.0]);
    assert_eq!(x.numbers("Float64", false), [1.0]);
    assert_eq!(x.numbers("Float64", false), [10.0, -30.0]);
    assert_eq!(x.numbers("Float64", false), [0.0, 135.0, 270.0]);
    assert!(x.0.is_empty());
    // Components: a Structure of those asked for, in grid order, whatever
    // the expression's order; several variables in dataset order.
    let (dds, xdr) = dods(&server, "/v1/datasets/geo/dap.dods?tas.lon[2:3],time,tas.tas[0][3][7]").await;
    assert_eq!(
        dds,
        "Dataset {\n    Structure {\n        Float32 tas[time = 1][lat = 1][lon = 1];\n        \
         Float64 lon[lon = 2];\n    } tas;\n    Float64 time[time = 2];\n} geo;\n"
    );
    let mut x = Xdr(&xdr);
    assert_eq!(x.numbers("Float32", false), [31.0]);
    assert_eq!(x.numbers("Float64", false), [90.0, 135.0]);
    assert_eq!(x.numbers("Float64", false), [0.0, 1.0]);
    // Percent-encoded, as clients send them; the .dds is constrained too.
    let dds = get(&server, "/v1/datasets/geo/dap.dds?lat%5B0:1:1%5D")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(dds, "Dataset {\n    Float64 lat[lat = 2];\n} geo;\n");
}

async fn dap_error(server: &Server, path: &str, status: u16) -> String {
    let resp = get(server, path).await;
    assert_eq!(resp.status(), status, "{path}");
    assert_eq!(resp.headers()["content-description"], "dods_error", "{path}");
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let body = resp.text().await.unwrap();
    let head = format!("Error {{\n    code = {status};\n    message = \"");
    assert!(body.starts_with(&head) && body.ends_with("\";\n};\n"), "{body}");
    body
}

#[tokio::test]
async fn errors_are_dap2_error_bodies_with_the_contract_statuses() {
    let dir = dataset();
    let server = geo_server(&dir, Some(100), None).await;
    for (path, status, says) in [
        ("/v1/datasets/geo/dap.dods?tas&tas>1", 400, "selection clauses"),
        ("/v1/datasets/geo/dap.dods?mean(tas)", 400, "functions"),
        ("/v1/datasets/geo/dap.dods?tas[0:2]", 400, "out of range"),
        ("/v1/datasets/geo/dap.dods?lat[2:1]", 400, "start is after stop"),
        ("/v1/datasets/geo/dap.dods?nosuch", 400, "not a variable"),
        ("/v1/datasets/geo/dap.dods?tas.nosuch", 400, "not a Grid"),
        ("/v1/datasets/geo/dap/tas.dds", 400, "is an array"),
        ("/v1/datasets/geo/dap/nosuch.dds", 404, "nosuch"),
        ("/v1/datasets/nosuch/dap.dds", 404, "nosuch"),
        ("/v1/datasets/geo/dap.html", 404, ".dds, .das"),
        ("/v1/datasets/geo/dap", 404, ".dds, .das"),
        ("/v1/datasets/geo/dap.dods?tas", 413, "100"),
        ("/v1/datasets/geo/dap.ascii?tas", 413, "100"),
    ] {
        let body = dap_error(&server, path, status).await;
        assert!(body.contains(says), "{path}: {body}");
    }
    // Within the limit, the same server answers.
    assert_eq!(get(&server, "/v1/datasets/geo/dap.dods?lat").await.status(), 200);
}

#[tokio::test]
async fn etags_head_and_tokens() {
    let dir = dataset();
    let server = geo_server(&dir, None, Some("sesame")).await;
    let path = "/v1/datasets/geo/dap.dods?tas[0][0:1:3][0:1:7]";
    let anonymous = get(&server, path).await;
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.headers()["www-authenticate"], "Bearer");
    assert!(anonymous.text().await.unwrap().starts_with("Error {\n    code = 401;"));
    let auth = |r: reqwest::RequestBuilder| r.bearer_auth("sesame");
    let resp = auth(client().get(server.url(path))).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let etag = resp.headers()["etag"].to_str().unwrap().to_string();
    let length = resp.headers()["content-length"].to_str().unwrap().to_string();
    let body = resp.bytes().await.unwrap();
    assert_eq!(body.len().to_string(), length);
    let head = auth(client().head(server.url(path))).send().await.unwrap();
    assert_eq!(head.headers()["content-length"].to_str().unwrap(), length);
    assert_eq!(head.headers()["etag"].to_str().unwrap(), etag);
    let again = auth(client().get(server.url(path)))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    // Another hyperslab is another representation.
    let other = auth(client().get(server.url("/v1/datasets/geo/dap.dods?tas[1][0:1:3][0:1:7]")))
        .send()
        .await
        .unwrap();
    assert_ne!(other.headers()["etag"].to_str().unwrap(), etag);
    let das = auth(client().get(server.url("/v1/datasets/geo/dap.das")))
        .send()
        .await
        .unwrap();
    let das_etag = das.headers()["etag"].to_str().unwrap().to_string();
    let again = auth(client().get(server.url("/v1/datasets/geo/dap.das")))
        .header("if-none-match", das_etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
}

#[tokio::test]
async fn large_bodies_stream_every_element_in_order() {
    // 3 x 1024 x 1024 float32 (12 MiB decoded): more than is answered
    // from memory, in slabs of the engine's read.
    let dir = empty_group();
    let n = 3 * 1024 * 1024;
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    write_array(
        dir.path(),
        "big",
        &[3, 1024, 1024],
        "float32",
        &["t", "y", "x"],
        json!({}),
        &data,
    );
    let server = geo_server(&dir, None, None).await;
    let resp = get(&server, "/v1/datasets/geo/dap.dods?big[0:1:2][0:1:1023][1:2:1023]").await;
    assert_eq!(resp.status(), 200);
    let length: usize = resp.headers()["content-length"].to_str().unwrap().parse().unwrap();
    let body = resp.bytes().await.unwrap();
    assert_eq!(body.len(), length);
    let at = body.windows(7).position(|w| w == b"\nData:\n").unwrap() + 7;
    let got = Xdr(&body[at..]).numbers("Float32", false);
    assert_eq!(got.len(), n / 2);
    assert!(got.iter().enumerate().all(|(k, v)| *v == (2 * k + 1) as f64));
}

#[tokio::test]
async fn corrupt_data_is_a_502_error_never_numbers() {
    let server = Server::start(config()).await;
    let manifest = manifest();
    let mut checked = 0;
    for entry in manifest["corrupt"].as_array().unwrap() {
        let (group, name) = split(entry["path"].as_str().unwrap());
        let body = dap_error(&server, &format!("/v1/datasets/fixtures/dap/{group}.dods?{name}"), 502).await;
        assert!(
            body.contains(name) || body.contains("corrupt"),
            "{group}/{name}: {body}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} corrupt arrays checked");
}

#[tokio::test]
async fn names_with_dots_repeated_and_clashing_dimensions() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group", "attributes": {"": "no name", "ok": 1}}"#,
    )
    .unwrap();
    let i32s: Vec<u8> = [1i32, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    write_array(root, "a.b", &[3], "int32", &["n3"], json!({}), &i32s);
    let f64s = |n: usize| -> Vec<u8> { (0..n).flat_map(|v| (v as f64).to_le_bytes()).collect() };
    // `a_long` sorts before the coordinate `x` but uses `x` with another length.
    write_array(root, "a_long", &[7], "float64", &["x"], json!({}), &f64s(7));
    write_array(root, "x", &[5], "float64", &["x"], json!({}), &f64s(5));
    let sq: Vec<u8> = (0..25).flat_map(|v| (v as f32).to_le_bytes()).collect();
    write_array(root, "sq", &[5, 5], "float32", &["x", "x"], json!({}), &sq);
    let u64s: Vec<u8> = [1u64, u64::MAX].iter().flat_map(|v| v.to_le_bytes()).collect();
    write_array(root, "u64", &[2], "uint64", &["k"], json!({}), &u64s);
    let server = geo_server(&dir, None, None).await;
    let dds = get(&server, "/v1/datasets/geo/dap.dds").await.text().await.unwrap();
    for decl in [
        "    Int32 a%2Eb[n3 = 3];",
        // the coordinate keeps its name; the other length is renamed
        "    Float64 a_long[x_7 = 7];",
        "    Float64 x[x = 5];",
        // two maps of one name would crash netCDF-C: an Array, not a Grid
        "    Float32 sq[x = 5][x = 5];",
    ] {
        assert!(dds.contains(decl), "{decl} in {dds}");
    }
    assert!(!dds.contains("Grid"), "{dds}");
    // netCDF-C sends the DDS's escaped name URL-encoded; pydap the name itself.
    for ce in ["a%252Eb", "a.b[0:1:2]", "a%2Eb"] {
        let (_, xdr) = dods(&server, &format!("/v1/datasets/geo/dap.dods?{ce}")).await;
        assert_eq!(Xdr(&xdr).numbers("Int32", false), [1.0, 2.0, 3.0], "{ce}");
    }
    let das = get(&server, "/v1/datasets/geo/dap.das").await.text().await.unwrap();
    assert!(
        !das.contains("no name"),
        "an attribute without a name is left out: {das}"
    );
    assert!(das.contains("Int32 ok 1;"), "{das}");
    let u64_block = das.split("    u64 {").nth(1).unwrap().split("    }").next().unwrap();
    assert!(!u64_block.contains("_Unsigned"), "uint64 is sent as Float64: {das}");
    let (_, xdr) = dods(&server, "/v1/datasets/geo/dap.dods?u64").await;
    assert_eq!(Xdr(&xdr).numbers("Float64", false), [1.0, u64::MAX as f64]);
    dap_error(&server, "/v1/datasets/geo/dap/", 404).await;
}

#[tokio::test]
async fn ascii_streams_rows_across_slabs() {
    let dir = empty_group();
    // 300 x 7 int16, read in slabs of 64 KiB: rows split between slabs
    // when the slab dimension is the last one (a 1-D read).
    let values: Vec<i16> = (0..2100).map(|v| v as i16 - 1000).collect();
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_array(dir.path(), "v", &[300, 7], "int16", &["i", "j"], json!({}), &data);
    let flat: Vec<u8> = (0..40_000i32).flat_map(|v| v.to_le_bytes()).collect();
    write_array(dir.path(), "w", &[40_000], "int32", &["k"], json!({}), &flat);
    let mut cfg = config();
    cfg.datasets
        .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
    cfg.slab_bytes = 64 << 10;
    let server = Server::start(cfg).await;
    let resp = get(&server, "/v1/datasets/geo/dap.ascii?v[1:2:299][0:1:6],w").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-description"], "dods_ascii");
    let text = resp.text().await.unwrap();
    let body = text
        .split("---------------------------------------------\n")
        .nth(1)
        .unwrap();
    let mut want = String::from("v[150][7]\n");
    for r in 0..150 {
        let row: Vec<String> = (0..7).map(|j| values[(2 * r + 1) * 7 + j].to_string()).collect();
        want.push_str(&format!("[{r}], {}\n", row.join(", ")));
    }
    let w: Vec<String> = (0..40_000).map(|v: i32| v.to_string()).collect();
    want.push_str(&format!("\nw[40000]\n{}\n\n", w.join(", ")));
    assert!(body == want, "{} ... {}", &body[..200], &body[body.len() - 200..]);
}
