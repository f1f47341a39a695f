//! What the scheduler's handles share: the classes' engines, the live request ids, and the
//! checks every request passes before it reaches an engine.

use super::*;

/// A process-unique scheduler identity.
pub(super) fn next_scheduler_id() -> u64 {
    crate::sync::unique::next(&crate::sync::unique::SCHEDULER_IDS)
}

/// Where assignments send their cells back.
///
/// Each method takes the assignment's execution permit and refunds it after the pool has the
/// cell back and before the class counts the cell free (SPEC F44), so a drain that sees every
/// cell back also sees every quota refunded; then the request's id is no longer live (SPEC F34:
/// `live`, the id's place among the live ids, is given up). One call per ended assignment.
pub(crate) trait CellReturn: Send + Sync {
    fn release(&self, class: ClassId, lease: Lease, permit: ExecutionPermit, live: Option<Slot>);
    fn quarantine(
        &self,
        class: ClassId,
        lease: Lease,
        reason: &'static str,
        permit: ExecutionPermit,
        live: Option<Slot>,
    );
    /// An assignment was dropped without a disposition: its class's [`DropPolicy`] decides.
    fn dropped(&self, class: ClassId, lease: Lease, permit: ExecutionPermit, live: Option<Slot>);
}

pub(crate) struct Shared<T: Send + 'static, M: Mechanism> {
    /// Process-unique identity, stamped into every [`RequestHandle`] (SPEC F30).
    pub(super) id: u64,
    /// Ids of the live requests (SPEC F34).
    pub(super) ids: Arc<IdSet>,
    pub(super) ledger: Ledger,
    pub(super) classes: Box<[M::Class<T>]>,
    /// Per class, what a dropped assignment does to its cell.
    pub(super) on_drop: Box<[DropPolicy]>,
    pub(super) shut: AtomicBool,
    /// Set by `close` (and `drain`): no new admissions.
    pub(super) closed: AtomicBool,
    pub(super) clock: Arc<dyn Clock>,
}

impl<T: Send + 'static, M: Mechanism> CellReturn for Shared<T, M> {
    fn release(&self, class: ClassId, lease: Lease, permit: ExecutionPermit, live: Option<Slot>) {
        self.classes[usize::from(class.0)].release_then(lease, || drop(permit));
        self.forget(live);
    }

    fn quarantine(
        &self,
        class: ClassId,
        lease: Lease,
        reason: &'static str,
        permit: ExecutionPermit,
        live: Option<Slot>,
    ) {
        crate::observe::quarantined(class, permit.tenant().0, lease.cell(), reason);
        self.classes[usize::from(class.0)].quarantine_then(lease, reason, || drop(permit));
        self.forget(live);
    }

    fn dropped(&self, class: ClassId, lease: Lease, permit: ExecutionPermit, live: Option<Slot>) {
        match self.on_drop[usize::from(class.0)] {
            DropPolicy::Release => self.release(class, lease, permit, live),
            DropPolicy::Quarantine => {
                self.quarantine(class, lease, "dropped-without-disposition", permit, live)
            }
        }
    }
}

impl<T: Send + 'static, M: Mechanism> Shared<T, M> {
    pub(super) fn class(&self, class: ClassId) -> Result<&M::Class<T>, Error> {
        self.classes
            .get(usize::from(class.0))
            .ok_or(Error::new(Code::InvalidArgument, Reason::Class))
    }

    pub(super) fn is_shut(&self) -> bool {
        // Acquire: pairs with the Release store in `shutdown`.
        self.shut.load(Ordering::Acquire)
    }

    /// Checks that apply to every request before it reaches an engine; returns its class's
    /// engine and the request id's place among the live ids (SPEC F34), which the caller must
    /// give up ([`Shared::forget_id`]) when the request ends. A request refused for the state it
    /// or the scheduler is in (shut down, cancelled, expired) is counted in the class's
    /// snapshot; bad input (a foreign permit, a wrong token, a duplicate id) is not.
    pub(super) fn check(&self, req: &AdmittedRequest) -> Result<(&M::Class<T>, Slot), Error> {
        if !req.permit.is_from(&self.ledger) {
            return Err(Error::new(Code::PermissionDenied, Reason::ForeignAdmission));
        }
        if req
            .token
            .as_ref()
            .is_some_and(|t| t.id() != req.permit.id())
        {
            return Err(Error::new(
                Code::InvalidArgument,
                Reason::CancellationIdentity,
            ));
        }
        let engine = self.class(req.permit.class())?;
        let refused = if self.is_shut() {
            Some(Error::new(Code::Unavailable, Reason::Shutdown))
        } else if let Some(reason) = req.token.as_ref().and_then(CancellationToken::reason) {
            Some(Error::new(Code::Cancelled, Reason::Host(reason)))
        } else if req.permit.deadline().is_some_and(|d| self.clock.now() >= d) {
            Some(Error::new(Code::DeadlineExceeded, Reason::DeadlineExceeded))
        } else {
            None
        };
        if let Some(e) = refused {
            engine.count_refused(e.code() == Code::DeadlineExceeded);
            crate::observe::refused(req.permit.class(), req.permit.tenant().0, &e);
            return Err(e);
        }
        match self.ids.insert(req.permit.id().0) {
            Ok(slot) => Ok((engine, slot)),
            Err(InsertError::Duplicate) => {
                Err(Error::new(Code::AlreadyExists, Reason::DuplicateRequest))
            }
            // Cannot happen while the table is sized for every request that can be live (see
            // `Builder::build`); refuse rather than admit an unchecked id.
            Err(InsertError::Full) => {
                engine.count_refused(false);
                let e = Error::new(Code::ResourceExhausted, Reason::QueueFull);
                crate::observe::refused(req.permit.class(), req.permit.tenant().0, &e);
                Err(e)
            }
        }
    }

    /// Gives up a request id's place among the live ids: the request has ended.
    #[inline]
    pub(crate) fn forget_id(&self, slot: Slot) {
        self.ids.remove(slot);
    }

    /// [`forget_id`](Self::forget_id) of `live`, if any.
    #[inline]
    fn forget(&self, live: Option<Slot>) {
        if let Some(slot) = live {
            self.forget_id(slot);
        }
    }

    /// A handle to the request queued under `key` in `class`.
    pub(crate) fn handle(&self, class: ClassId, key: u64) -> RequestHandle {
        RequestHandle {
            scheduler: self.id,
            class,
            key,
        }
    }
}
