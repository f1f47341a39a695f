//! Publishes a scheduler's per-class snapshots ([`ClassSnapshot`]) to the [`metrics`] facade
//! (feature `metrics`, off by default), so whatever recorder the host installed — a Prometheus
//! exporter, a statsd bridge — sees them without glue code.
//!
//! A [`Publisher`] registers every class's metrics once, with the recorder installed when it is
//! built, and keeps one reusable snapshot per class: after [`Publisher::new`],
//! [`Publisher::publish`] allocates nothing (unless the waits outgrow a snapshot histogram's
//! range, see [`Scheduler::snapshot_into`]). [`publish`] does the same in one call, registering
//! the metrics with the recorder current at that call (which allocates the label values each
//! time). Neither starts a thread: call one from the host's own timer or scrape hook.
//!
//! # Metrics
//!
//! Every metric carries the labels `class` (the [`ClassId`] index, `"0"`, `"1"`, ...) and
//! `class_name` (the ledger's name for the class, [`ClassSpec::name`](crate::admission::ClassSpec::name)).
//!
//! | name | kind | value |
//! | --- | --- | --- |
//! | `fairway_cells_total` | gauge | [`cells_total`](ClassSnapshot::cells_total) |
//! | `fairway_cells_available` | gauge | [`cells_available`](ClassSnapshot::cells_available) |
//! | `fairway_cells_leased` | gauge | [`cells_leased`](ClassSnapshot::cells_leased) |
//! | `fairway_cells_quarantined` | gauge | [`cells_quarantined`](ClassSnapshot::cells_quarantined) |
//! | `fairway_queue_depth` | gauge | [`queue_depth`](ClassSnapshot::queue_depth) |
//! | `fairway_queued_tenants` | gauge | [`queued_tenants`](ClassSnapshot::queued_tenants) |
//! | `fairway_oldest_lease_age_seconds` | gauge | [`oldest_lease_age`](ClassSnapshot::oldest_lease_age), 0 when no lease is out |
//! | `fairway_grants_total` | counter | [`grants`](ClassSnapshot::grants) |
//! | `fairway_requests_ended_total{reason="rejected"}` | counter | [`rejections`](ClassSnapshot::rejections) |
//! | `fairway_requests_ended_total{reason="cancelled"}` | counter | [`cancellations`](ClassSnapshot::cancellations) |
//! | `fairway_requests_ended_total{reason="expired"}` | counter | [`expirations`](ClassSnapshot::expirations) |
//! | `fairway_requests_ended_total{reason="refused_at_acceptance"}` | counter | [`refused_at_acceptance`](ClassSnapshot::refused_at_acceptance) (already in `fairway_grants_total`) |
//! | `fairway_wait_nanoseconds_total` | counter | [`wait_total`](ClassSnapshot::wait_total), in nanoseconds |
//! | `fairway_wait_seconds{quantile="0.5"}`, `"0.9"`, `"0.99"`, `"0.999"` | gauge | quantiles of [`wait_histogram`](ClassSnapshot::wait_histogram), 0 before the first grant |
//! | `fairway_wait_seconds_max` | gauge | [`wait_max`](ClassSnapshot::wait_max) |
//!
//! Counters are set with [`Counter::absolute`]: the scheduler's own counters are cumulative
//! since build (and saturate, never decrease), so the published value is theirs, not a sum of
//! increments. The wait total is published in nanoseconds because the facade's counters are
//! integers: whole seconds would round almost every wait away.
//!
//! # Why quantile gauges, not a `metrics` histogram
//!
//! A snapshot holds the class's waits as a cumulative, already bucketed histogram (log-linear
//! buckets within 12.5 %; see [`ClassSnapshot`]), not the individual samples a
//! [`metrics::histogram!`] records. Replaying it into one would record each bucket's floor again
//! as if it were a sample (the exporter would bucket the buckets), and would need the previous
//! counts per bucket to record only what is new, which a stateless [`publish`] cannot keep.
//! Quantiles read from the cumulative histogram are exact for it, cost four gauges, and need no
//! state. They cover the class's life since build (like Prometheus summaries without a window),
//! each the floor of its bucket, so within 12.5 % below the wait it stands for. A rate of
//! `fairway_wait_nanoseconds_total` over `fairway_grants_total` gives the mean wait over any
//! window.
//!
//! # Examples
//!
//! ```
//! use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
//! use fairway::metrics::Publisher;
//! use fairway::Scheduler;
//!
//! let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("sandbox")], 16))?;
//! let scheduler = Scheduler::builder(ledger).class(4, 64).build()?;
//! // Install the exporter first (e.g. `metrics_exporter_prometheus::PrometheusBuilder`): the
//! // publisher registers its metrics with the recorder installed when it is built.
//! let mut publisher = Publisher::new(&scheduler);
//! // Then, from the host's timer or scrape hook:
//! publisher.publish();
//! assert_eq!(publisher.snapshot(fairway::ClassId(0)).unwrap().cells_available, 4);
//! # Ok::<(), fairway::Error>(())
//! ```

use crate::{ClassId, ClassSnapshot, Scheduler};
use core::time::Duration;
use metrics::{Counter, Gauge, Label, Unit};

/// The quantiles published as `fairway_wait_seconds{quantile=...}`, with their label values.
const QUANTILES: [(f64, &str); 4] = [(0.5, "0.5"), (0.9, "0.9"), (0.99, "0.99"), (0.999, "0.999")];

/// Describes every metric (help text and unit) to the installed recorder. [`Publisher::new`]
/// calls it; call it yourself when you publish with [`publish`] only.
pub fn describe() {
    metrics::describe_gauge!("fairway_cells_total", Unit::Count, "Cells in the class.");
    metrics::describe_gauge!("fairway_cells_available", Unit::Count, "Cells free now.");
    metrics::describe_gauge!("fairway_cells_leased", Unit::Count, "Cells leased now.");
    metrics::describe_gauge!(
        "fairway_cells_quarantined",
        Unit::Count,
        "Cells out of service until the host restores them."
    );
    metrics::describe_gauge!("fairway_queue_depth", Unit::Count, "Live queued requests.");
    metrics::describe_gauge!(
        "fairway_queued_tenants",
        Unit::Count,
        "Tenants in the rotation, as of the last dispatch pass."
    );
    metrics::describe_gauge!(
        "fairway_oldest_lease_age_seconds",
        Unit::Seconds,
        "Age of the oldest live lease (0 when none is out)."
    );
    metrics::describe_counter!(
        "fairway_grants_total",
        Unit::Count,
        "Requests granted a cell."
    );
    metrics::describe_counter!(
        "fairway_requests_ended_total",
        Unit::Count,
        "Requests that ended without running, by reason (refused_at_acceptance also counts as a grant)."
    );
    metrics::describe_counter!(
        "fairway_wait_nanoseconds_total",
        Unit::Nanoseconds,
        "Sum of the waits of granted requests."
    );
    metrics::describe_gauge!(
        "fairway_wait_seconds",
        Unit::Seconds,
        "Quantiles of the waits of granted requests since build (bucket floors, within 12.5 %)."
    );
    metrics::describe_gauge!(
        "fairway_wait_seconds_max",
        Unit::Seconds,
        "Longest wait of a granted request."
    );
}

/// One class's registered metrics.
struct Handles {
    cells_total: Gauge,
    cells_available: Gauge,
    cells_leased: Gauge,
    cells_quarantined: Gauge,
    queue_depth: Gauge,
    queued_tenants: Gauge,
    oldest_lease_age: Gauge,
    grants: Counter,
    rejected: Counter,
    cancelled: Counter,
    expired: Counter,
    refused_at_acceptance: Counter,
    wait_total: Counter,
    wait_quantiles: [Gauge; 4],
    wait_max: Gauge,
}

impl Handles {
    /// Registers the metrics of `class` with the current recorder.
    fn register<T: Send + 'static>(scheduler: &Scheduler<T>, class: ClassId) -> Self {
        let name = scheduler.ledger().class_name(class).unwrap_or_default();
        let labels = [
            Label::new("class", class.0.to_string()),
            Label::new("class_name", name),
        ];
        let with = |key: &'static str, value: &'static str| {
            let mut l = labels.to_vec();
            l.push(Label::new(key, value));
            l
        };
        let ended =
            |reason| metrics::counter!("fairway_requests_ended_total", with("reason", reason));
        Handles {
            cells_total: metrics::gauge!("fairway_cells_total", labels.iter()),
            cells_available: metrics::gauge!("fairway_cells_available", labels.iter()),
            cells_leased: metrics::gauge!("fairway_cells_leased", labels.iter()),
            cells_quarantined: metrics::gauge!("fairway_cells_quarantined", labels.iter()),
            queue_depth: metrics::gauge!("fairway_queue_depth", labels.iter()),
            queued_tenants: metrics::gauge!("fairway_queued_tenants", labels.iter()),
            oldest_lease_age: metrics::gauge!("fairway_oldest_lease_age_seconds", labels.iter()),
            grants: metrics::counter!("fairway_grants_total", labels.iter()),
            rejected: ended("rejected"),
            cancelled: ended("cancelled"),
            expired: ended("expired"),
            refused_at_acceptance: ended("refused_at_acceptance"),
            wait_total: metrics::counter!("fairway_wait_nanoseconds_total", labels.iter()),
            wait_quantiles: QUANTILES
                .map(|(_, q)| metrics::gauge!("fairway_wait_seconds", with("quantile", q))),
            wait_max: metrics::gauge!("fairway_wait_seconds_max", labels.iter()),
        }
    }

    /// Sets every metric from `s`.
    fn emit(&self, s: &ClassSnapshot) {
        self.cells_total.set(s.cells_total);
        self.cells_available.set(s.cells_available);
        self.cells_leased.set(s.cells_leased);
        self.cells_quarantined.set(s.cells_quarantined);
        self.queue_depth.set(s.queue_depth);
        self.queued_tenants.set(s.queued_tenants);
        self.oldest_lease_age
            .set(s.oldest_lease_age.unwrap_or(Duration::ZERO).as_secs_f64());
        self.grants.absolute(s.grants);
        self.rejected.absolute(s.rejections);
        self.cancelled.absolute(s.cancellations);
        self.expired.absolute(s.expirations);
        self.refused_at_acceptance.absolute(s.refused_at_acceptance);
        self.wait_total
            .absolute(u64::try_from(s.wait_total.as_nanos()).unwrap_or(u64::MAX));
        let h = &s.wait_histogram;
        for (gauge, (q, _)) in self.wait_quantiles.iter().zip(QUANTILES) {
            // The floor of the bucket (the value the snapshot recorded); 0 when empty.
            let ns = if h.is_empty() {
                0
            } else {
                h.lowest_equivalent(h.value_at_quantile(q))
            };
            gauge.set(Duration::from_nanos(ns).as_secs_f64());
        }
        self.wait_max.set(s.wait_max.as_secs_f64());
    }
}

/// Publishes every class of `scheduler` once, registering the metrics with the recorder current
/// at this call; `scratch` is the snapshot each class is read into (take one with
/// [`Scheduler::snapshot`] and keep it, so its histogram's storage is reused).
///
/// Registering allocates the label values on each call; a [`Publisher`] registers once.
pub fn publish<T: Send + 'static>(scheduler: &Scheduler<T>, scratch: &mut ClassSnapshot) {
    for i in 0..scheduler.class_count() {
        let class = ClassId(i as u16);
        if scheduler.snapshot_into(class, scratch).is_ok() {
            Handles::register(scheduler, class).emit(scratch);
        }
    }
}

/// One class's reusable snapshot and registered metrics.
struct ClassState {
    class: ClassId,
    snapshot: ClassSnapshot,
    handles: Handles,
}

/// Publishes a scheduler's classes to the [`metrics`] recorder installed when it was built;
/// allocation-free after [`new`](Self::new) (see the [module docs](self)).
pub struct Publisher<T: Send + 'static> {
    scheduler: Scheduler<T>,
    classes: Vec<ClassState>,
}

impl<T: Send + 'static> core::fmt::Debug for Publisher<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Publisher")
            .field("scheduler", &self.scheduler)
            .field("classes", &self.classes.len())
            .finish()
    }
}

impl<T: Send + 'static> Publisher<T> {
    /// A publisher for every class of `scheduler` (it keeps a handle to it): describes the
    /// metrics ([`describe`]), registers each class's with the recorder installed now, and takes
    /// one snapshot per class to reuse. Nothing is published until [`publish`](Self::publish).
    pub fn new(scheduler: &Scheduler<T>) -> Self {
        describe();
        let classes = (0..scheduler.class_count())
            .filter_map(|i| {
                let class = ClassId(i as u16);
                let snapshot = scheduler.snapshot(class).ok()?;
                Some(ClassState {
                    class,
                    snapshot,
                    handles: Handles::register(scheduler, class),
                })
            })
            .collect();
        Publisher {
            scheduler: scheduler.clone(),
            classes,
        }
    }

    /// Snapshots every class and sets its metrics.
    pub fn publish(&mut self) {
        for c in &mut self.classes {
            if self
                .scheduler
                .snapshot_into(c.class, &mut c.snapshot)
                .is_ok()
            {
                c.handles.emit(&c.snapshot);
            }
        }
    }

    /// The snapshot of `class` that the last [`publish`](Self::publish) published (taken at
    /// [`new`](Self::new) before the first one), or `None` for a class the scheduler lacks.
    pub fn snapshot(&self, class: ClassId) -> Option<&ClassSnapshot> {
        self.classes.get(usize::from(class.0)).map(|c| &c.snapshot)
    }
}
