//! The test suite's bounds on waiting (SPEC Q08): a test that would hang fails instead, with a
//! message naming what is stuck, and a bound never hides a failure of the body or its result.

mod common;

use common::{join_within, within};
use std::time::Duration;

const SHORT: Duration = Duration::from_millis(200);
/// How long a "stuck" body blocks: past `SHORT`, yet finite, so that a bound which failed to
/// fire makes the test fail ("returned") instead of hanging it.
const STUCK: Duration = Duration::from_secs(5);

/// The message of a caught panic.
fn message(panic: Box<dyn std::any::Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p
            .downcast::<&str>()
            .map_or_else(|_| "a panic without a message".into(), |s| (*s).to_owned()),
    }
}

#[test]
fn q08_a_stuck_body_fails_naming_what_is_stuck() {
    let r = std::panic::catch_unwind(|| {
        within(SHORT, "the executor waiting for a grant", || {
            let (_tx, rx) = std::sync::mpsc::channel::<()>();
            let _ = rx.recv_timeout(STUCK);
        })
    });
    let msg = message(r.expect_err("a body stuck past its bound returned"));
    assert!(
        msg.contains("the executor waiting for a grant") && msg.contains("not finished"),
        "the failure does not say what is stuck: {msg:?}"
    );
}

#[test]
fn q08_a_stuck_thread_fails_its_join_naming_what_it_waits_for() {
    let thread = std::thread::spawn(move || {
        let (_keep, rx) = std::sync::mpsc::channel::<()>();
        let _ = rx.recv_timeout(STUCK);
    });
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        join_within(thread, SHORT, "producer 3 waiting for room")
    }));
    let msg = message(r.expect_err("a join past its bound returned"));
    assert!(
        msg.contains("producer 3 waiting for room") && msg.contains("still running"),
        "the failure does not say what is stuck: {msg:?}"
    );
}

#[test]
fn q08_a_bound_passes_a_failing_body_on_and_returns_a_finished_one() {
    let r = std::panic::catch_unwind(|| {
        within(Duration::from_secs(60), "a failing body", || {
            panic!("the body's own assertion")
        })
    });
    let msg = message(r.expect_err("a failing body passed"));
    assert!(
        msg.contains("the body's own assertion"),
        "the body's failure was replaced: {msg:?}"
    );
    assert_eq!(within(Duration::from_secs(60), "a quick body", || 42), 42);
    let t = std::thread::spawn(|| 7);
    assert_eq!(join_within(t, Duration::from_secs(60), "a quick thread"), 7);
}
