//! Host integration (SPEC X01, X02) and the soundness bar on unsafe code (SPEC Q05).

use fairway::oracle::{Baseline, DrainOn, EnqueueOn, NextOn, SchedulerOn};
use fairway::{Drain, Enqueue, Job, Next, Scheduler};

fn assert_send<T: Send>() {}
fn assert_sync<T: Sync>() {}

#[test]
fn x01_futures_and_handles_are_send_and_runtime_free() {
    // The futures are `Send` when their payload is, so any multi-threaded executor can run them.
    // What users name: the engine's scheduler and futures.
    assert_send::<Enqueue<'static, u64>>();
    assert_send::<Next<'static, u64>>();
    assert_send::<Drain<'static, u64>>();
    assert_send::<Job<u64>>();
    assert_send::<fairway::Assignment>();
    assert_send::<Scheduler<u64>>();
    assert_sync::<Scheduler<u64>>();
    // The oracle's twin as well (the differential tests move it across threads).
    assert_send::<EnqueueOn<'static, u64, Baseline>>();
    assert_send::<NextOn<'static, u64, Baseline>>();
    assert_send::<DrainOn<'static, u64, Baseline>>();
    assert_sync::<SchedulerOn<u64, Baseline>>();
    // No async runtime among the library's dependencies, except optional ones that no default
    // feature turns on (the `tokio` feature only detects misuse of the blocking adapter).
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let section = |name: &str| {
        manifest
            .split(name)
            .nth(1)
            .map(|s| s.split("\n[").next().unwrap().to_owned())
            .unwrap_or_default()
    };
    let deps = section("\n[dependencies]");
    let default_features = section("\n[features]")
        .lines()
        .find(|l| l.trim_start().starts_with("default"))
        .unwrap_or("")
        .to_owned();
    for runtime in ["tokio", "async-std", "smol"] {
        let entries = deps.lines().filter(|l| !l.trim_start().starts_with('#'));
        for line in entries.filter(|l| l.contains(runtime)) {
            assert!(
                line.contains("optional = true"),
                "{runtime} is a non-optional dependency of the library: {line}"
            );
        }
        assert!(
            !default_features.contains(runtime),
            "a default feature turns on {runtime}"
        );
    }
    // The runtime-free build is what this test binary links unless `--features tokio` is given.
    assert!(!deps.is_empty() && manifest.contains("\n[features]\ndefault = []"));
}

#[test]
fn x02_blocking_adapter_needs_no_runtime() {
    use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
    use fairway::{AdmittedRequest, CancellationToken, ClassId, RequestId, TenantId};
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    let sched = Scheduler::builder(ledger.clone())
        .payload::<u32>()
        .class(1, 64)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        // A worker pool of plain threads pulling jobs, and producers submitting them.
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut done = 0;
                    while let Some(job) = sched.next_blocking(ClassId(0)).expect("class 0 exists") {
                        done += job.payload;
                        job.assignment.release();
                    }
                    done
                })
            })
            .collect();
        for i in 0..100u32 {
            let id = RequestId(u64::from(i));
            let p = ledger
                .admit(AdmissionRequest::new(id, TenantId(i % 4)).class(ClassId(0)))
                .unwrap();
            if i % 2 == 0 {
                sched
                    .submit(AdmittedRequest::new(p, CancellationToken::new(id)), 1)
                    .unwrap();
            } else {
                sched
                    .enqueue_blocking(AdmittedRequest::new(p, CancellationToken::new(id)))
                    .unwrap()
                    .release();
            }
        }
        // Bounded waits: a stuck executor fails the test naming what it waits for.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let depth = sched.snapshot(ClassId(0)).unwrap().queue_depth;
            if depth == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the two executors left {depth} jobs queued for 60 s"
            );
            std::thread::yield_now();
        }
        sched.shutdown();
        while !workers.iter().all(|w| w.is_finished()) {
            assert!(
                std::time::Instant::now() < deadline,
                "an executor still blocked in next_blocking 60 s after shutdown"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let done: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        // Jobs still in flight at shutdown are refused at acceptance and refunded.
        assert!(done <= 50);
    });
    assert!(ledger.usage().is_zero());
}

#[test]
fn q05_every_unsafe_block_is_justified() {
    // clippy's `undocumented_unsafe_blocks` is denied in CI; this test also holds when clippy is
    // not run, and covers `unsafe impl` and `unsafe fn` (which need `# Safety`).
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut files = vec![std::path::PathBuf::from(root)];
    let mut checked = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap();
            if !code.contains("unsafe ") && !code.contains("unsafe{") {
                continue;
            }
            if code.contains("unsafe_op_in_unsafe_fn") || code.contains("\"") {
                continue;
            }
            checked += 1;
            let context = &lines[i.saturating_sub(12)..=i];
            let justified = context
                .iter()
                .any(|l| l.contains("SAFETY:") || l.contains("# Safety"));
            assert!(
                justified,
                "{}:{}: `unsafe` without a SAFETY comment: {line}",
                path.display(),
                i + 1
            );
        }
    }
    assert!(
        checked > 10,
        "the scan found the crate's unsafe code ({checked} sites)"
    );
}
