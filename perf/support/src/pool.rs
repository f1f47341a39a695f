//! One cell taken and given back: fairway's `FixedCellPool::try_acquire_now` + `release` against
//! tokio's `Semaphore::try_acquire` + drop of the permit (PERF P2; tokio is also P13's peer).

use std::hint::black_box;

use fairway::pool::{CellPool, FixedCellPool, LeaseRequest};
use fairway::{ClassId, RequestId};

use crate::{Named, SingleOp};

/// The operation measured, implemented once per backend.
pub trait PoolBackend: Named + Send + Sync + 'static {
    /// `cells` free cells.
    fn with_cells(cells: u32) -> Self;
    /// Takes a cell for request `id` and gives it back; `false` if none was free.
    fn acquire_release(&self, id: u64) -> bool;
}

impl Named for FixedCellPool {
    const NAME: &'static str = "fairway FixedCellPool";
}

impl PoolBackend for FixedCellPool {
    fn with_cells(cells: u32) -> Self {
        FixedCellPool::new(ClassId(0), cells).expect("pool")
    }
    #[inline]
    fn acquire_release(&self, id: u64) -> bool {
        let req = LeaseRequest {
            request: RequestId(id),
            class: ClassId(0),
            cpu_units: 0,
            memory_units: 0,
        };
        match self.try_acquire_now(&req).expect("the pool is healthy") {
            Some(lease) => {
                black_box(lease.cell());
                self.release(lease);
                true
            }
            None => false,
        }
    }
}

impl Named for tokio::sync::Semaphore {
    const NAME: &'static str = "tokio Semaphore";
}

impl PoolBackend for tokio::sync::Semaphore {
    fn with_cells(cells: u32) -> Self {
        tokio::sync::Semaphore::new(cells as usize)
    }
    #[inline]
    fn acquire_release(&self, _id: u64) -> bool {
        match self.try_acquire() {
            Ok(permit) => {
                drop(black_box(permit));
                true
            }
            Err(_) => false,
        }
    }
}

/// One thread taking and giving back the only cell of a pool of backend `B`.
pub struct OneCell<B>(pub B);

impl<B: PoolBackend> OneCell<B> {
    /// A pool of one cell.
    pub fn new() -> Self {
        Self(B::with_cells(1))
    }
}

impl<B: PoolBackend> Default for OneCell<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: PoolBackend> SingleOp for OneCell<B> {
    fn run(&mut self, iters: u64) {
        for i in 0..iters {
            assert!(self.0.acquire_release(i), "the only cell is free");
        }
    }
}
