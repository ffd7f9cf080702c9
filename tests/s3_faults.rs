//! Store faults against a real S3-protocol server: the store goes away under
//! the service and comes back. Runs when `ZARR_FIXTURES_STORE` is an `s3://`
//! URL and `AWS_ENDPOINT` names the server (the S3 stage of
//! scripts/test-all.sh); otherwise it says so and passes.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, config, Server};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// A TCP proxy that can be cut (open connections dropped, new ones refused
/// by closing them at once) and restored.
struct Proxy {
    addr: std::net::SocketAddr,
    up: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (up2, links2) = (up.clone(), links.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !up2.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                links2.lock().await.push(link);
            }
        });
        Proxy { addr, up, links }
    }

    async fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for link in self.links.lock().await.drain(..) {
            link.abort();
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn the_service_answers_503_while_s3_is_down_and_recovers_by_itself() {
    let (Ok(store), Ok(endpoint)) = (std::env::var("ZARR_FIXTURES_STORE"), std::env::var("AWS_ENDPOINT")) else {
        eprintln!("skipped: no S3 server (set ZARR_FIXTURES_STORE=s3://... and AWS_ENDPOINT)");
        return;
    };
    let upstream = endpoint.trim_start_matches("http://").trim_end_matches('/').to_string();
    let proxy = Proxy::start(upstream).await;
    let mut cfg = config();
    let mut s3 = common::dataset(store);
    s3.options.insert("endpoint".into(), format!("http://{}", proxy.addr));
    cfg.datasets.insert("s3".into(), s3);
    cfg.store_retries = 1;
    cfg.store_timeout_secs = 2.0;
    cfg.metadata_ttl_secs = 0.05;
    let server = Server::start(cfg).await;
    let data = server.url("/v1/datasets/s3/data/zarr_python/int16?select=0:4,0:4");
    let status = |url: String| async move { client().get(url).send().await.unwrap() };

    assert_eq!(status(data.clone()).await.status(), 200);
    assert_eq!(status(server.url("/readyz")).await.status(), 200);

    proxy.cut().await;
    let down = status(data.clone()).await;
    assert_eq!(down.status(), 503, "store down");
    assert_eq!(down.headers()["retry-after"], "1");
    let ready = status(server.url("/readyz")).await;
    assert_eq!(ready.status(), 503);
    assert!(ready.text().await.unwrap().contains("s3"));
    // Other datasets keep serving.
    assert_eq!(
        status(server.url("/v1/datasets/sample/data/mask?select=0:4,0:4"))
            .await
            .status(),
        200
    );

    proxy.restore();
    let started = Instant::now();
    loop {
        let resp = status(data.clone()).await;
        if resp.status() == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "did not recover: {}",
            resp.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status(server.url("/readyz")).await.status(), 200);
}
