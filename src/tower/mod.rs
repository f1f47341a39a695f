//! A fair [tower] layer: each request waits for a cell of a fairway class, fairly across tenants,
//! before the inner service sees it (SPEC X04; the `tower` cargo feature).
//!
//! [`FairLayer`] wraps a service. For every request its [`FairService`]:
//!
//! 1. reads the request's tenant, priority, class and deadline with the extractors given to the
//!    [`FairLayerBuilder`];
//! 2. admits it through the scheduler's [`Ledger`](crate::admission::Ledger) (the tenant's and
//!    the class's quotas apply), then either queues it until a cell is granted or its deadline
//!    passes ([`Overload::Queue`], the default), or takes a free cell at once and sheds the
//!    request when there is none ([`Overload::Shed`]);
//! 3. holds the cell while the inner service's future runs, and releases it (cell, then quota)
//!    when that future completes, fails or is dropped.
//!
//! A refused request resolves to [`FairError::Rejected`] with a [`Rejection`] that says why;
//! [`Rejection::status`] maps it to 429 (the tenant's own quota), 504 (its deadline passed) or
//! 503 (the service is full or stopping). With the `http` feature, [`Rejection::status_code`]
//! and [`Rejection::to_response`] give the `http` crate's types.
//!
//! Deadlines need a tokio runtime with its timer enabled: nothing else wakes a queued request
//! when its deadline passes, so its response future arms a `tokio::time::Sleep` at its first
//! poll (the core itself depends on no runtime; this layer is an integration for tokio hosts).
//!
//! `poll_ready` reserves nothing: it is always ready, because what a request needs (a quota and
//! a cell of its class) depends on the request, which `poll_ready` does not see. The inner
//! service is driven to readiness inside the response future, after the cell is granted, on a
//! clone of it (so the inner service must be `Clone`, as with tower's `Buffer`-style layers).
//!
//! Request ids: the layer gives each request a [`RequestId`] with the top bit set, counted up
//! from a process-wide counter, so they never collide with a host's own ids below `2^63` on the
//! same ledger.
//!
//! # Examples
//!
//! ```
//! use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
//! use fairway::tower::{FairError, FairLayer};
//! use fairway::{Scheduler, TenantId};
//! use std::convert::Infallible;
//! use std::time::Duration;
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), fairway::Error> {
//! // 2 cells, a queue of 64, up to 16 tenants.
//! let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("http")], 16))?;
//! let scheduler = Scheduler::builder(ledger).class(2, 64).build()?;
//!
//! // Requests are (tenant, body) pairs here; an HTTP service would read a header instead.
//! let layer = FairLayer::builder(scheduler)
//!     .tenant(|req: &(u32, &'static str)| TenantId(req.0))
//!     .deadline(|_| Some(Duration::from_millis(250)))
//!     .build();
//! let service = layer.layer(service_fn(|req: (u32, &'static str)| async move {
//!     Ok::<_, Infallible>(req.1.len())
//! }));
//!
//! let len = service.oneshot((3, "hello")).await.map_err(|e| match e {
//!     FairError::Rejected(rejection) => rejection.into_error(),
//!     FairError::Inner(never) => match never {},
//! })?;
//! assert_eq!(len, 5);
//! # Ok(())
//! # }
//! ```
//!
//! [tower]: https://docs.rs/tower

mod future;
mod rejection;

pub use future::ResponseFuture;
pub use rejection::{FairError, Rejection};

use crate::admission::AdmissionRequest;
use crate::{ClassId, Priority, RequestId, Scheduler, TenantId};
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// What the layer does with a request that finds no free cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overload {
    /// Queue it until a cell is granted, its deadline passes (SPEC F46) or the scheduler stops.
    #[default]
    Queue,
    /// Refuse it at once (`unavailable / no-capacity`, mapped to 503); a request is only served
    /// when a cell is free and nothing of its class is queued.
    Shed,
}

type Extract<Req, V> = Box<dyn Fn(&Req) -> V + Send + Sync>;

/// The extractors and the scheduler, shared by the layer and every service it makes.
struct Shared<Req> {
    scheduler: Scheduler,
    overload: Overload,
    tenant: Extract<Req, TenantId>,
    priority: Option<Extract<Req, Priority>>,
    class: Option<Extract<Req, ClassId>>,
    deadline: Option<Extract<Req, Option<Duration>>>,
}

impl<Req> Shared<Req> {
    /// The admission request for `req`, with a fresh layer id, and its deadline.
    fn admission(&self, req: &Req) -> (AdmissionRequest, Option<Duration>) {
        let mut admission = AdmissionRequest::new(next_id(), (self.tenant)(req));
        if let Some(class) = &self.class {
            admission = admission.class(class(req));
        }
        if let Some(priority) = &self.priority {
            admission = admission.priority(priority(req));
        }
        let deadline = self.deadline.as_ref().and_then(|d| d(req));
        if let Some(deadline) = deadline {
            admission = admission.deadline(deadline);
        }
        (admission, deadline)
    }
}

/// Layer ids have the top bit set; the host keeps the ids below it.
const LAYER_ID_BIT: u64 = 1 << 63;

/// A fresh request id for the layer (unique among live requests for 2^63 requests).
fn next_id() -> RequestId {
    let n = crate::sync::unique::next(&crate::sync::unique::LAYER_REQUEST_IDS);
    RequestId(LAYER_ID_BIT | (n & !LAYER_ID_BIT))
}

/// A tower [`Layer`](tower_layer::Layer) that admits every request through a fairway class
/// before the inner service sees it. Made by [`FairLayer::builder`]; cheap to clone (one `Arc`).
pub struct FairLayer<Req> {
    shared: Arc<Shared<Req>>,
}

impl<Req> Clone for FairLayer<Req> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<Req> fmt::Debug for FairLayer<Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairLayer")
            .field("overload", &self.shared.overload)
            .finish_non_exhaustive()
    }
}

impl<Req: 'static> FairLayer<Req> {
    /// Starts a layer over `scheduler` (push mode: its payload type is `()`). Every request is
    /// admitted through the scheduler's ledger; give the tenant extractor with
    /// [`FairLayerBuilder::tenant`] (without one every request is tenant 0).
    pub fn builder(scheduler: Scheduler) -> FairLayerBuilder<Req> {
        FairLayerBuilder {
            shared: Shared {
                scheduler,
                overload: Overload::Queue,
                tenant: Box::new(|_| TenantId(0)),
                priority: None,
                class: None,
                deadline: None,
            },
        }
    }

    /// The scheduler the layer admits through (for its snapshot, shutdown, quarantine).
    pub fn scheduler(&self) -> &Scheduler {
        &self.shared.scheduler
    }
}

impl<S, Req> tower_layer::Layer<S> for FairLayer<Req> {
    type Service = FairService<S, Req>;

    fn layer(&self, inner: S) -> Self::Service {
        FairService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Configures a [`FairLayer`]: the extractors that read a request's tenant, priority, class and
/// deadline, and what to do when no cell is free.
pub struct FairLayerBuilder<Req> {
    shared: Shared<Req>,
}

impl<Req> fmt::Debug for FairLayerBuilder<Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        f.debug_struct("FairLayerBuilder")
            .field("overload", &s.overload)
            .field("priority", &s.priority.is_some())
            .field("class", &s.class.is_some())
            .field("deadline", &s.deadline.is_some())
            .finish_non_exhaustive()
    }
}

impl<Req: 'static> FairLayerBuilder<Req> {
    /// The request's tenant (a header, an extension, an authenticated principal). A tenant past
    /// the ledger's `max_tenants` is refused (`invalid-argument / tenant-out-of-range`, 503).
    pub fn tenant(mut self, f: impl Fn(&Req) -> TenantId + Send + Sync + 'static) -> Self {
        self.shared.tenant = Box::new(f);
        self
    }

    /// The request's priority within its tenant (default: the admission default). It orders
    /// the tenant's own requests and never takes another tenant's turn (SPEC F15).
    pub fn priority(mut self, f: impl Fn(&Req) -> Priority + Send + Sync + 'static) -> Self {
        self.shared.priority = Some(Box::new(f));
        self
    }

    /// The class the request needs (default: class 0).
    pub fn class(mut self, f: impl Fn(&Req) -> ClassId + Send + Sync + 'static) -> Self {
        self.shared.class = Some(Box::new(f));
        self
    }

    /// How long the request may wait for a cell, from its arrival (`None`: no deadline). Past
    /// it the request is refused `deadline-exceeded` (504), even while queued (SPEC F46).
    pub fn deadline(
        mut self,
        f: impl Fn(&Req) -> Option<Duration> + Send + Sync + 'static,
    ) -> Self {
        self.shared.deadline = Some(Box::new(f));
        self
    }

    /// What to do with a request that finds no free cell (default [`Overload::Queue`]).
    pub fn overload(mut self, overload: Overload) -> Self {
        self.shared.overload = overload;
        self
    }

    /// The layer.
    pub fn build(self) -> FairLayer<Req> {
        FairLayer {
            shared: Arc::new(self.shared),
        }
    }
}

/// The service a [`FairLayer`] wraps around an inner service `S`.
pub struct FairService<S, Req> {
    inner: S,
    shared: Arc<Shared<Req>>,
}

impl<S: Clone, Req> Clone for FairService<S, Req> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, Req> fmt::Debug for FairService<S, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairService")
            .field("inner", &self.inner)
            .field("overload", &self.shared.overload)
            .finish_non_exhaustive()
    }
}

impl<S, Req> tower_service::Service<Req> for FairService<S, Req>
where
    S: tower_service::Service<Req> + Clone,
{
    type Response = S::Response;
    type Error = FairError<S::Error>;
    type Future = ResponseFuture<S, Req>;

    /// Always ready: nothing is reserved for a request not yet seen (SPEC X04).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let shared = &*self.shared;
        let (admission, deadline) = shared.admission(&req);
        // Saturating: a deadline too far to represent is no deadline for the timer.
        let expires = deadline.and_then(|d| tokio::time::Instant::now().checked_add(d));
        let permit = match shared.scheduler.ledger().admit(admission) {
            Ok(permit) => permit,
            Err(error) => return ResponseFuture::rejected(Rejection::new(error)),
        };
        let request = crate::AdmittedRequest::without_token(permit);
        // The clone is the one driven to readiness and called; `self.inner` stays unpolled, as
        // tower's contract allows (a clone's readiness is its own).
        let inner = self.inner.clone();
        match shared.overload {
            Overload::Queue => {
                ResponseFuture::queued(shared.scheduler.enqueue_owned(request), expires, inner, req)
            }
            Overload::Shed => match shared.scheduler.try_enqueue(request) {
                Ok(assignment) => ResponseFuture::granted(assignment, inner, req),
                Err(refused) => ResponseFuture::rejected(Rejection::new(refused.error)),
            },
        }
    }
}
