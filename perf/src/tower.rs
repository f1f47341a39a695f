//! P17: fairway's fair tower layer against `firq-tower` (pinned), the work a tower layer exists
//! for: keeping a quiet tenant fast while another floods.
//!
//! Both layers stand in front of the same inner service: at most 2 calls at once (fairway: a
//! class of 2 cells; firq: its in-flight limit of 2) and a fixed service time (a 1 ms tokio
//! sleep). Open loop, on a 2-worker tokio runtime: the quiet tenant sends one request every
//! 5 ms (200/s); in the flood rows the other tenant sends 2 every millisecond (2,000/s, 10×),
//! more than the 2 cells serve, so its backlog grows and its excess is refused. Each layer
//! queues up to 256 requests of a tenant and 1,024 in all. A row's latency is the quiet
//! tenant's, request to response; its throughput is every request served per second of the
//! run, drain included.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::tower::FairLayer;
use fairway::{Scheduler, TenantId};
use fairway_bench_support::latency::Latency;
use fairway_bench_support::Measured;
use tower::{Layer, Service, ServiceExt};

/// The quiet tenant alone.
pub const ALONE: &str = "tower: quiet tenant alone";
/// The quiet tenant while the other floods at 10× its rate.
pub const FLOOD: &str = "tower: quiet tenant, other floods 10x";
/// fairway's layer.
pub const FAIRWAY: &str = "fairway FairLayer";
/// The peer.
pub const FIRQ: &str = "firq-tower 0.1.3";

/// The inner service's time per call.
const SERVICE: Duration = Duration::from_millis(1);
/// The quiet tenant sends one request every this many 1 ms ticks.
const QUIET_EVERY: u64 = 5;
/// The flooder's requests per tick (10× the quiet tenant's rate).
const FLOOD_PER_TICK: u64 = 2;
/// Queue bounds of both layers: per tenant, and in all.
const PER_TENANT: u32 = 256;
const GLOBAL: u32 = 1_024;
const QUIET: u32 = 1;
const FLOODER: u32 = 2;

/// A request: only its tenant matters.
#[derive(Clone, Copy)]
struct Req {
    tenant: u32,
}

/// Which layer an arm runs.
#[derive(Clone, Copy, Debug)]
pub enum Which {
    /// fairway's [`FairLayer`].
    Fairway,
    /// firq-tower's `FirqLayer`.
    Firq,
}

/// One timed run: `run_for` of arrivals, then every request awaited.
pub fn run(which: Which, flood: bool, run_for: Duration) -> Measured {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let inner = tower::service_fn(|_: Req| async {
        tokio::time::sleep(SERVICE).await;
        Ok::<(), Infallible>(())
    });
    runtime.block_on(async move {
        match which {
            Which::Fairway => {
                let config = LedgerConfig::new(vec![ClassSpec::new("inner")], 4)
                    .tenant_limits(Limits::UNLIMITED.queue_slots(PER_TENANT));
                let ledger = Ledger::new(config).expect("a valid ledger");
                let scheduler = Scheduler::builder(ledger)
                    .class(2, GLOBAL)
                    .build()
                    .expect("a valid scheduler");
                let layer = FairLayer::builder(scheduler)
                    .tenant(|r: &Req| TenantId(r.tenant))
                    .build();
                drive(layer.layer(inner), flood, run_for).await
            }
            Which::Firq => {
                let layer = firq_tower::Firq::new()
                    .with_max_per_tenant(PER_TENANT as usize)
                    .with_max_global(GLOBAL as usize)
                    .with_in_flight_limit(2)
                    .build(|r: &Req| firq_tower::TenantKey::from(u64::from(r.tenant)));
                drive(layer.layer(inner), flood, run_for).await
            }
        }
    })
}

/// Sends the arrivals to `svc` and measures the quiet tenant's latency.
async fn drive<S>(svc: S, flood: bool, run_for: Duration) -> Measured
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
{
    let start = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut calls = Vec::new();
    let mut tick = 0u64;
    while start.elapsed() < run_for {
        ticker.tick().await;
        let mut send = |tenant| {
            let call = svc.clone().oneshot(Req { tenant });
            calls.push(tokio::spawn(async move {
                let sent = Instant::now();
                let ok = call.await.is_ok();
                (tenant, ok, sent.elapsed())
            }));
        };
        if flood {
            for _ in 0..FLOOD_PER_TICK {
                send(FLOODER);
            }
        }
        if tick.is_multiple_of(QUIET_EVERY) {
            send(QUIET);
        }
        tick += 1;
    }
    let mut m = Measured {
        latency: Latency::new(),
        ..Measured::default()
    };
    let mut served = 0u64;
    for call in calls {
        let (tenant, ok, took) = call.await.expect("a request task panicked");
        served += u64::from(ok);
        if tenant == QUIET {
            // A refused quiet request counts as the longest wait there is: the run's length.
            let ns = if ok { took } else { run_for };
            m.latency.record(ns.as_nanos() as u64);
        }
    }
    m.ops_per_sec = served as f64 / start.elapsed().as_secs_f64();
    m
}
