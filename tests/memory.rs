//! Memory under the worst request of each hostile family (issue 39), on a
//! server process of its own with the default limits: its peak resident
//! memory (VmHWM, reset before each family through /proc/PID/clear_refs)
//! must stay under a stated growth, and the process must survive. The
//! figures are printed; the bounds follow from the configuration
//! (`slab_budget_bytes` for slabs and, as much again, for answers made
//! whole; the caches), not from luck.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

const MIB: u64 = 1 << 20;
/// The default `slab_budget_bytes`: slabs of reads hold at most this much,
/// and answers made whole (maps, legends, EDR values) as much again.
const BUDGET: u64 = 256 * MIB;

struct Process {
    child: Child,
    base: String,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// `/proc/PID/status` field `name`, in bytes.
    fn status(&self, name: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = text.lines().find(|l| l.starts_with(name)).unwrap();
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib * 1024
    }

    /// Start a new peak at the present resident size; that size.
    fn reset_peak(&self) -> u64 {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").unwrap();
        self.status("VmRSS:")
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

fn start(datasets: &[(&str, String)], settings: &[(&str, &str)]) -> Process {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zarr-serve"));
    cmd.arg("--listen").arg(format!("127.0.0.1:{port}"));
    for (name, url) in datasets {
        cmd.arg("--dataset").arg(format!("{name}={url}"));
    }
    // The defaults of config/default.toml, whatever the environment says.
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("ZARR_SERVE_")) {
        cmd.env_remove(key);
    }
    cmd.env("ZARR_SERVE_CONFIG", "/dev/null")
        .env("ZARR_SERVE_LOG_LEVEL", "warn");
    for (key, value) in settings {
        cmd.env(key, value);
    }
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().unwrap();
    Process {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

async fn wait_until_up(base: &str) {
    let started = Instant::now();
    let ready = || async {
        let resp = common::client().get(format!("{base}/healthz")).send().await;
        resp.is_ok_and(|r| r.status() == 200)
    };
    while !ready().await {
        assert!(started.elapsed() < Duration::from_secs(20), "the server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GET `path`: its status and how many body bytes came.
async fn fetch(base: &str, path: &str) -> (u16, u64) {
    let client = common::client();
    let resp = client.get(format!("{base}{path}")).send().await.unwrap();
    let status = resp.status().as_u16();
    let mut stream = resp.bytes_stream();
    let mut bytes = 0;
    while let Some(piece) = stream.next().await {
        match piece {
            Ok(piece) => bytes += piece.len() as u64,
            Err(_) => break,
        }
    }
    (status, bytes)
}

/// `count` of `path` at once: their statuses and body bytes.
async fn many(base: &str, path: &str, count: usize) -> Vec<(u16, u64)> {
    let all = (0..count).map(|_| fetch(base, path));
    futures::future::join_all(all).await
}

#[tokio::test]
async fn the_worst_request_of_each_family_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("big.zarr");
    std::fs::create_dir_all(&grid).unwrap();
    common::geo::big_grid(&grid, 4096);
    let set = dir.path().join("swamp.json");
    std::fs::write(
        &set,
        json!({"version": 1, "refs": {".zgroup": "{\"zarr_format\": 2}"},
               "gen": [{"key": "a/{{i}}.{{j}}", "url": "file:///x",
                        "dimensions": {"i": {"stop": 10_000}, "j": {"stop": 1000}}}]})
        .to_string(),
    )
    .unwrap();
    let mut server = start(
        &[
            ("big", grid.to_string_lossy().into_owned()),
            ("swamp", format!("refs+file://{}", set.display())),
        ],
        &[],
    );
    let base = server.base.clone();
    wait_until_up(&base).await;
    // Warm: metadata, coordinates and the default colour range.
    let wms = "/v1/datasets/big/wms?SERVICE=WMS&VERSION=1.3.0";
    assert_eq!(fetch(&base, &format!("{wms}&REQUEST=GetCapabilities")).await.0, 200);
    let legend = format!("{wms}&REQUEST=GetLegendGraphic&LAYER=tas&COLORSCALERANGE=0,1");
    assert_eq!(fetch(&base, &legend).await.0, 200);
    let edr = "/v1/datasets/big/edr/collections/big";
    assert_eq!(fetch(&base, &format!("{edr}/position?coords=POINT(0 0)")).await.0, 200);

    let tas1500 = vec!["tas"; 1500].join(",");
    let families: Vec<(&str, String, usize, u64, &[u16])> = vec![
        (
            "GetFeatureInfo 4294967295 x 4294967295",
            format!(
                "{wms}&REQUEST=GetFeatureInfo&QUERY_LAYERS=tas&CRS=CRS:84&BBOX=-180,-90,180,90\
                 &WIDTH=4294967295&HEIGHT=4294967295&I=0&J=0"
            ),
            4,
            16 * MIB,
            &[400],
        ),
        (
            "16 GetLegendGraphic 4096 x 4096 at once",
            format!("{legend}&WIDTH=4096&HEIGHT=4096"),
            16,
            BUDGET + 64 * MIB,
            &[200, 503],
        ),
        (
            "4 GetMap 4096 x 4096 of the whole grid at once",
            format!(
                "{wms}&REQUEST=GetMap&LAYERS=tas&STYLES=&FORMAT=image/png&CRS=CRS:84\
                 &BBOX=-180,-90,180,90&WIDTH=4096&HEIGHT=4096&COLORSCALERANGE=0,65536"
            ),
            4,
            2 * BUDGET,
            &[200, 503],
        ),
        (
            "2 EDR cubes of the whole 4096 x 4096 grid, tas named 1500 times, CoverageJSON",
            format!("{edr}/cube?bbox=-180,-90,180,90&parameter-name={tas1500}"),
            2,
            BUDGET + 128 * MIB,
            &[200, 503],
        ),
        (
            "EDR cube of the whole grid as GeoJSON",
            format!("{edr}/cube?bbox=-180,-90,180,90&f=GeoJSON"),
            1,
            BUDGET + 128 * MIB,
            &[200],
        ),
        (
            "EDR radius within=1e12 as CSV",
            format!("{edr}/radius?coords=POINT(0 0)&within=1e12&f=CSV"),
            1,
            BUDGET + 128 * MIB,
            &[200],
        ),
        (
            "a kerchunk set of 300 bytes generating ten million keys",
            "/v1/datasets/swamp/nodes".to_string(),
            4,
            64 * MIB,
            &[503, 502],
        ),
    ];
    let mut report = Vec::new();
    for (name, path, count, bound, statuses) in families {
        let before = server.reset_peak();
        let t = Instant::now();
        let answers = many(&base, &path, count).await;
        let growth = server.status("VmHWM:").saturating_sub(before);
        let line = format!(
            "{name}: {:?} in {:.1} s, peak RSS +{} MiB (bound {} MiB)",
            answers,
            t.elapsed().as_secs_f64(),
            growth / MIB,
            bound / MIB
        );
        println!("{line}");
        assert!(server.alive(), "the process ended: {line}");
        assert_eq!(fetch(&base, "/healthz").await.0, 200, "{line}");
        assert!(answers.iter().all(|(s, _)| statuses.contains(s)), "{line}");
        assert!(answers.iter().any(|(s, _)| *s == statuses[0]), "{line}");
        assert!(growth < bound, "{line}");
        report.push(line);
    }
    println!("{}", report.join("\n"));
}

/// api.md 4.1 (4): an answer larger than memory allows streams in every
/// format that streams: with 1 MiB slabs and a 16 MiB slab budget, half of
/// a 4096 x 4096 float32 grid (32 MiB as binary, three to nine times that
/// as text; an EDR cube of it 64 MiB of values, read a part at a time) is
/// sent while the process grows by less than the answer.
#[tokio::test]
async fn streaming_each_format_keeps_memory_below_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("big.zarr");
    std::fs::create_dir_all(&grid).unwrap();
    common::geo::big_grid(&grid, 4096);
    let settings = [
        ("ZARR_SERVE_SLAB_BYTES", "1048576"),
        ("ZARR_SERVE_SLAB_BUDGET_BYTES", "16777216"),
        ("ZARR_SERVE_DECODED_CHUNK_CACHE_BYTES", "0"),
    ];
    let mut server = start(&[("big", grid.to_string_lossy().into_owned())], &settings);
    let base = server.base.clone();
    wait_until_up(&base).await;
    let half = 2048 * 4096 * 4;
    let data = "/v1/datasets/big/data/tas?select=0:2048";
    // The northern half as an EDR cube: its values are 8 bytes each.
    let edr = "/v1/datasets/big/edr/collections/big/cube?bbox=-180,0,180,90";
    let formats = [
        ("binary", data.to_string()),
        ("npy", format!("{data}&format=npy")),
        ("JSON", format!("{data}&format=json")),
        ("CSV", format!("{data}&format=csv")),
        ("NetCDF", format!("{data}&format=netcdf")),
        (
            "DAP2 .dods",
            "/v1/datasets/big/dap.dods?tas[0:2047][0:4095]".to_string(),
        ),
        (
            "DAP2 .ascii",
            "/v1/datasets/big/dap.ascii?tas[0:2047][0:4095]".to_string(),
        ),
        (
            "DAP4 .dap",
            "/v1/datasets/big/dap4.dap?dap4.ce=/tas%5B0:2047%5D%5B0:4095%5D".to_string(),
        ),
        ("EDR CoverageJSON", edr.to_string()),
        ("EDR GeoJSON", format!("{edr}&f=GeoJSON")),
        ("EDR CSV", format!("{edr}&f=CSV")),
        ("EDR NetCDF", format!("{edr}&f=NetCDF")),
    ];
    // Warm: metadata and coordinates.
    assert_eq!(fetch(&base, "/v1/datasets/big/data/tas?select=0,0").await.0, 200);
    let mut report = Vec::new();
    for (name, path) in formats {
        let before = server.reset_peak();
        let t = Instant::now();
        let (status, bytes) = fetch(&base, &path).await;
        let growth = server.status("VmHWM:").saturating_sub(before);
        let line = format!(
            "{name}: {status}, {} MiB in {:.1} s, peak RSS +{} MiB (answer {} MiB as binary)",
            bytes / MIB,
            t.elapsed().as_secs_f64(),
            growth / MIB,
            half / MIB
        );
        println!("{line}");
        assert!(server.alive(), "the process ended: {line}");
        assert_eq!(status, 200, "{line}");
        assert!(bytes >= half, "{line}");
        assert!(growth < half, "{line}");
        report.push(line);
    }
    println!("{}", report.join("\n"));
}
