//! Pull mode's consumer side: granted pull-mode entries wait on the `ready` queue (each at most
//! once) until an executor pops one and takes its content and lease.
//!
//! The granter pushes an entry after the fate's Release CAS, and the pop is Acquire, so the
//! popper sees the lease; popping makes it the content's owner and the holder of the content's
//! reference. An executor that finds nothing registers, then re-checks (a grant pushes before it
//! counts its entry out of `life`).

use core::task::{Context, Poll};

use super::RingClass;
use crate::engine::Pulled;

impl<T: Send + 'static> RingClass<T> {
    /// Takes one granted pull-mode entry off the ready queue, if any.
    fn pop_ready(&self) -> Option<Pulled<T>> {
        let index = self.ready.pop()?;
        let s = self.slot(index);
        // SAFETY: the entry is granted (pushed after the fate's Release CAS; the pop is
        // Acquire) and popping made us the content's owner; the content reference is ours.
        let (content, lease, waited, cancelled) = unsafe {
            (
                s.content.with_mut(|c| (*c).take()),
                s.lease.with_mut(|l| (*l).take()),
                s.waited.with(|w| *w),
                s.token.with_mut(|t| (*t).take().and_then(|t| t.reason())),
            )
        };
        let live = self.ticket(index).live;
        self.core.unref(index);
        Some(Pulled::from_parts(content, lease, waited, cancelled, live))
    }

    pub(super) fn next_now(&self) -> Option<Pulled<T>> {
        if let Some(p) = self.pop_ready() {
            return Some(p);
        }
        self.help();
        self.pop_ready()
    }

    /// [`ClassEngine::poll_next`](crate::engine::ClassEngine::poll_next): a granted pull-mode entry,
    /// or the end of the stream once admissions stopped and nothing is queued.
    pub(super) fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        slot: &mut Option<usize>,
    ) -> Poll<Option<Pulled<T>>> {
        if let Some(p) = self.next_now() {
            return Poll::Ready(Some(p));
        }
        self.exec.register_in(slot, cx);
        // Read before the re-check: a grant pushes to the ready queue before it counts its
        // entry out of `life`, so a count of 0 seen here means the pop below sees every push.
        let l = self.life();
        if let Some(p) = self.next_now() {
            return Poll::Ready(Some(p));
        }
        // A dead class is not the end: a restore reopens it (SPEC F22), so its executors wait.
        if l.stream_over() {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}
