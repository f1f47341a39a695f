//! loom models of the ledger's reservation counters.

use super::*;
use crate::sync::model::{model, Outcomes};

fn ledger_with_class_concurrency(limit: u32) -> Ledger {
    Ledger::new(LedgerConfig::new(
        vec![ClassSpec::new("a").limits(Limits::UNLIMITED.concurrency(limit))],
        2,
    ))
    .unwrap()
}

/// Two threads admit against a class concurrency limit of 1 and drop what they get: exactly one
/// holds the unit at a time (never over-reserved), either one is refused or both succeed one
/// after the other, and every counter is back to zero at the end.
#[test]
fn two_admissions_against_limit_of_one() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let ledger = ledger_with_class_concurrency(1);
        let threads: Vec<_> = (0..2u32)
            .map(|t| {
                let ledger = ledger.clone();
                loom::thread::spawn(move || {
                    match ledger.admit(AdmissionRequest::new(RequestId(t.into()), TenantId(t))) {
                        Ok(permit) => {
                            let held = ledger.usage().classes[0].concurrency;
                            assert_eq!(held, 1, "over-reserved");
                            drop(permit);
                            true
                        }
                        Err(e) => {
                            assert_eq!(e.reason(), "class-concurrency");
                            false
                        }
                    }
                })
            })
            .collect();
        let admitted = threads
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&ok| ok)
            .count();
        assert!(ledger.usage().is_zero(), "{:?}", ledger.usage());
        outcomes.hit(match admitted {
            2 => "both-in-sequence",
            1 => "one-refused",
            _ => "none-admitted",
        });
    });
    outcomes.assert_exactly(&["both-in-sequence", "one-refused"]);
}

/// A grant (into_execution) returns the queue slot while another thread queues against a
/// queue-slot limit of 1: the second request is admitted only once the slot is back, and the
/// execution reservation is refunded exactly once.
#[test]
fn grant_returns_queue_slot_to_concurrent_admission() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let ledger = Ledger::new(
            LedgerConfig::new(vec![ClassSpec::new("a")], 1)
                .tenant_limits(Limits::UNLIMITED.queue_slots(1)),
        )
        .unwrap();
        let first = ledger
            .admit(AdmissionRequest::new(RequestId(1), TenantId(0)).cpu_units(2))
            .unwrap();
        let granter = loom::thread::spawn(move || drop(first.into_execution()));
        let other = ledger.clone();
        let queuer = loom::thread::spawn(move || {
            other
                .admit(AdmissionRequest::new(RequestId(2), TenantId(0)))
                .map(drop)
                .map_err(|e| e.reason())
        });
        granter.join().unwrap();
        let result = queuer.join().unwrap();
        assert!(ledger.usage().is_zero(), "{:?}", ledger.usage());
        outcomes.hit(match result {
            Ok(()) => "queued-after-grant",
            Err(crate::error::Reason::TenantQueueSlots) => "refused-before-grant",
            Err(_) => "unexpected-refusal",
        });
    });
    outcomes.assert_exactly(&["queued-after-grant", "refused-before-grant"]);
}

/// All four resources packed in one word per holder (small limits): one thread admits (CPU 2,
/// memory 1) while another holds a permit and ends it field by field (the queue slot at grant,
/// then the rest). The CPU limit of 3 admits the second request only after the first's refund;
/// the fields never carry into each other, and everything is back to zero at the end.
#[test]
fn f51_packed_word_reserves_and_refunds_fields_independently() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let limits = Limits {
            queue_slots: 3,
            concurrency: 3,
            cpu_units: 3,
            memory_units: 3,
        };
        let ledger = Ledger::new(
            LedgerConfig::new(vec![ClassSpec::new("a").limits(limits)], 1).tenant_limits(limits),
        )
        .unwrap();
        assert_eq!(ledger.0.tenant_layout.packed, KINDS);
        let request = |id| {
            AdmissionRequest::new(RequestId(id), TenantId(0))
                .cpu_units(2)
                .memory_units(1)
        };
        let first = ledger.admit(request(1)).unwrap();
        let ender = loom::thread::spawn(move || drop(first.into_execution()));
        let other = ledger.clone();
        let admitter = loom::thread::spawn(move || {
            let r = other.admit(request(2)).map_err(|e| e.reason());
            if let Ok(p) = &r {
                // Exactly this permit's units: the first has been refunded in full.
                let u = other.usage().tenants[0];
                assert_eq!(
                    (u.queue_slots, u.concurrency, u.cpu_units, u.memory_units),
                    (1, 1, 2, 1)
                );
                assert_eq!(p.cpu_units(), 2);
            }
            r.map(drop)
        });
        ender.join().unwrap();
        let result = admitter.join().unwrap();
        assert!(ledger.usage().is_zero(), "{:?}", ledger.usage());
        outcomes.hit(match result {
            Ok(()) => "admitted-after-refund",
            // By the tenant, or by the class when the tenant's word was already refunded.
            Err(crate::error::Reason::TenantCpuUnits | crate::error::Reason::ClassCpuUnits) => {
                "refused-cpu"
            }
            Err(_) => "unexpected-refusal",
        });
    });
    outcomes.assert_exactly(&["admitted-after-refund", "refused-cpu"]);
}
