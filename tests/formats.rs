//! File formats of region reads (api.md 3.6) against the real server:
//! every fixture array zarr-python and tensorstore wrote, as CSV and as
//! NetCDF (read back by the `netcdf3` crate, an independent reader),
//! compared with what zarr-python read; GeoTIFFs of the CF dataset of
//! tests/common/geo.rs read by the `tiff` crate; streamed bodies, the one
//! 413 rule of every format, ETags. Runs on every store backend
//! (`ZARR_FIXTURES_STORE`); Python clients (pandas, netCDF4, xarray,
//! rasterio) read the same in tests/dap/test_file_clients.py.

mod common;

use common::geo::{dataset, empty_group, write_array, LATS, LONS};
use common::{client, config, manifest, Server};
use serde_json::{json, Value};

async fn get(server: &Server, path: &str) -> reqwest::Response {
    client().get(server.url(path)).send().await.unwrap()
}

async fn body(server: &Server, path: &str) -> Vec<u8> {
    let resp = get(server, path).await;
    assert_eq!(resp.status(), 200, "{path}: {}", resp.text().await.unwrap());
    resp.bytes().await.unwrap().to_vec()
}

/// A manifest array's expected elements (zarr-python's read), as f64, for
/// the types these formats are checked on (not float16, bytes or complex).
fn expected(entry: &Value) -> Option<Vec<f64>> {
    let checked = [
        "bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64",
    ];
    checked
        .contains(&entry["data_type"].as_str()?)
        .then(|| common::expected(entry))
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

/// The last column of each CSV row after the header, as numbers (empty:
/// NaN; float32 values read as float32), and the header.
fn csv_values(text: &str, float32: bool) -> (String, Vec<f64>) {
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    let values = lines
        .map(|line| match line.rsplit(',').next().unwrap() {
            "" => f64::NAN,
            "true" => 1.0,
            "false" => 0.0,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            v if float32 => v.parse::<f32>().unwrap_or_else(|_| panic!("{line}")).into(),
            v => v.parse().unwrap_or_else(|_| panic!("{line}")),
        })
        .collect();
    (header, values)
}

/// A variable of a CDF-1/2 file, read by the `netcdf3` crate, as f64.
fn netcdf3_values(file: &[u8], var: &str) -> Vec<f64> {
    let cursor = Box::new(std::io::Cursor::new(file.to_vec()));
    let mut reader = netcdf3::FileReader::open_seek_read("region.nc", cursor).unwrap();
    match reader.read_var(var).unwrap() {
        netcdf3::DataVector::I8(v) => v.into_iter().map(f64::from).collect(),
        netcdf3::DataVector::U8(v) => v.into_iter().map(f64::from).collect(),
        netcdf3::DataVector::I16(v) => v.into_iter().map(f64::from).collect(),
        netcdf3::DataVector::I32(v) => v.into_iter().map(f64::from).collect(),
        netcdf3::DataVector::F32(v) => v.into_iter().map(f64::from).collect(),
        netcdf3::DataVector::F64(v) => v,
    }
}

#[tokio::test]
async fn every_fixture_array_as_csv_and_netcdf_reads_as_zarr_python_read_it() {
    let server = Server::start(config()).await;
    let (mut checked, mut cdf5) = (0, 0);
    for entry in manifest()["arrays"].as_array().unwrap() {
        let Some(want) = expected(entry) else { continue };
        let path = entry["path"].as_str().unwrap();
        let name = path.rsplit('/').next().unwrap();
        let data_type = entry["data_type"].as_str().unwrap();
        let url = format!("/v1/datasets/fixtures/data/{path}");
        let resp = get(&server, &format!("{url}?format=csv")).await;
        assert_eq!(resp.headers()["content-type"], "text/csv; charset=utf-8");
        let text = resp.text().await.unwrap();
        let (header, got) = csv_values(&text, data_type == "float32");
        assert!(header.ends_with(name), "{path}: {header}");
        assert!(same(&got, &want), "{path} as CSV");
        if want.is_empty() && !entry["shape"].as_array().unwrap().is_empty() {
            // A length-0 dimension is netCDF classic's record dimension: no file.
            let resp = get(&server, &format!("{url}?format=netcdf")).await;
            assert_eq!(resp.status(), 400, "{path}");
            continue;
        }
        let file = body(&server, &format!("{url}?format=netcdf")).await;
        let five = matches!(data_type, "uint8" | "uint16" | "uint32" | "int64" | "uint64");
        assert_eq!(&file[..4], if five { b"CDF\x05" } else { b"CDF\x02" }, "{path}");
        if five {
            // The netcdf3 crate reads CDF-1/2 only; netCDF4 reads these in Python.
            cdf5 += 1;
        } else {
            assert!(same(&netcdf3_values(&file, name), &want), "{path} as NetCDF");
        }
        checked += 1;
    }
    assert!(
        checked > 150 && cdf5 > 20,
        "only {checked} arrays checked ({cdf5} CDF-5)"
    );
}

#[tokio::test]
async fn what_a_format_cannot_carry_is_a_400_before_reading() {
    let server = Server::start(config()).await;
    for entry in manifest()["arrays"].as_array().unwrap() {
        let data_type = entry["data_type"].as_str().unwrap();
        if !matches!(data_type, "float16" | "complex64" | "complex128") {
            continue;
        }
        let path = entry["path"].as_str().unwrap();
        let resp = get(&server, &format!("/v1/datasets/fixtures/data/{path}?format=netcdf")).await;
        assert_eq!(resp.status(), 400, "{path}");
        let problem: Value = resp.json().await.unwrap();
        assert!(problem["detail"].as_str().unwrap().contains(data_type), "{problem}");
    }
    // Not a geo variable: no GeoTIFF.
    let entry = &manifest()["arrays"][0];
    let path = entry["path"].as_str().unwrap();
    let resp = get(&server, &format!("/v1/datasets/fixtures/data/{path}?format=geotiff")).await;
    assert_eq!(resp.status(), 400, "{path}");
}

async fn geo_server(dir: &tempfile::TempDir, limit: Option<u64>) -> Server {
    geo_server_with(dir, limit, None).await
}

async fn geo_server_with(dir: &tempfile::TempDir, limit: Option<u64>, slab_bytes: Option<u64>) -> Server {
    let mut cfg = config();
    if let Some(bytes) = slab_bytes {
        cfg.slab_bytes = bytes;
    }
    cfg.datasets
        .insert("geo".into(), common::dataset(dir.path().to_string_lossy()));
    if let Some(limit) = limit {
        cfg.max_response_bytes = limit;
    }
    Server::start(cfg).await
}

/// `tas[t, i, j] = 100 t + 8 i + j`.
fn tas(t: usize, i: usize, j: usize) -> f64 {
    (100 * t + 8 * i + j) as f64
}

#[tokio::test]
async fn geotiffs_carry_values_place_and_crs() {
    let dir = dataset();
    let server = geo_server(&dir, None).await;
    // Latitude descends (north-up): pixel scale and tie point.
    let file = body(&server, "/v1/datasets/geo/data/tas?select=1&format=geotiff").await;
    let mut decoder = tiff::decoder::Decoder::new(std::io::Cursor::new(&file)).unwrap();
    assert_eq!(decoder.dimensions().unwrap(), (8, 4));
    let tiff::decoder::DecodingResult::F32(values) = decoder.read_image().unwrap() else {
        panic!("float32 pixels")
    };
    let want: Vec<f32> = (0..4).flat_map(|i| (0..8).map(move |j| tas(1, i, j) as f32)).collect();
    assert_eq!(values, want);
    let mut tag = |t: u16| decoder.get_tag(tiff::tags::Tag::Unknown(t)).unwrap();
    let (dx, dy) = (LONS[1] - LONS[0], LATS[0] - LATS[1]);
    assert_eq!(tag(33550).into_f64_vec().unwrap(), vec![dx, dy, 0.0]);
    let tie = tag(33922).into_f64_vec().unwrap();
    assert_eq!(tie[3..5], [LONS[0] - dx / 2.0, LATS[0] + dy / 2.0]);
    assert_eq!(&tag(34735).into_u16_vec().unwrap()[12..], &[2048, 0, 1, 4326]);
    assert_eq!(tag(42113).into_string().unwrap(), "nan");
    // Every other latitude from the south (south-up) and a column range: a matrix.
    let file = body(&server, "/v1/datasets/geo/data/tas?select=0,::-2,2:5&format=geotiff").await;
    let mut decoder = tiff::decoder::Decoder::new(std::io::Cursor::new(&file)).unwrap();
    assert_eq!(decoder.dimensions().unwrap(), (3, 2));
    let tiff::decoder::DecodingResult::F32(values) = decoder.read_image().unwrap() else {
        panic!("float32 pixels")
    };
    let want: Vec<f32> = [3, 1]
        .iter()
        .flat_map(|&i| (2..5).map(move |j| tas(0, i, j) as f32))
        .collect();
    assert_eq!(values, want);
    let matrix = decoder
        .get_tag(tiff::tags::Tag::Unknown(34264))
        .unwrap()
        .into_f64_vec()
        .unwrap();
    let step = LATS[1] - LATS[3];
    assert_eq!(
        matrix[..8],
        [dx, 0.0, 0.0, LONS[2] - dx / 2.0, 0.0, step, 0.0, LATS[3] - step / 2.0]
    );
    // Not rasters: X before Y, three dimensions, uneven rows, a reduction.
    for query in [
        "tas_xy?format=geotiff",
        "tas?format=geotiff",
        "tas?select=0,[0,1,3]&format=geotiff",
        "tas?select=0&reduce=mean&axis=lat&format=geotiff",
    ] {
        let resp = get(&server, &format!("/v1/datasets/geo/data/{query}")).await;
        assert_eq!(resp.status(), 400, "{query}");
        let problem: Value = resp.json().await.unwrap();
        assert!(
            problem["detail"].as_str().unwrap().contains("geotiff"),
            "{query}: {problem}"
        );
    }
}

#[tokio::test]
async fn netcdf_files_carry_coordinates_and_attributes() {
    let dir = dataset();
    let server = geo_server(&dir, None).await;
    let file = body(&server, "/v1/datasets/geo/data/tas?select=:,1:3&format=netcdf").await;
    let cursor = Box::new(std::io::Cursor::new(file.clone()));
    let reader = netcdf3::FileReader::open_seek_read("tas.nc", cursor).unwrap();
    let data_set = reader.data_set();
    let dims: Vec<(String, usize)> = data_set.get_dims().iter().map(|d| (d.name(), d.size())).collect();
    let want = [("time", 2), ("lat", 2), ("lon", 8)].map(|(n, s)| (n.to_string(), s));
    assert_eq!(dims, want);
    assert_eq!(
        data_set.get_var_attr_as_string("tas", "long_name").unwrap(),
        "air temperature"
    );
    assert_eq!(
        data_set.get_var_attr_as_string("time", "units").unwrap(),
        "days since 2000-01-01"
    );
    assert_eq!(
        data_set.get_global_attr_as_string("institution").unwrap(),
        "zarr-serve tests"
    );
    assert_eq!(netcdf3_values(&file, "lat"), LATS[1..3]);
    assert_eq!(netcdf3_values(&file, "lon"), LONS);
    let values = netcdf3_values(&file, "tas");
    let want: Vec<f64> = (0..2)
        .flat_map(|t| (1..3).flat_map(move |i| (0..8).map(move |j| tas(t, i, j))))
        .collect();
    assert_eq!(values, want);
    // A reduction is a file too: its kept dimension keeps its coordinate.
    let file = body(
        &server,
        "/v1/datasets/geo/data/tas?reduce=max&axis=time,lon&format=netcdf",
    )
    .await;
    assert_eq!(netcdf3_values(&file, "lat"), LATS);
    let want: Vec<f64> = (0..4).map(|i| tas(1, i, 7)).collect();
    assert_eq!(netcdf3_values(&file, "tas"), want);
}

#[tokio::test]
async fn large_results_stream_in_every_format() {
    // 3 x 1024 x 1024 float32 (12 MiB decoded), read in slabs of 1 MiB.
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
    // One chunk per t, so the read has slabs to stream.
    let node = dir.path().join("big");
    let meta = std::fs::read_to_string(node.join("zarr.json")).unwrap();
    let meta = meta.replace("[3,1024,1024]}", "[1,1024,1024]}");
    std::fs::write(node.join("zarr.json"), meta).unwrap();
    for t in 0..3 {
        let at = node.join(format!("c/{t}/0"));
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join("0"), &data[t * (4 << 20)..(t + 1) * (4 << 20)]).unwrap();
    }
    let server = geo_server_with(&dir, None, Some(1 << 20)).await;
    let url = "/v1/datasets/geo/data/big?select=:,:,1::2";
    let resp = get(&server, &format!("{url}&format=netcdf")).await;
    let length: usize = resp.headers()["content-length"].to_str().unwrap().parse().unwrap();
    let file = resp.bytes().await.unwrap().to_vec();
    assert_eq!(file.len(), length);
    let values = netcdf3_values(&file, "big");
    assert_eq!(values.len(), n / 2);
    assert!(values.iter().enumerate().all(|(k, v)| *v == (2 * k + 1) as f64));
    let resp = get(&server, &format!("{url}&format=csv")).await;
    assert!(resp.headers().get("content-length").is_none(), "CSV streams chunked");
    let text = resp.text().await.unwrap();
    let (header, values) = csv_values(&text, true);
    assert_eq!(header, "t,y,x,big");
    assert!(values.iter().enumerate().all(|(k, v)| *v == (2 * k + 1) as f64));
    assert_eq!(values.len(), n / 2);
    // Labels are positions in the array: the last row is t 2, y 1023, x 1023.
    assert_eq!(text.lines().last().unwrap(), format!("2,1023,1023,{}.0", n - 1));
    let resp = get(&server, &format!("{url}&format=geotiff")).await;
    assert_eq!(resp.status(), 400, "no X/Y coordinates: not a geo variable");
}

#[tokio::test]
async fn one_limit_for_every_format_and_etags_per_format() {
    let dir = dataset();
    // tas[0] is 4 x 8 float32: 128 bytes decoded, in every format.
    let server = geo_server(&dir, Some(128)).await;
    for format in ["binary", "npy", "json", "csv", "netcdf", "geotiff"] {
        let fits = get(&server, &format!("/v1/datasets/geo/data/tas?select=0&format={format}")).await;
        assert_eq!(fits.status(), 200, "{format}");
        let over = get(
            &server,
            &format!("/v1/datasets/geo/data/tas?select=:,0:3&format={format}"),
        )
        .await;
        assert_eq!(over.status(), 413, "{format}");
    }
    let etag = |resp: &reqwest::Response| resp.headers()["etag"].to_str().unwrap().to_string();
    let csv = get(&server, "/v1/datasets/geo/data/tas?select=0&format=csv").await;
    let nc = get(&server, "/v1/datasets/geo/data/tas?select=0&format=netcdf").await;
    assert_ne!(etag(&csv), etag(&nc));
    let again = client()
        .get(server.url("/v1/datasets/geo/data/tas?select=0&format=csv"))
        .header("if-none-match", etag(&csv))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    let head = client()
        .head(server.url("/v1/datasets/geo/data/tas?select=0&format=netcdf"))
        .send()
        .await
        .unwrap();
    assert_eq!(head.headers()["content-length"], nc.headers()["content-length"]);
}
