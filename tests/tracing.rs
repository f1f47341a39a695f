//! The `tracing` events (SPEC X05): one at each grant, refusal, expiry, cancellation, quarantine
//! and restore, with the tenant, the class and the reason as fields.
#![cfg(feature = "tracing")]

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use fairway::{
    AdmittedRequest, CancellationToken, CellId, ClassId, ManualClock, Reason, RequestId, Scheduler,
    TenantId,
};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One event: its level, its message and its fields, as text.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
    level: tracing::Level,
    fields: BTreeMap<String, String>,
}

/// A subscriber that keeps every event of target `fairway`.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<Seen>>>);

impl Collect {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl Subscriber for Collect {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if event.metadata().target() != "fairway" {
            return;
        }
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Seen {
            level: *event.metadata().level(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn seen(level: tracing::Level, fields: &[(&str, &str)]) -> Seen {
    Seen {
        level,
        fields: fields
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    }
}

struct Rig {
    ledger: Ledger,
    sched: Scheduler,
    clock: Arc<ManualClock>,
}

impl Rig {
    fn new(cells: u32, queue: u32) -> Self {
        let clock = Arc::new(ManualClock::new());
        let config = LedgerConfig::new(vec![ClassSpec::new("cpu")], 64);
        let ledger = Ledger::with_clock(config, clock.clone()).unwrap();
        let sched = Scheduler::builder(ledger.clone())
            .class(cells, queue)
            .build()
            .unwrap();
        Self {
            ledger,
            sched,
            clock,
        }
    }

    fn request(&self, id: u64, tenant: u32, deadline: Option<Duration>) -> AdmittedRequest {
        let mut admission = AdmissionRequest::new(RequestId(id), TenantId(tenant));
        if let Some(d) = deadline {
            admission = admission.deadline(d);
        }
        let permit = self.ledger.admit(admission).unwrap();
        AdmittedRequest::new(permit, CancellationToken::new(RequestId(id)))
    }
}

fn poll<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn x05_tracing_events_name_tenant_class_and_reason() {
    use tracing::Level;
    let events = Collect::default();
    let _guard = tracing::subscriber::set_default(events.clone());
    let rig = Rig::new(1, 1);

    // A grant on the fast path.
    let first = rig.sched.enqueue_blocking(rig.request(1, 3, None)).unwrap();
    assert_eq!(
        events.take(),
        [seen(
            Level::TRACE,
            &[
                ("message", "granted"),
                ("class", "0"),
                ("tenant", "3"),
                ("cell", "0"),
                ("waited_ns", "0")
            ]
        )]
    );

    // A grant after a wait of 7 ms.
    let mut queued = pin!(rig.sched.enqueue(rig.request(2, 4, None)));
    assert!(poll(queued.as_mut()).is_pending());
    // The queue of 1 is full: a refusal.
    let Poll::Ready(Err(full)) = poll(pin!(rig.sched.enqueue(rig.request(3, 5, None)))) else {
        panic!("a request past the queue's capacity was not refused at once")
    };
    assert_eq!(full.reason(), Reason::QueueFull);
    assert_eq!(
        events.take(),
        [seen(
            Level::DEBUG,
            &[
                ("message", "refused"),
                ("class", "0"),
                ("tenant", "5"),
                ("code", "resource-exhausted"),
                ("reason", "queue-full")
            ]
        )]
    );
    rig.clock.advance(Duration::from_millis(7));
    first.release();
    let Poll::Ready(Ok(second)) = poll(queued.as_mut()) else {
        panic!("the queued request was not granted when the cell came back")
    };
    assert_eq!(
        events.take(),
        [seen(
            Level::TRACE,
            &[
                ("message", "granted"),
                ("class", "0"),
                ("tenant", "4"),
                ("cell", "0"),
                ("waited_ns", "7000000")
            ]
        )]
    );

    // A cancellation and an expiry while queued.
    let token_request = rig.request(4, 6, None);
    let token = token_request.token().unwrap().clone();
    let mut cancelled = pin!(rig.sched.enqueue(token_request));
    assert!(poll(cancelled.as_mut()).is_pending());
    token.cancel("host-abort");
    assert!(matches!(poll(cancelled.as_mut()), Poll::Ready(Err(_))));
    let mut expiring = pin!(rig
        .sched
        .enqueue(rig.request(5, 7, Some(Duration::from_millis(5)))));
    assert!(poll(expiring.as_mut()).is_pending());
    rig.clock.advance(Duration::from_millis(6));
    let Poll::Ready(Err(expired)) = poll(expiring.as_mut()) else {
        panic!("the request past its deadline was not refused")
    };
    assert_eq!(expired.reason(), Reason::DeadlineExceeded);
    let ended = |tenant, reason| {
        seen(
            Level::DEBUG,
            &[
                ("message", "ended while queued"),
                ("class", "0"),
                ("tenant", tenant),
                ("reason", reason),
            ],
        )
    };
    assert_eq!(
        events.take(),
        [ended("6", "cancelled"), ended("7", "expired")]
    );

    // An expiry before the request is queued is a refusal with the deadline's code.
    let late = rig.request(6, 8, Some(Duration::from_millis(1)));
    rig.clock.advance(Duration::from_millis(2));
    assert!(rig.sched.enqueue_blocking(late).is_err());
    assert_eq!(
        events.take(),
        [seen(
            Level::DEBUG,
            &[
                ("message", "refused"),
                ("class", "0"),
                ("tenant", "8"),
                ("code", "deadline-exceeded"),
                ("reason", "deadline-exceeded")
            ]
        )]
    );

    // A quarantine and a restore.
    second.quarantine("dirty");
    rig.sched.restore_cell(ClassId(0), CellId(0)).unwrap();
    assert_eq!(
        events.take(),
        [
            seen(
                Level::WARN,
                &[
                    ("message", "cell quarantined"),
                    ("class", "0"),
                    ("tenant", "4"),
                    ("cell", "0"),
                    ("reason", "dirty")
                ]
            ),
            seen(
                Level::INFO,
                &[("message", "cell restored"), ("class", "0"), ("cell", "0")]
            ),
        ]
    );
    // A refused restore is no event.
    assert!(rig.sched.restore_cell(ClassId(0), CellId(0)).is_err());
    assert_eq!(events.take(), []);
    assert!(rig.ledger.usage().is_zero());
}
