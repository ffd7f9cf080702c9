//! OPeNDAP DAP4 (api.md 4.5) against the real server, its `.dap` bodies
//! read by a parser of the DAP4 specification's chunked form written here
//! (chunk headers, the DMR chunk, little-endian data, CRC-32s): every
//! fixture array zarr-python and tensorstore wrote, compared with what they
//! read (whole, and through a strided hyperslab); strings and datetimes;
//! the DMR of nested groups, shared dimensions and maps; `dap4.ce`
//! projections, hyperslabs and dimension constraints; checksums on and
//! off; errors as DAP4 `<Error>`s; streamed bodies. The guarantees of 4.1
//! (413, 304, HEAD, read slots, abort, failures) are `tests/guarantees.rs`'s.
//! Runs on every store backend (`ZARR_FIXTURES_STORE`).

mod common;

use common::geo::dataset;
use common::{client, config, expected, manifest, odd_positions, same, Server};
use serde_json::Value;

async fn get(server: &Server, path: &str) -> reqwest::Response {
    client().get(server.url(path)).send().await.unwrap()
}

/// A `.dap` body taken apart: the DMR, the data (chunks joined) and the
/// flags of each chunk.
struct Dap {
    dmr: String,
    data: Vec<u8>,
    /// The DMR chunk's flags.
    flags: u8,
}

/// Take a chunked body apart, checking its framing: every chunk
/// little-endian, the DMR's ending in `\r\n`, the last (only the last)
/// flagged END, no error chunk.
fn parse(body: &[u8]) -> Dap {
    let mut chunks = Vec::new();
    let mut at = 0;
    while at < body.len() {
        assert!(at + 4 <= body.len(), "a chunk header cut short");
        let flags = body[at];
        let n = u32::from_be_bytes([0, body[at + 1], body[at + 2], body[at + 3]]) as usize;
        assert!(at + 4 + n <= body.len(), "a chunk cut short");
        chunks.push((flags, &body[at + 4..at + 4 + n]));
        at += 4 + n;
    }
    let last = chunks.len() - 1;
    for (i, (flags, _)) in chunks.iter().enumerate() {
        assert_eq!(flags & 0x04, 0x04, "chunk {i} is not little-endian");
        assert_eq!(flags & 0x02, 0, "chunk {i} is an error");
        assert_eq!(
            flags & 0x01 != 0,
            i == last,
            "chunk {i}: END where it is not last, or missing"
        );
    }
    let dmr = std::str::from_utf8(chunks[0].1).unwrap();
    let dmr = dmr
        .strip_suffix("\r\n")
        .expect("the DMR chunk ends in CRLF")
        .to_string();
    Dap {
        dmr,
        data: chunks[1..].iter().flat_map(|(_, c)| c.iter().copied()).collect(),
        flags: chunks[0].0,
    }
}

async fn dap(server: &Server, path: &str) -> Dap {
    let resp = get(server, path).await;
    assert_eq!(resp.status(), 200, "{path}: {}", resp.text().await.unwrap());
    assert_eq!(resp.headers()["content-type"], "application/vnd.opendap.dap4.data");
    assert_eq!(resp.headers()["xdap"], "4.0");
    parse(&resp.bytes().await.unwrap())
}

/// Reads a variable's data as DAP4 sends it, checking its CRC-32.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    /// `n` fixed-size elements of `dap` as f64, then the checksum.
    fn numbers(&mut self, dap: &str, n: usize, checksum: bool) -> Vec<f64> {
        let size = match dap {
            "Byte" | "Int8" | "UInt8" => 1,
            "Int16" | "UInt16" => 2,
            "Int32" | "UInt32" | "Float32" => 4,
            _ => 8,
        };
        let bytes = self.take(n * size).to_vec();
        if checksum {
            self.check(&bytes);
        }
        bytes
            .chunks_exact(size)
            .map(|b| match dap {
                "Byte" | "UInt8" => b[0] as f64,
                "Int8" => b[0] as i8 as f64,
                "Int16" => i16::from_le_bytes(b.try_into().unwrap()) as f64,
                "UInt16" => u16::from_le_bytes(b.try_into().unwrap()) as f64,
                "Int32" => i32::from_le_bytes(b.try_into().unwrap()) as f64,
                "UInt32" => u32::from_le_bytes(b.try_into().unwrap()) as f64,
                "Float32" => f32::from_le_bytes(b.try_into().unwrap()) as f64,
                "Float64" => f64::from_le_bytes(b.try_into().unwrap()),
                "Int64" => i64::from_le_bytes(b.try_into().unwrap()) as f64,
                "UInt64" => u64::from_le_bytes(b.try_into().unwrap()) as f64,
                other => panic!("{other}"),
            })
            .collect()
    }
    /// `n` strings: an 8-byte length, then UTF-8.
    fn strings(&mut self, n: usize) -> Vec<String> {
        let start = self.0;
        let out = (0..n)
            .map(|_| {
                let len = u64::from_le_bytes(self.take(8).try_into().unwrap()) as usize;
                String::from_utf8(self.take(len).to_vec()).unwrap()
            })
            .collect();
        let used = start.len() - self.0.len();
        self.check(&start[..used]);
        out
    }
    /// The CRC-32 (zlib's) of `bytes` follows, little-endian.
    fn check(&mut self, bytes: &[u8]) {
        let sent = u32::from_le_bytes(self.take(4).try_into().unwrap());
        let mut crc = flate2::Crc::new();
        crc.update(bytes);
        assert_eq!(sent, crc.sum(), "the checksum");
    }
}

/// The DAP4 type the contract gives a Zarr data type.
fn dap_type(data_type: &str) -> Option<&'static str> {
    Some(match data_type {
        "bool" => "Byte",
        "uint8" => "UInt8",
        "int8" => "Int8",
        "int16" => "Int16",
        "uint16" => "UInt16",
        "int32" => "Int32",
        "uint32" => "UInt32",
        "int64" => "Int64",
        "uint64" => "UInt64",
        "float16" | "float32" => "Float32",
        "float64" => "Float64",
        _ => return None,
    })
}

fn shape_of(entry: &Value) -> Vec<usize> {
    entry
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap() as usize)
        .collect()
}

/// Every array zarr-python and tensorstore wrote, as each wrote it, through
/// the root group's `.dap` (so through its nested groups): whole, then a
/// strided hyperslab, each with its checksum.
#[tokio::test]
async fn every_fixture_array_reads_as_zarr_python_read_it() {
    let server = Server::start(config()).await;
    let mut checked = 0;
    for entry in manifest()["arrays"].as_array().unwrap() {
        let Some(dap) = dap_type(entry["data_type"].as_str().unwrap()) else {
            continue;
        };
        let path = entry["path"].as_str().unwrap();
        let shape = shape_of(&entry["shape"]);
        let want = expected(entry);
        let got = dap_numbers(&server, &format!("dap4.ce=/{path}"), dap, want.len()).await;
        assert!(same(&got, &want), "/{path} ({dap})");
        if !shape.is_empty() && shape.iter().all(|&n| n > 2) {
            let ce: String = shape.iter().map(|n| format!("[1:2:{}]", n - 1)).collect();
            let part = odd_positions(&want, &shape);
            let got = dap_numbers(&server, &format!("dap4.ce=/{path}{ce}"), dap, part.len()).await;
            assert!(same(&got, &part), "/{path}{ce}");
        }
        checked += 1;
    }
    assert!(checked > 150, "only {checked} arrays checked");
}

/// The one variable a `.dap` of the fixtures carries, declared as `dap`.
async fn dap_numbers(server: &Server, query: &str, dap: &str, n: usize) -> Vec<f64> {
    let body = self::dap(server, &format!("/v1/datasets/fixtures/dap4.dap?{query}")).await;
    assert!(body.dmr.contains(&format!("<{dap} name=")), "{query}: {}", body.dmr);
    let mut reader = Reader(&body.data);
    let got = reader.numbers(dap, n, true);
    assert!(reader.0.is_empty(), "{query}: bytes left over");
    got
}

#[tokio::test]
async fn strings_and_datetimes_read_as_zarr_python_read_them() {
    let server = Server::start(config()).await;
    let mut checked = 0;
    for entry in manifest()["typed"].as_array().unwrap() {
        let path = entry["path"].as_str().unwrap();
        let count: usize = shape_of(&entry["whole"]["shape"]).iter().product();
        let body = format!("/v1/datasets/fixtures/dap4.dap?dap4.ce=/{path}");
        match entry["data_type"].as_str().unwrap() {
            "string" | "fixed_length_utf32" => {
                let body = dap(&server, &body).await;
                assert!(body.dmr.contains("<String name="), "{}", body.dmr);
                let mut reader = Reader(&body.data);
                let got = reader.strings(count);
                assert!(reader.0.is_empty());
                let want: Vec<String> = flatten(&entry["whole"]["json"])
                    .iter()
                    .map(|v| v.as_str().unwrap().trim_end_matches('\0').to_string())
                    .collect();
                assert_eq!(got, want, "{path}");
            }
            "numpy.datetime64" => {
                let body = dap(&server, &body).await;
                let unit = match entry["numpy"].as_str().unwrap() {
                    n if n.ends_with("[ns]") => "nanoseconds",
                    n if n.ends_with("[ms]") => "milliseconds",
                    n if n.ends_with("[s]") => "seconds",
                    n if n.ends_with("[D]") => "days",
                    other => panic!("{other}"),
                };
                let units = format!("<Value>{unit} since 1970-01-01</Value>");
                assert!(
                    body.dmr.contains(&units) && body.dmr.contains("<Int64 name="),
                    "{}",
                    body.dmr
                );
                // The stored counts (these units have no scale), NaT as itself.
                let raw = get(&server, &format!("/v1/datasets/fixtures/data/{path}?format=binary"))
                    .await
                    .bytes()
                    .await
                    .unwrap();
                let mut reader = Reader(&body.data);
                let sent = reader.take(raw.len()).to_vec();
                reader.check(&sent);
                assert_eq!(sent, raw.to_vec(), "{path}");
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

async fn geo_server(dir: &tempfile::TempDir, change: impl FnOnce(&mut zarr_serve::config::Config)) -> Server {
    let mut cfg = config();
    cfg.datasets
        .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
    change(&mut cfg);
    Server::start(cfg).await
}

/// A group below the CF dataset, with a group below it.
fn nest(dir: &tempfile::TempDir) {
    use common::geo::write_array;
    let sub = dir.path().join("sub");
    std::fs::create_dir_all(sub.join("deeper")).unwrap();
    for group in [&sub, &sub.join("deeper")] {
        std::fs::write(
            group.join("zarr.json"),
            r#"{"zarr_format": 3, "node_type": "group", "attributes": {"level": 1}}"#,
        )
        .unwrap();
    }
    write_array(
        &sub,
        "lat",
        &[3],
        "int16",
        &["lat"],
        serde_json::json!({}),
        &[1i16, 2, 3].map(i16::to_le_bytes).concat(),
    );
    write_array(
        &sub.join("deeper"),
        "u",
        &[2, 2],
        "uint64",
        &["y", "x"],
        serde_json::json!({"_FillValue": 18446744073709551615u64}),
        &[0u64, 1, 2, u64::MAX].map(u64::to_le_bytes).concat(),
    );
}

const DMR: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Dataset xmlns="http://xml.opendap.org/ns/DAP/4.0#" dapVersion="4.0" dmrVersion="1.0" name="geo">
  <Dimension name="lat" size="4"/>
  <Dimension name="lon" size="8"/>
  <Dimension name="time" size="2"/>
  <Float64 name="lat">
    <Dim name="/lat"/>
    <Attribute name="units" type="String"><Value>degrees_north</Value></Attribute>
  </Float64>
  <Float64 name="lon">
    <Dim name="/lon"/>
    <Attribute name="units" type="String"><Value>degrees_east</Value></Attribute>
  </Float64>
  <Float32 name="tas">
    <Dim name="/time"/>
    <Dim name="/lat"/>
    <Dim name="/lon"/>
    <Attribute name="long_name" type="String"><Value>air temperature</Value></Attribute>
    <Map name="/time"/>
    <Map name="/lat"/>
    <Map name="/lon"/>
  </Float32>
  <Float32 name="tas_xy">
    <Dim name="/lon"/>
    <Dim name="/lat"/>
    <Map name="/lon"/>
    <Map name="/lat"/>
  </Float32>
  <Float64 name="time">
    <Dim name="/time"/>
    <Attribute name="units" type="String"><Value>days since 2000-01-01</Value></Attribute>
    <Attribute name="standard_name" type="String"><Value>time</Value></Attribute>
  </Float64>
  <Group name="sub">
    <Dimension name="lat" size="3"/>
    <Int16 name="lat">
      <Dim name="/sub/lat"/>
    </Int16>
    <Group name="deeper">
      <Dimension name="y" size="2"/>
      <Dimension name="x" size="2"/>
      <UInt64 name="u">
        <Dim name="/sub/deeper/y"/>
        <Dim name="/sub/deeper/x"/>
        <Attribute name="_FillValue" type="UInt64"><Value>18446744073709551615</Value></Attribute>
      </UInt64>
      <Attribute name="level" type="Int32"><Value>1</Value></Attribute>
    </Group>
    <Attribute name="level" type="Int32"><Value>1</Value></Attribute>
  </Group>
  <Attribute name="institution" type="String"><Value>zarr-serve tests</Value></Attribute>
</Dataset>"#;

#[tokio::test]
async fn the_dmr_maps_groups_dimensions_and_coordinates() {
    let dir = dataset();
    nest(&dir);
    let server = geo_server(&dir, |_| {}).await;
    for path in ["/v1/datasets/geo/dap4.dmr", "/v1/datasets/geo/dap4.dmr.xml"] {
        let resp = get(&server, path).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers()["content-type"],
            "application/vnd.opendap.dap4.dataset-metadata+xml; charset=utf-8"
        );
        assert_eq!(resp.text().await.unwrap(), DMR);
    }
    // A group's own dataset: its dimensions by their names below it.
    let sub = get(&server, "/v1/datasets/geo/dap4/sub/deeper.dmr")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        sub.contains("name=\"deeper\"") && sub.contains("<Dim name=\"/y\"/>"),
        "{sub}"
    );
    // The whole dataset's data, in the DMR's order: a group's variables,
    // then its groups'.
    let body = dap(&server, "/v1/datasets/geo/dap4.dap").await;
    assert_eq!(body.dmr, DMR);
    let mut r = Reader(&body.data);
    assert_eq!(r.numbers("Float64", 4, true), common::geo::LATS);
    assert_eq!(r.numbers("Float64", 8, true), common::geo::LONS);
    let tas = r.numbers("Float32", 64, true);
    assert_eq!(tas[8 * 3 + 5], 29.0);
    assert_eq!(r.numbers("Float32", 32, true)[5 * 4 + 2], 121.0);
    assert_eq!(r.numbers("Float64", 2, true), [0.0, 1.0]);
    assert_eq!(r.numbers("Int16", 3, true), [1.0, 2.0, 3.0]);
    let u = r.take(32).to_vec();
    r.check(&u);
    assert_eq!(u, [0u64, 1, 2, u64::MAX].map(u64::to_le_bytes).concat());
    assert!(r.0.is_empty());
    // The explorer's group page names the group's DAP4 dataset.
    let page = client()
        .get(server.url("/explore/geo/sub"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<a href=\"/v1/datasets/geo/dap4/sub.dmr\">DMR</a>"),
        "{page}"
    );
    // The DSR names the three answers.
    let dsr = get(&server, "/v1/datasets/geo/dap4/sub.dsr")
        .await
        .text()
        .await
        .unwrap();
    for answer in ["sub.dsr\"", "sub.dmr\"", "sub.dap\""] {
        assert!(dsr.contains(answer), "{dsr}");
    }
}

#[tokio::test]
async fn constraints_project_slice_and_constrain_dimensions() {
    let dir = dataset();
    nest(&dir);
    let server = geo_server(&dir, |_| {}).await;
    // A hyperslab of its own: anonymous dimensions, no maps.
    let body = dap(
        &server,
        "/v1/datasets/geo/dap4.dap?dap4.ce=/tas%5B1%5D%5B0:2:3%5D%5B2:1:4%5D",
    )
    .await;
    assert!(
        body.dmr
            .contains("<Dim size=\"1\"/>\n    <Dim size=\"2\"/>\n    <Dim size=\"3\"/>"),
        "{}",
        body.dmr
    );
    assert!(
        !body.dmr.contains("<Map") && !body.dmr.contains("<Dimension"),
        "{}",
        body.dmr
    );
    let got = Reader(&body.data).numbers("Float32", 6, true);
    assert_eq!(got, [102.0, 103.0, 104.0, 118.0, 119.0, 120.0]);
    // A shared dimension constrained: variables keep it, at its new size,
    // with the maps projected beside them; the response is in the DMR's
    // order whatever the clause order.
    let body = dap(
        &server,
        "/v1/datasets/geo/dap4.dap?dap4.ce=/lat%3D%5B1:2:3%5D;/tas%5B1:1%5D%5B%5D%5B7%5D;/lat;tas_xy",
    )
    .await;
    assert!(
        body.dmr.contains("<Dimension name=\"lat\" size=\"2\"/>"),
        "{}",
        body.dmr
    );
    assert!(body.dmr.contains("<Dim name=\"/lat\"/>"), "{}", body.dmr);
    assert!(!body.dmr.contains("<Group"), "{}", body.dmr);
    let mut r = Reader(&body.data);
    assert_eq!(r.numbers("Float64", 2, true), [10.0, -30.0]);
    assert_eq!(r.numbers("Float32", 2, true), [115.0, 131.0]);
    assert_eq!(r.numbers("Float32", 16, true)[..2], [108.0, 124.0]);
    assert!(r.0.is_empty());
    // A variable of a nested group, by its full name; the DMR shows only
    // the groups on the way.
    let body = dap(&server, "/v1/datasets/geo/dap4.dap?dap4.ce=/sub/deeper/u%5B1%5D%5B%5D").await;
    assert!(
        body.dmr.contains("<Group name=\"sub\">\n    <Group name=\"deeper\">"),
        "{}",
        body.dmr
    );
    assert!(!body.dmr.contains("<Float"), "{}", body.dmr);
    // Without checksums: the data alone, ending with an empty END chunk;
    // the DMR's chunk says so (0x08, which netCDF-C 4.9.0 looks for).
    let body = dap(&server, "/v1/datasets/geo/dap4.dap?dap4.ce=/lat&dap4.checksum=false").await;
    assert_eq!(body.data, common::geo::f64s(&common::geo::LATS));
    assert_eq!(body.flags & 0x08, 0x08);
    assert_eq!(
        dap(&server, "/v1/datasets/geo/dap4.dap?dap4.ce=/lat").await.flags & 0x08,
        0
    );
}

#[tokio::test]
async fn bad_requests_are_dap4_errors() {
    let dir = dataset();
    let server = geo_server(&dir, |_| {}).await;
    for (path, status, says) in [
        ("/v1/datasets/geo/dap4.dap?dap4.ce=nosuch", 400, "not a variable"),
        (
            "/v1/datasets/geo/dap4.dap?dap4.ce=/tas%5B0:2%5D%5B%5D%5B%5D",
            400,
            "outside",
        ),
        ("/v1/datasets/geo/dap4.dap?dap4.ce=/tas%5B0%5D", 400, "hyperslabs for 3"),
        ("/v1/datasets/geo/dap4.dap?dap4.ce=/lat%7Clat%3E0", 400, "filters"),
        ("/v1/datasets/geo/dap4.dmr?dap4.ce=max(/lat)", 400, "functions"),
        (
            "/v1/datasets/geo/dap4.dap?dap4.ce=/nodim%3D%5B0%5D",
            400,
            "not a shared dimension",
        ),
        ("/v1/datasets/geo/dap4.dap?dap4.checksum=maybe", 400, "true or false"),
        ("/v1/datasets/geo/dap4.dap?dap4.ce=/lat;lat%5B0%5D", 400, "twice"),
        ("/v1/datasets/geo/dap4/tas.dmr", 400, "is an array"),
        ("/v1/datasets/geo/dap4/nosuch.dmr", 404, ""),
        ("/v1/datasets/nosuch/dap4.dmr", 404, ""),
        ("/v1/datasets/geo/dap4.nc", 404, ".dmr"),
    ] {
        let resp = get(&server, path).await;
        assert_eq!(resp.status(), status, "{path}");
        assert_eq!(
            resp.headers()["content-type"],
            "application/vnd.opendap.dap4.error+xml; charset=utf-8",
            "{path}"
        );
        let body = resp.text().await.unwrap();
        assert!(
            body.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error httpcode=\""),
            "{body}"
        );
        assert!(
            body.contains(&format!("httpcode=\"{status}\"")) && body.contains(says),
            "{path}: {body}"
        );
    }
    // DAP2's root answers are untouched by DAP4's sharing their route.
    let dds = get(&server, "/v1/datasets/geo/dap.dds").await;
    assert_eq!(dds.status(), 200);
    assert_eq!(get(&server, "/v1/datasets/geo/other.dds").await.status(), 404);
}

/// A `.dap` larger than `slab_bytes` streams (no length) and reads the same.
#[tokio::test]
async fn large_answers_stream_and_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    common::geo::big_grid(dir.path(), 1024);
    let mut cfg = config();
    cfg.datasets
        .insert("big".into(), common::dataset(dir.path().to_string_lossy()));
    cfg.slab_bytes = 256 << 10;
    let server = Server::start(cfg).await;
    let whole = get(&server, "/v1/datasets/big/data/tas?format=binary")
        .await
        .bytes()
        .await
        .unwrap();
    let resp = get(&server, "/v1/datasets/big/dap4.dap?dap4.ce=/tas").await;
    assert_eq!(resp.status(), 200);
    assert!(resp.content_length().is_none(), "a streamed answer has no length");
    let body = parse(&resp.bytes().await.unwrap());
    let mut r = Reader(&body.data);
    let sent = r.take(whole.len()).to_vec();
    r.check(&sent);
    assert!(sent == whole.to_vec() && r.0.is_empty());
    // A small one is sent whole, its length known before reading.
    let small = get(&server, "/v1/datasets/big/dap4.dap?dap4.ce=/tas%5B0:1%5D%5B0:1%5D").await;
    let length = small.content_length();
    assert_eq!(length, Some(small.bytes().await.unwrap().len() as u64));
}
