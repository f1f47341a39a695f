//! The `metrics` feature: a scheduler that has granted, cancelled, expired, refused and
//! quarantined is published to a local debugging recorder, and every metric and label is checked.
#![cfg(feature = "metrics")]

mod common;

use common::*;
use fairway::metrics::{publish, Publisher};
use fairway::oracle::Ring;
use fairway::{ClassId, Code};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use std::collections::BTreeMap;
use std::task::Poll;
use std::time::Duration;

/// Name and labels (sorted) of one published metric.
type Key = (String, Vec<(String, String)>);

/// What a recorder holds, by name and labels, with the units of the described metrics.
struct Seen {
    values: BTreeMap<Key, DebugValue>,
    units: BTreeMap<String, metrics::Unit>,
}

fn seen(snapshotter: &Snapshotter) -> Seen {
    let mut values = BTreeMap::new();
    let mut units = BTreeMap::new();
    for (key, unit, _description, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        labels.sort();
        if let Some(u) = unit {
            units.insert(key.name().to_string(), u);
        }
        values.insert((key.name().to_string(), labels), value);
    }
    Seen { values, units }
}

impl Seen {
    fn get(&self, name: &str, class: u16, extra: Option<(&str, &str)>) -> &DebugValue {
        let class_name = ["c0", "c1"][usize::from(class)];
        let mut labels = vec![
            ("class".to_string(), class.to_string()),
            ("class_name".to_string(), class_name.to_string()),
        ];
        if let Some((k, v)) = extra {
            labels.push((k.to_string(), v.to_string()));
        }
        labels.sort();
        self.values
            .get(&(name.to_string(), labels.clone()))
            .unwrap_or_else(|| panic!("{name} {labels:?} not published"))
    }

    fn gauge(&self, name: &str, class: u16) -> f64 {
        self.gauge_with(name, class, None)
    }

    fn gauge_with(&self, name: &str, class: u16, extra: Option<(&str, &str)>) -> f64 {
        match self.get(name, class, extra) {
            DebugValue::Gauge(v) => v.into_inner(),
            other => panic!("{name}: not a gauge: {other:?}"),
        }
    }

    fn counter(&self, name: &str, class: u16, extra: Option<(&str, &str)>) -> u64 {
        match self.get(name, class, extra) {
            DebugValue::Counter(v) => *v,
            other => panic!("{name}: not a counter: {other:?}"),
        }
    }

    fn ended(&self, class: u16, reason: &str) -> u64 {
        self.counter(
            "fairway_requests_ended_total",
            class,
            Some(("reason", reason)),
        )
    }

    fn quantile(&self, class: u16, q: &str) -> f64 {
        self.gauge_with("fairway_wait_seconds", class, Some(("quantile", q)))
    }
}

/// The floor of the snapshot bucket that holds `v` nanoseconds (8 buckets per power of two).
fn bucket_floor(v: u64) -> u64 {
    if v < 8 {
        return v;
    }
    let shift = 63 - v.leading_zeros() - 3;
    (v >> shift) << shift
}

fn secs(ns: u64) -> f64 {
    Duration::from_nanos(ns).as_secs_f64()
}

const MS: u64 = 1_000_000;

/// Drives class 0 (2 cells) through two fast grants, a cancellation, an expiry in the queue, a
/// grant after 20 ms, one after 5 ms, a fast grant refused at acceptance, and a quarantine; and
/// class 1
/// (1 cell, queue of 1) through a fast grant, a queued request and a refusal for a full queue.
/// Runs `check` with the harness at 45 ms, every request still in the state described.
fn scenario(check: impl FnOnce(&Harness<Ring>)) {
    let h = Harness::<Ring>::new(&[(2, 8), (1, 1)], 4);
    let c1 = |r: fairway::admission::AdmissionRequest| r.class(ClassId(1));
    // Class 1: a fast grant at 0 ms, one queued, one refused (queue full).
    let held_c1 = h.sched.try_enqueue(h.admit_with(0, c1)).unwrap();
    let (queued_c1, _) = queue(&h, h.admit_with(1, c1));
    let mut full = Box::pin(h.sched.enqueue(h.admit_with(2, c1)));
    match poll_once(&mut full) {
        Poll::Ready(Err(e)) => assert_eq!(e.code(), Code::ResourceExhausted, "{e}"),
        other => panic!("expected a refusal, got {other:?}"),
    }

    // Class 0.
    let mut held = h.occupy(2);
    let (mut a, _) = queue(&h, h.admit(1));
    let (b, _) = queue(&h, h.admit(2));
    let (mut c, _) = queue(
        &h,
        h.admit_with(3, |r| r.deadline(Duration::from_millis(10))),
    );
    h.sched.cancel(b.handle().unwrap()).unwrap();
    drop(b);
    h.advance(Duration::from_millis(20));
    assert!(matches!(poll_once(&mut c), Poll::Ready(Err(e)) if e.code() == Code::DeadlineExceeded));
    held.pop().unwrap().release();
    let got_a = granted(&mut a); // waited 20 ms
    let (mut e, _) = queue(&h, h.admit(2));
    h.advance(Duration::from_millis(5));
    got_a.release();
    granted(&mut e).release(); // waited 5 ms
                               // Granted at once (a cell is free), refused when its owner comes after the deadline.
    let mut d = Box::pin(
        h.sched
            .enqueue(h.admit_with(1, |r| r.deadline(Duration::from_millis(10)))),
    );
    h.advance(Duration::from_millis(20));
    assert!(matches!(poll_once(&mut d), Poll::Ready(Err(e)) if e.code() == Code::DeadlineExceeded));
    held.pop().unwrap().quarantine("test");

    check(&h);
    drop((queued_c1, full, a, c, d, e));
    held_c1.release();
}

/// Checks every metric of both classes as `scenario` leaves them.
fn check_all(s: &Seen, h: &Harness<Ring>) {
    // Class 0: gauges.
    assert_eq!(s.gauge("fairway_cells_total", 0), 2.0);
    assert_eq!(s.gauge("fairway_cells_available", 0), 1.0);
    assert_eq!(s.gauge("fairway_cells_leased", 0), 0.0);
    assert_eq!(s.gauge("fairway_cells_quarantined", 0), 1.0);
    assert_eq!(s.gauge("fairway_queue_depth", 0), 0.0);
    let snap0 = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(
        s.gauge("fairway_queued_tenants", 0),
        f64::from(snap0.queued_tenants)
    );
    assert_eq!(s.gauge("fairway_oldest_lease_age_seconds", 0), 0.0);
    // Class 0: counters. Grants: two fast, `a`, `e`, and `d` (refused at acceptance, still a
    // grant).
    assert_eq!(s.counter("fairway_grants_total", 0, None), 5);
    assert_eq!(s.ended(0, "rejected"), 0);
    assert_eq!(s.ended(0, "cancelled"), 1);
    assert_eq!(s.ended(0, "expired"), 1);
    assert_eq!(s.ended(0, "refused_at_acceptance"), 1);
    assert_eq!(
        s.counter("fairway_wait_nanoseconds_total", 0, None),
        25 * MS
    );
    // Class 0: waits 0, 0, 20 ms, 5 ms, 0.
    assert_eq!(s.quantile(0, "0.5"), 0.0);
    assert_eq!(s.quantile(0, "0.9"), secs(bucket_floor(20 * MS)));
    assert_eq!(s.quantile(0, "0.99"), secs(bucket_floor(20 * MS)));
    assert_eq!(s.quantile(0, "0.999"), secs(bucket_floor(20 * MS)));
    assert_eq!(s.gauge("fairway_wait_seconds_max", 0), 0.020);
    assert_eq!(
        snap0.wait_histogram.count_at(bucket_floor(5 * MS)),
        1,
        "5 ms recorded at its bucket floor"
    );

    // Class 1.
    assert_eq!(s.gauge("fairway_cells_total", 1), 1.0);
    assert_eq!(s.gauge("fairway_cells_available", 1), 0.0);
    assert_eq!(s.gauge("fairway_cells_leased", 1), 1.0);
    assert_eq!(s.gauge("fairway_cells_quarantined", 1), 0.0);
    assert_eq!(s.gauge("fairway_queue_depth", 1), 1.0);
    let snap1 = h.sched.snapshot(ClassId(1)).unwrap();
    assert_eq!(
        s.gauge("fairway_queued_tenants", 1),
        f64::from(snap1.queued_tenants)
    );
    assert_eq!(s.gauge("fairway_oldest_lease_age_seconds", 1), 0.045);
    assert_eq!(s.counter("fairway_grants_total", 1, None), 1);
    assert_eq!(s.ended(1, "rejected"), 1);
    assert_eq!(s.ended(1, "cancelled"), 0);
    assert_eq!(s.ended(1, "expired"), 0);
    assert_eq!(s.ended(1, "refused_at_acceptance"), 0);
    assert_eq!(s.counter("fairway_wait_nanoseconds_total", 1, None), 0);
    for q in ["0.5", "0.9", "0.99", "0.999"] {
        assert_eq!(s.quantile(1, q), 0.0, "{q}");
    }
    assert_eq!(s.gauge("fairway_wait_seconds_max", 1), 0.0);

    // Per class: 7 gauges, 6 counters (4 of them by reason), 5 wait gauges; nothing else.
    assert_eq!(s.values.len(), 2 * 18, "{:?}", s.values.keys());
}

#[test]
fn x05_metrics_publish_sets_every_metric_and_label() {
    scenario(|h| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let mut scratch = h.sched.snapshot(ClassId(0)).unwrap();
        metrics::with_local_recorder(&recorder, || publish(&h.sched, &mut scratch));
        let s = seen(&snapshotter);
        check_all(&s, h);
        // `publish` describes nothing.
        assert!(s.units.is_empty(), "{:?}", s.units);
    });
}

#[test]
fn x05_metrics_publisher_registers_once_and_follows_the_scheduler() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let h = Harness::<Ring>::new(&[(2, 8), (1, 1)], 4);
    let mut publisher = metrics::with_local_recorder(&recorder, || Publisher::new(&h.sched));
    // Registered (at zero) at construction, not yet published.
    assert_eq!(seen(&snapshotter).gauge("fairway_cells_total", 0), 0.0);
    // Published outside the closure: the handles are the recorder's.
    publisher.publish();
    let s = seen(&snapshotter);
    assert_eq!(s.gauge("fairway_cells_total", 0), 2.0);
    assert_eq!(s.gauge("fairway_cells_available", 1), 1.0);
    assert_eq!(s.counter("fairway_grants_total", 0, None), 0);
    assert_eq!(s.values.len(), 2 * 18);
    // Described, with units.
    assert_eq!(s.units["fairway_wait_seconds"], metrics::Unit::Seconds);
    assert_eq!(
        s.units["fairway_wait_nanoseconds_total"],
        metrics::Unit::Nanoseconds
    );
    assert_eq!(s.units["fairway_grants_total"], metrics::Unit::Count);
    assert_eq!(s.units.len(), 12);

    // The counters follow the scheduler (absolute values, published again).
    let a = h.sched.try_enqueue(h.admit(1)).unwrap();
    let b = h.sched.try_enqueue(h.admit(2)).unwrap();
    publisher.publish();
    let s = seen(&snapshotter);
    assert_eq!(s.counter("fairway_grants_total", 0, None), 2);
    assert_eq!(s.gauge("fairway_cells_leased", 0), 2.0);
    assert_eq!(publisher.snapshot(ClassId(0)).unwrap().grants, 2);
    assert!(publisher.snapshot(ClassId(2)).is_none());
    drop((a, b));
    publisher.publish();
    let s = seen(&snapshotter);
    assert_eq!(s.counter("fairway_grants_total", 0, None), 2);
    // Dropped assignments quarantine their cells by default.
    assert_eq!(s.gauge("fairway_cells_quarantined", 0), 2.0);
    assert_eq!(s.gauge("fairway_cells_leased", 0), 0.0);
}

#[test]
fn x05_metrics_publisher_matches_publish() {
    scenario(|h| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let mut publisher = metrics::with_local_recorder(&recorder, || Publisher::new(&h.sched));
        publisher.publish();
        check_all(&seen(&snapshotter), h);
    });
}

#[test]
fn x05_metrics_without_a_recorder_publishing_is_a_no_op() {
    let h = Harness::<Ring>::new(&[(1, 8)], 2);
    let mut scratch = h.sched.snapshot(ClassId(0)).unwrap();
    publish(&h.sched, &mut scratch);
    let mut publisher = Publisher::new(&h.sched);
    publisher.publish();
    assert_eq!(scratch.cells_total, 1);
    assert_eq!(publisher.snapshot(ClassId(0)).unwrap().cells_available, 1);
}
