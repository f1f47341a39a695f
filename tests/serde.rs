//! The `serde` feature: the configuration and snapshot types round-trip through JSON, invalid
//! configurations are refused by the constructors that validate them, and a snapshot of a
//! scheduler that has granted and cancelled requests serializes its counters and waits.
#![cfg(feature = "serde")]

mod common;

use common::*;
use fairway::admission::{ClassSpec, Ledger, LedgerConfig, LedgerUsage, Limits, Usage};
use fairway::graph::Occupancy;
use fairway::oracle::Ring;
use fairway::versions::VersionOccupancy;
use fairway::{
    CellId, ClassConfig, ClassId, ClassSnapshot, Code, DropPolicy, RequestId, Scheduler, TenantId,
};
use serde_json::json;
use std::time::Duration;

fn round_trip<T>(v: &T) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    serde_json::from_str(&serde_json::to_string(v).unwrap()).unwrap()
}

#[test]
fn x05_serde_ids_are_transparent_numbers() {
    assert_eq!(serde_json::to_value(RequestId(7)).unwrap(), json!(7));
    assert_eq!(serde_json::to_value(TenantId(3)).unwrap(), json!(3));
    assert_eq!(serde_json::to_value(ClassId(2)).unwrap(), json!(2));
    assert_eq!(serde_json::to_value(CellId(9)).unwrap(), json!(9));
    let p: fairway::Priority = 5;
    assert_eq!(serde_json::to_value(p).unwrap(), json!(5));
    assert_eq!(round_trip(&RequestId(u64::MAX)), RequestId(u64::MAX));
    assert_eq!(round_trip(&TenantId(u32::MAX)), TenantId(u32::MAX));
    assert_eq!(round_trip(&ClassId(u16::MAX)), ClassId(u16::MAX));
    assert_eq!(round_trip(&CellId(0)), CellId(0));
    // Out of range for the newtype's number.
    assert!(serde_json::from_value::<ClassId>(json!(65_536)).is_err());
    assert!(serde_json::from_value::<TenantId>(json!(-1)).is_err());
}

#[test]
fn x05_serde_limits_round_trip_and_missing_fields_are_unlimited() {
    let l = Limits::UNLIMITED
        .queue_slots(8)
        .concurrency(4)
        .cpu_units(16)
        .memory_units(1 << 40);
    assert_eq!(
        serde_json::to_value(l).unwrap(),
        json!({"queue_slots": 8, "concurrency": 4, "cpu_units": 16, "memory_units": 1u64 << 40})
    );
    assert_eq!(round_trip(&l), l);
    assert_eq!(round_trip(&Limits::UNLIMITED), Limits::UNLIMITED);
    let partial: Limits = serde_json::from_value(json!({"concurrency": 4})).unwrap();
    assert_eq!(partial, Limits::UNLIMITED.concurrency(4));
    let none: Limits = serde_json::from_value(json!({})).unwrap();
    assert_eq!(none, Limits::UNLIMITED);
}

#[test]
fn x05_serde_ledger_config_round_trips_and_builds() {
    let cfg = LedgerConfig::new(
        vec![
            ClassSpec::new("sandbox").limits(Limits::UNLIMITED.concurrency(2)),
            ClassSpec::new("gpu").explicit_only(true),
        ],
        64,
    )
    .tenant_limits(Limits::UNLIMITED.queue_slots(10));
    let text = serde_json::to_string(&cfg).unwrap();
    let back: LedgerConfig = serde_json::from_str(&text).unwrap();
    assert_eq!(back, cfg);
    // The short form: left-out fields take their defaults.
    let short: LedgerConfig = serde_json::from_value(json!({
        "classes": [{"name": "sandbox", "limits": {"concurrency": 2}},
                    {"name": "gpu", "explicit_only": true}],
        "max_tenants": 64,
        "tenant_limits": {"queue_slots": 10},
    }))
    .unwrap();
    assert_eq!(short, cfg);
    let ledger = Ledger::new(back).unwrap();
    assert_eq!(ledger.class_by_name("gpu"), Some(ClassId(1)));
    assert_eq!(ledger.class_name(ClassId(0)), Some("sandbox"));
    assert_eq!(ledger.max_tenants(), 64);
}

#[test]
fn x05_serde_invalid_ledger_config_is_refused_by_ledger_new() {
    // Deserialization checks shapes and ranges only; `Ledger::new` checks the rest and names
    // the field, as for a configuration built by hand.
    let refused = |v: serde_json::Value| {
        let cfg: LedgerConfig = serde_json::from_value(v).expect("well-formed");
        let e = Ledger::new(cfg).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.reason(), "configuration");
        e.field().unwrap()
    };
    assert_eq!(
        refused(json!({"classes": [{"name": "a"}], "max_tenants": 0})),
        "max_tenants"
    );
    assert_eq!(
        refused(json!({"classes": [{"name": "a"}], "max_tenants": (1u32 << 24) + 1})),
        "max_tenants"
    );
    assert_eq!(refused(json!({"classes": [], "max_tenants": 4})), "classes");
    assert_eq!(
        refused(json!({"classes": [{"name": "a"}, {"name": "a"}], "max_tenants": 4})),
        "classes.name"
    );
    // Malformed input never gets as far.
    for bad in [
        json!({"classes": [{"name": "a"}]}),
        json!({"classes": [{"limits": {}}], "max_tenants": 4}),
        json!({"classes": [{"name": "a"}], "max_tenants": -1}),
        json!({"classes": [{"name": 5}], "max_tenants": 4}),
        json!({"classes": [{"name": "a", "limits": {"concurrency": "many"}}], "max_tenants": 4}),
    ] {
        assert!(
            serde_json::from_value::<LedgerConfig>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn x05_serde_class_config_round_trips_and_build_validates() {
    let c = ClassConfig::new(4, 1024).on_drop(DropPolicy::Release);
    assert_eq!(
        serde_json::to_value(c).unwrap(),
        json!({"cells": 4, "queue_capacity": 1024, "on_drop": "Release"})
    );
    assert_eq!(round_trip(&c), c);
    let short: ClassConfig =
        serde_json::from_value(json!({"cells": 2, "queue_capacity": 8})).unwrap();
    assert_eq!(short, ClassConfig::new(2, 8));
    assert_eq!(short.on_drop, DropPolicy::Quarantine);
    assert!(serde_json::from_value::<DropPolicy>(json!("Recycle")).is_err());

    let ledger = Ledger::new(ledger_config(1, 4)).unwrap();
    assert!(Scheduler::builder(ledger.clone())
        .class_config(short)
        .build()
        .is_ok());
    // `cells: 0` deserializes (plain data) and is refused by `build`, naming the field.
    let zero: ClassConfig =
        serde_json::from_value(json!({"cells": 0, "queue_capacity": 8})).unwrap();
    let e = Scheduler::builder(ledger.clone())
        .class_config(zero)
        .build()
        .unwrap_err();
    assert_eq!(
        (e.code(), e.reason().as_str(), e.field()),
        (Code::InvalidArgument, "configuration", Some("cells"))
    );
    let huge: ClassConfig = serde_json::from_value(json!({
        "cells": 1, "queue_capacity": ClassConfig::MAX_QUEUE_CAPACITY as u64 + 1
    }))
    .unwrap();
    let e = Scheduler::builder(ledger)
        .class_config(huge)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), Some("queue_capacity"));
}

#[test]
fn x05_serde_snapshot_of_a_working_scheduler() {
    let h = Harness::<Ring>::new(&[(1, 8)], 4);
    // A grant on the fast path (no wait), one after 3 ms in the queue, one cancelled.
    let held = h.occupy(1).pop().unwrap();
    let (mut a, _) = queue(&h, h.admit(1));
    let (b, _) = queue(&h, h.admit(2));
    h.sched.cancel(b.handle().unwrap()).unwrap();
    drop(b);
    h.advance(Duration::from_millis(3));
    held.release();
    let got = granted(&mut a);
    h.advance(Duration::from_millis(2));
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((s.grants, s.cancellations), (2, 1));

    let v = serde_json::to_value(&s).unwrap();
    let age = s.oldest_lease_age.expect("a lease is out");
    // 3 ms falls in the bucket whose floor is 11 << 18 ns (within 12.5 %).
    let floor_3ms = 11u64 << 18;
    assert_eq!(
        v,
        json!({
            "cells_total": 1,
            "cells_available": 0,
            "cells_leased": 1,
            "cells_quarantined": 0,
            "queue_depth": 0,
            // As of the last dispatch pass (the one that granted `a`).
            "queued_tenants": s.queued_tenants,
            "grants": 2,
            "rejections": 0,
            "cancellations": 1,
            "expirations": 0,
            "refused_at_acceptance": 0,
            "wait_total": {"secs": 0, "nanos": 3_000_000},
            "wait_max": {"secs": 0, "nanos": 3_000_000},
            "oldest_lease_age": {"secs": age.as_secs(), "nanos": age.subsec_nanos()},
            "wait_histogram": [[0, 1], [floor_3ms, 1]],
        })
    );
    assert_eq!(age, Duration::from_millis(2));

    let back: ClassSnapshot = serde_json::from_value(v).unwrap();
    assert_eq!(back.wait_histogram, s.wait_histogram);
    assert_eq!(back.wait_histogram.len(), 2);
    assert_eq!(back.wait_histogram.count_at(0), 1);
    assert_eq!(back.wait_histogram.count_at(floor_3ms), 1);
    assert_eq!(
        back.wait_histogram.value_at_quantile(1.0),
        s.wait_histogram.value_at_quantile(1.0)
    );
    assert_eq!(
        (
            back.grants,
            back.cancellations,
            back.cells_leased,
            back.wait_max
        ),
        (2, 1, 1, Duration::from_millis(3))
    );
    assert_eq!(back.oldest_lease_age, s.oldest_lease_age);
    // A snapshot round-trips as a whole (its JSON is the same).
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&s).unwrap()
    );
    got.release();
}

#[test]
fn x05_serde_snapshot_refuses_a_malformed_histogram() {
    let s = Harness::<Ring>::new(&[(1, 8)], 2)
        .sched
        .snapshot(ClassId(0))
        .unwrap();
    let mut v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["wait_histogram"], json!([]));
    for bad in [
        json!([[5]]),
        json!([[1, 2, 3]]),
        json!({"0": 1}),
        json!([[-1, 1]]),
    ] {
        v["wait_histogram"] = bad.clone();
        assert!(
            serde_json::from_value::<ClassSnapshot>(v.clone()).is_err(),
            "{bad}"
        );
    }
    v["wait_histogram"] = json!([[1000, 3], [0, 2]]);
    let back: ClassSnapshot = serde_json::from_value(v).unwrap();
    assert_eq!(
        (
            back.wait_histogram.len(),
            back.wait_histogram.count_at(1000)
        ),
        (5, 3)
    );
}

#[test]
fn x05_serde_usage_and_occupancy_round_trip() {
    let h = Harness::<Ring>::new(&[(2, 8)], 2);
    let held = h
        .sched
        .try_enqueue(h.admit_with(1, |r| r.cpu_units(3).memory_units(4)))
        .unwrap();
    let usage: LedgerUsage = h.ledger.usage();
    let v = serde_json::to_value(&usage).unwrap();
    assert_eq!(
        v["tenants"][1],
        json!({"queue_slots": 0, "concurrency": 1, "cpu_units": 3, "memory_units": 4})
    );
    assert_eq!(round_trip(&usage), usage);
    let u = Usage {
        queue_slots: 1,
        concurrency: 2,
        cpu_units: 3,
        memory_units: 4,
    };
    assert_eq!(round_trip(&u), u);
    held.release();

    let o = Occupancy {
        nodes_used: 1,
        nodes_total: 2,
        edges_used: 3,
        edges_total: 4,
        keys_used: 5,
        keys_total: 6,
        waiting: 7,
        ready: 8,
        running: 9,
        nodes_backing: 10,
        edges_backing: 11,
        keys_backing: 12,
        index_cells: 13,
        index_cells_max: 14,
    };
    assert_eq!(serde_json::to_value(o).unwrap()["keys_total"], json!(6));
    assert_eq!(
        serde_json::to_value(o).unwrap()["index_cells_max"],
        json!(14)
    );
    assert_eq!(round_trip(&o), o);
    let vo = VersionOccupancy {
        keys: 1,
        named_keys: 2,
        versions_used: 3,
        versions_total: 4,
        retained: 5,
        root_epochs_used: 6,
        root_epochs_total: 7,
        created: 8,
        reclaimed: 9,
    };
    assert_eq!(round_trip(&vo), vo);
}
