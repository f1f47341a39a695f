//! Bounds on waiting: a test that would hang fails instead, with a message naming what it was
//! waiting for. Shared by `common` and `graph_common` (each includes this file).
#![allow(dead_code)]

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one rule test may run before it counts as stuck: far above any test's time on a
/// loaded two-core machine in a debug build.
pub const TEST_LIMIT: Duration = Duration::from_secs(120);

/// Runs `f` on a thread of its own (named `what`) and waits at most `limit` for it: a test that
/// would hang fails instead, naming `what` it was doing. A panic in `f` is passed on.
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(what.to_owned())
        .spawn(move || {
            let r = f();
            let _ = tx.send(());
            r
        })
        .expect("a thread for the bounded test");
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().expect("finished"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: not finished after {limit:?} (hung?)")
        }
    }
}

/// Joins `thread`, failing the test with `what` (the thread's job, and what it waits for) if it
/// has not finished within `limit`. A panic on the thread is passed on.
#[track_caller]
pub fn join_within<T>(thread: JoinHandle<T>, limit: Duration, what: &str) -> T {
    let deadline = Instant::now() + limit;
    while !thread.is_finished() {
        assert!(
            Instant::now() < deadline,
            "{what}: still running after {limit:?} (stuck?)"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    match thread.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
