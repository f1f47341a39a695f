//! An axum service behind fairway's fair tower layer: two cells of work shared by tenants named
//! in an `x-tenant` header, requests queued up to a 500 ms deadline, refusals answered 429 / 503
//! / 504. One tenant floods at ten times the other's rate; the quiet tenant's latency stays near
//! the service time.
//!
//! Run: `cargo run --release --example axum_tower --features tower,http`
//! (`cargo test --all-features` runs it at small sizes).

use axum::error_handling::HandleErrorLayer;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::tower::{FairError, FairLayer};
use fairway::{Scheduler, TenantId};
use std::convert::Infallible;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceBuilder;

/// The handler: a fixed service time on one of the two cells.
async fn work() -> &'static str {
    tokio::time::sleep(Duration::from_millis(2)).await;
    "done\n"
}

/// Refusals become responses; the layer's `Inner` error is `Infallible` for an axum route.
async fn refused(error: FairError<Infallible>) -> Response {
    match error {
        FairError::Rejected(rejection) => rejection.to_response::<String>().into_response(),
        FairError::Inner(never) => match never {},
    }
}

/// The app: a router whose `/work` route is behind the fair layer.
fn app() -> Result<(Router, Scheduler), fairway::Error> {
    // 64 tenants, each with at most 256 requests queued or running at once.
    let config = LedgerConfig::new(vec![ClassSpec::new("http")], 64)
        .tenant_limits(Limits::UNLIMITED.concurrency(256));
    let ledger = Ledger::new(config)?;
    let scheduler = Scheduler::builder(ledger).class(2, 1_024).build()?;
    let fair = FairLayer::builder(scheduler.clone())
        .tenant(|req: &Request| {
            let tenant = req.headers().get("x-tenant").and_then(|v| v.to_str().ok());
            TenantId(tenant.and_then(|t| t.parse().ok()).unwrap_or(0))
        })
        .deadline(|_| Some(Duration::from_millis(500)))
        .build();
    let router = Router::new().route("/work", get(work)).layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(refused))
            .layer(fair),
    );
    Ok((router, scheduler))
}

/// One HTTP/1.1 request on its own connection; the status and the time it took.
async fn get_work(addr: std::net::SocketAddr, tenant: u32) -> std::io::Result<(u16, Duration)> {
    let start = Instant::now();
    let mut stream = TcpStream::connect(addr).await?;
    let head = format!(
        "GET /work HTTP/1.1\r\nhost: localhost\r\nx-tenant: {tenant}\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, start.elapsed()))
}

/// Statuses and latencies of one tenant's requests.
#[derive(Default, Debug)]
struct Seen {
    ok: usize,
    refused: usize,
    latencies: Vec<Duration>,
}

impl Seen {
    fn percentile(&mut self, p: f64) -> Duration {
        self.latencies.sort();
        let i = ((self.latencies.len() as f64 * p).ceil() as usize).saturating_sub(1);
        self.latencies.get(i).copied().unwrap_or_default()
    }
}

/// Serves the app and drives it for `rounds` ticks of 10 ms: each tick the flooder sends
/// `10 * quiet_per_tick` requests and the quiet tenant `quiet_per_tick`.
async fn run(rounds: usize, quiet_per_tick: usize) -> std::io::Result<(Seen, Seen)> {
    let (router, scheduler) = app().map_err(std::io::Error::other)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let mut flood = Vec::new();
    let mut quiet = Vec::new();
    for _ in 0..rounds {
        for _ in 0..10 * quiet_per_tick {
            flood.push(tokio::spawn(get_work(addr, 1)));
        }
        for _ in 0..quiet_per_tick {
            quiet.push(tokio::spawn(get_work(addr, 2)));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut seen = (Seen::default(), Seen::default());
    for (calls, seen) in [(flood, &mut seen.0), (quiet, &mut seen.1)] {
        for call in calls {
            let (status, took) = call.await.map_err(std::io::Error::other)??;
            match status {
                200 => {
                    seen.ok += 1;
                    seen.latencies.push(took);
                }
                429 | 503 | 504 => seen.refused += 1,
                other => return Err(std::io::Error::other(format!("status {other}"))),
            }
        }
    }
    server.abort();
    assert!(
        scheduler.ledger().usage().is_zero(),
        "a request kept its quota"
    );
    Ok(seen)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let (mut flood, mut quiet) = run(100, 2).await?;
    for (name, seen) in [
        ("flooding tenant", &mut flood),
        ("quiet tenant", &mut quiet),
    ] {
        let (p50, p99) = (seen.percentile(0.5), seen.percentile(0.99));
        println!(
            "{name}: {} served, {} refused, p50 {p50:?}, p99 {p99:?}",
            seen.ok, seen.refused
        );
    }
    Ok(())
}

#[test]
fn x04_the_axum_example_serves_the_quiet_tenant_under_a_flood() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (flood, quiet) = runtime.block_on(run(5, 1)).unwrap();
    assert_eq!(
        quiet.ok, 5,
        "the quiet tenant's requests were refused: {quiet:?}"
    );
    assert_eq!(flood.ok + flood.refused, 50);
    assert!(flood.ok > 0, "nothing of the flooder's was served");
}
