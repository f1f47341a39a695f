//! A tokio host (SPEC X01, X03): a function runtime that runs each invocation as a task and
//! waits for a cell with `Scheduler::enqueue_owned(..).await`.
//!
//! Three tenants invoke functions on a class of 4 cells. Each invocation is admitted by the
//! ledger (priority, deadline, a per-tenant concurrency limit), then waits for a cell in the
//! fair scheduler, runs (an async sleep stands in for the function) and releases the cell.
//! The example also shows what a host does around that:
//!
//! - cancelling a queued invocation through its `CancellationToken` (a client disconnect);
//! - a deadline passing while an invocation waits (`deadline-exceeded`);
//! - aborting a waiting task: the future is dropped and everything is refunded (X01);
//! - a function that overruns its `tokio::time::timeout`: the timeout drops the running
//!   future and its assignment with it, so the cell is quarantined (its state is unknown);
//!   the host lists the quarantined cells, cleans them and restores them (F22, F44);
//! - a graceful drain at the end, after which the ledger is back at zero.
//!
//! Run it with `cargo run --release --example tokio_host`.

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::oracle::{Ring, SchedulerOn};
use fairway::{AdmittedRequest, CancellationToken, Code, RequestId, Scheduler, TenantId};
use std::time::{Duration, Instant};

/// What the runtime reports for one invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ran,
    Cancelled,
    Expired,
    Refused,
}

/// Admits one invocation and waits for a cell, then "runs" it for `work`.
async fn invoke(
    scheduler: SchedulerOn<(), Ring>,
    request: AdmissionRequest,
    token: CancellationToken,
    work: Duration,
) -> Outcome {
    let permit = match scheduler.ledger().admit(request) {
        Ok(p) => p,
        Err(_) => return Outcome::Refused,
    };
    // `enqueue_owned` gives a `'static` future; `enqueue` borrows the scheduler instead.
    match scheduler
        .enqueue_owned(AdmittedRequest::new(permit, token))
        .await
    {
        Ok(assignment) => {
            tokio::time::sleep(work).await;
            // Release explicitly: dropping the assignment instead applies the class's drop
            // policy, whose default (`DropPolicy::Quarantine`) takes the cell out of service
            // until the host restores it (`Scheduler::restore_cell`).
            assignment.release();
            Outcome::Ran
        }
        Err(e) if e.code() == Code::Cancelled => Outcome::Cancelled,
        Err(e) if e.code() == Code::DeadlineExceeded => Outcome::Expired,
        Err(_) => Outcome::Refused,
    }
}

/// Runs the host; returns how many invocations ended in each way
/// (ran, cancelled, expired, refused, aborted).
pub fn run(quiet: bool) -> Result<[usize; 5], fairway::Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let ledger = Ledger::new(
        LedgerConfig::new(vec![ClassSpec::new("functions")], 3)
            .tenant_limits(Limits::UNLIMITED.concurrency(32)),
    )?;
    let scheduler = Scheduler::builder(ledger.clone()).class(4, 128).build()?;
    let started = Instant::now();

    let counts = rt.block_on(async {
        Ok::<_, fairway::Error>({
            let mut tasks = Vec::new();
            let mut tokens = Vec::new();
            let mut id = 0u64;
            for round in 0..20u64 {
                for tenant in 0..3u32 {
                    id += 1;
                    let token = CancellationToken::new(RequestId(id));
                    // Tenant 2's invocations are urgent (priority 1) and short.
                    let mut request = AdmissionRequest::new(RequestId(id), TenantId(tenant))
                        .priority(if tenant == 2 { 1 } else { 0 });
                    // Every 10th invocation of tenant 1 must start within 1 ms, or not at all.
                    if tenant == 1 && round % 10 == 9 {
                        request = request.deadline(Duration::from_millis(1));
                    }
                    let work = Duration::from_millis(if tenant == 2 { 1 } else { 3 });
                    tokens.push(token.clone());
                    tasks.push(tokio::spawn(invoke(
                        scheduler.clone(),
                        request,
                        token,
                        work,
                    )));
                }
            }
            // A client of tenant 0 disconnects: cancel its last invocation, which is still queued.
            let last_of_tenant_0 = &tokens[tokens.len() - 3];
            last_of_tenant_0.cancel("client disconnected");
            // Another task is aborted while it waits: its future is dropped, its request withdrawn.
            let aborted = tasks.remove(tasks.len() - 2);
            aborted.abort();
            let aborted = usize::from(aborted.await.is_err());

            let mut counts = [0usize; 5];
            for t in tasks {
                match t.await.expect("invocation task panicked") {
                    Outcome::Ran => counts[0] += 1,
                    Outcome::Cancelled => counts[1] += 1,
                    Outcome::Expired => counts[2] += 1,
                    Outcome::Refused => counts[3] += 1,
                }
            }
            counts[4] = aborted;
            // One invocation overruns its time limit: `timeout` drops the future while it holds a
            // cell, and the default drop policy quarantines that cell. The quota is refunded.
            let stuck = {
                let scheduler = scheduler.clone();
                async move {
                    let request = AdmissionRequest::new(RequestId(1_000), TenantId(0));
                    let permit = scheduler.ledger().admit(request)?;
                    let token = CancellationToken::new(RequestId(1_000));
                    let assignment = scheduler
                        .enqueue_owned(AdmittedRequest::new(permit, token))
                        .await?;
                    // The function hangs; the assignment is dropped with this future.
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    assignment.release();
                    Ok::<(), fairway::Error>(())
                }
            };
            let timed_out = tokio::time::timeout(Duration::from_millis(20), stuck)
                .await
                .is_err();
            assert!(timed_out, "the stuck invocation overran its limit");

            // The host cleans what the timeout left behind and gives the cells back.
            let class = fairway::ClassId(0);
            let mut restored = 0;
            let quarantined: Vec<fairway::CellId> = scheduler.quarantined_cells(class)?.collect();
            for cell in quarantined {
                // (Here a real host would reset the sandbox behind `cell`.)
                scheduler.restore_cell(class, cell)?;
                restored += 1;
            }
            assert_eq!(restored, 1, "the timed-out invocation's cell");
            assert_eq!(scheduler.available_cells(class)?, 4);
            // Nothing is left; a drain resolves at once and stops admission for good.
            scheduler.drain().await;
            counts
        })
    })?;

    assert!(ledger.usage().is_zero(), "every permit was refunded");
    if !quiet {
        let snap = scheduler.snapshot(fairway::ClassId(0))?;
        println!(
            "{} invocations in {:.1} ms: {} ran, {} cancelled, {} expired, {} refused, {} aborted",
            counts.iter().sum::<usize>(),
            started.elapsed().as_secs_f64() * 1e3,
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            counts[4],
        );
        println!(
            "grants {}, mean wait {:?}, longest wait {:?}",
            snap.grants,
            snap.wait_total / (snap.grants.max(1) as u32),
            snap.wait_max
        );
    }
    Ok(counts)
}

#[allow(dead_code)] // `tests/examples.rs` includes this file and calls `run` itself.
fn main() -> Result<(), fairway::Error> {
    run(false).map(drop)
}
