//! The fair service's response future: wait for a cell, drive the inner service to readiness,
//! call it, release the cell.

use super::{FairError, Rejection};
use crate::{Assignment, Code, Enqueue, Error, Reason};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

/// A granted cell, released when dropped: the inner call finished, failed or was abandoned
/// (SPEC X04). An explicit release, so the class's drop policy (which may quarantine an
/// abandoned cell) does not apply to a request that merely ended.
struct Held(Option<Assignment>);

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(assignment) = self.0.take() {
            assignment.release();
        }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, Req, F> {
        // Admitted and queued: waits for the grant.
        Waiting {
            #[pin]
            enqueue: Enqueue<'static>,
            // When the request's deadline passes, armed at the first poll (in the runtime).
            expires: Option<Instant>,
            #[pin]
            timer: Option<Sleep>,
            inner: Option<S>,
            req: Option<Req>,
        },
        // Granted: the inner service is driven to readiness while the cell is held.
        Readying {
            held: Held,
            inner: S,
            req: Option<Req>,
        },
        // The inner call runs on the held cell.
        Calling {
            #[pin]
            call: F,
            held: Held,
        },
        // Refused before the inner service saw it.
        Rejected {
            rejection: Option<Rejection>,
        },
        Done,
    }
}

pin_project! {
    /// The future of a [`FairService`](super::FairService) call.
    ///
    /// Dropping it at any point is clean: a queued request is withdrawn and refunded, a held
    /// cell is released, then the quota.
    pub struct ResponseFuture<S, Req>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req, S::Future>,
    }
}

impl<S: Service<Req>, Req> ResponseFuture<S, Req> {
    pub(super) fn queued(
        enqueue: Enqueue<'static>,
        expires: Option<Instant>,
        inner: S,
        req: Req,
    ) -> Self {
        Self {
            state: State::Waiting {
                enqueue,
                expires,
                timer: None,
                inner: Some(inner),
                req: Some(req),
            },
        }
    }

    pub(super) fn granted(assignment: Assignment, inner: S, req: Req) -> Self {
        Self {
            state: State::Readying {
                held: Held(Some(assignment)),
                inner,
                req: Some(req),
            },
        }
    }

    pub(super) fn rejected(rejection: Rejection) -> Self {
        Self {
            state: State::Rejected {
                rejection: Some(rejection),
            },
        }
    }
}

impl<S: Service<Req>, Req> fmt::Debug for ResponseFuture<S, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match &self.state {
            State::Waiting { .. } => "waiting for a cell",
            State::Readying { .. } => "waiting for the inner service",
            State::Calling { .. } => "calling the inner service",
            State::Rejected { .. } => "rejected",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("stage", &stage)
            .finish()
    }
}

impl<S: Service<Req>, Req> Future for ResponseFuture<S, Req> {
    type Output = Result<S::Response, FairError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Waiting {
                    enqueue,
                    expires,
                    mut timer,
                    inner,
                    req,
                } => {
                    let granted = match enqueue.poll(cx) {
                        Poll::Ready(granted) => granted,
                        Poll::Pending => {
                            // Nothing wakes a queued request at its deadline but its own timer:
                            // when it fires, the request is withdrawn (dropping the enqueue
                            // refunds it) and refused as the engine would refuse it.
                            if let Some(at) = expires.take() {
                                timer.set(Some(tokio::time::sleep_until(at)));
                            }
                            let Some(timer) = timer.as_pin_mut() else {
                                return Poll::Pending;
                            };
                            ready!(timer.poll(cx));
                            state.set(State::Done);
                            let error =
                                Error::new(Code::DeadlineExceeded, Reason::DeadlineExceeded);
                            return Poll::Ready(Err(FairError::Rejected(Rejection::new(error))));
                        }
                    };
                    let (inner, req) = (inner.take(), req.take());
                    match granted {
                        Ok(assignment) => state.set(State::Readying {
                            held: Held(Some(assignment)),
                            inner: inner.expect("a waiting call keeps its service"),
                            req,
                        }),
                        Err(error) => {
                            state.set(State::Done);
                            return Poll::Ready(Err(FairError::Rejected(Rejection::new(error))));
                        }
                    }
                }
                StateProj::Readying { held, inner, req } => {
                    match ready!(inner.poll_ready(cx)) {
                        Ok(()) => {
                            let call = inner.call(req.take().expect("a request is called once"));
                            let held = Held(held.0.take());
                            state.set(State::Calling { call, held });
                        }
                        Err(error) => {
                            // Setting `Done` drops the `Held`: the cell goes back.
                            state.set(State::Done);
                            return Poll::Ready(Err(FairError::Inner(error)));
                        }
                    }
                }
                StateProj::Calling { call, .. } => {
                    let out = ready!(call.poll(cx));
                    // The inner future is done: release the cell before the response moves on.
                    state.set(State::Done);
                    return Poll::Ready(out.map_err(FairError::Inner));
                }
                StateProj::Rejected { rejection } => {
                    let rejection = rejection.take().expect("a rejection is returned once");
                    state.set(State::Done);
                    return Poll::Ready(Err(FairError::Rejected(rejection)));
                }
                StateProj::Done => {
                    panic!("fairway::tower::ResponseFuture polled after it completed")
                }
            }
        }
    }
}
