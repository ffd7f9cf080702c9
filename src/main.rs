//! The `zarr-serve` binary: parse the command line and config, set up
//! logging, bind, and serve until SIGTERM or Ctrl-C.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Parser;
use zarr_serve::config::{Cli, Config};
use zarr_serve::http::{serve, AppState};

fn fail(message: &str) -> ! {
    eprintln!("zarr-serve: {message}");
    std::process::exit(2);
}

/// How often freed heap memory is handed back to the OS.
const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Allocations from this size on get their own mapping, returned to the OS
/// when freed.
const MMAP_THRESHOLD: i32 = 1 << 20;

/// Free memory at the top of a heap that a `free` gives back at once:
/// glibc's default (128 KiB) gave it back on nearly every free and faulted
/// the pages in again on the next allocation, a third of a reduction's CPU;
/// much higher, and the heaps of other threads than the main one, which
/// `malloc_trim` does not shrink, kept what a load left (BENCHMARKS.md).
const TRIM_THRESHOLD: i32 = 4 << 20;

/// Keep RSS near what is in use (glibc's allocator; BENCHMARKS.md):
/// - large buffers (slabs, shard pieces, JSON pieces) are always mapped
///   alone, instead of glibc raising its threshold to the largest buffer
///   freed so far and keeping them in its heaps, where they fragment;
///   `GLIBC_TUNABLES` still wins;
/// - no heap shrinks on `free` (see [`TRIM_THRESHOLD`]);
/// - every [`TRIM_EVERY`] the free parts of every heap (one per thread
///   under load) go back to the OS.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("GLIBC_TUNABLES").is_none() {
            // SAFETY: mallopt sets an option of glibc's allocator; called before any thread starts.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
                libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
            }
        }
        std::thread::Builder::new()
            .name("zarr-trim".into())
            .spawn(|| loop {
                std::thread::sleep(TRIM_EVERY);
                // SAFETY: malloc_trim only walks glibc's own heaps, under their locks.
                unsafe { libc::malloc_trim(0) };
            })
            .unwrap_or_else(|e| fail(&format!("cannot start the trim thread: {e}")));
    }
}

fn main() {
    tune_allocator();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Blocking threads do local file I/O (decoding has its own threads);
        // more of them only add per-thread allocator heaps (BENCHMARKS.md).
        .max_blocking_threads(4 * cores)
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start the runtime: {e}")));
    runtime.block_on(run());
}

async fn run() {
    let cli = Cli::try_parse().unwrap_or_else(|e| {
        if matches!(
            e.kind(),
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
        ) {
            e.exit();
        }
        fail(e.to_string().lines().next().unwrap_or("invalid arguments"))
    });
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let config = Config::load(&cli, &env).unwrap_or_else(|e| fail(&e));
    if cli.healthcheck {
        std::process::exit(healthcheck(&config).await);
    }
    init_logging(&config);
    let state = AppState::from_config(&config).unwrap_or_else(|e| fail(&e));
    let addr = config.listen_addr().unwrap_or_else(|e| fail(&e));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| fail(&format!("cannot listen on {addr}: {e}")));
    let names: Vec<&String> = config.datasets.keys().collect();
    tracing::info!(%addr, datasets = ?names, config = ?config.file, "zarr-serve listening");
    let grace = Duration::from_secs_f64(config.shutdown_grace_secs);
    if let Err(e) = serve(listener, state, shutdown_signal(), grace).await {
        tracing::error!(error = %e, "server error");
        std::process::exit(1);
    }
    tracing::info!("zarr-serve stopped");
}

/// GET /healthz on the configured address with a bare HTTP/1.1 request.
async fn healthcheck(config: &Config) -> i32 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut addr = config.listen_addr().unwrap_or_else(|e| fail(&e));
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        Some(response.starts_with(b"HTTP/1.1 200"))
    };
    match tokio::time::timeout(Duration::from_secs(3), probe).await {
        Ok(Some(true)) => 0,
        _ => 1,
    }
}

fn init_logging(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log_level)
        .unwrap_or_else(|e| fail(&format!("invalid log_level '{}': {e}", config.log_level)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if config.log_format == "json" {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
    log_panics();
}

/// Log every panic (a bug: its request is answered 500 "internal" and the
/// server goes on) as an error with the place it was raised.
fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let location = info.location().map(|l| l.to_string()).unwrap_or_default();
        let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
        tracing::error!(%location, %thread, panic = %message, "panic");
    }));
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutdown requested: finishing in-flight requests");
}
