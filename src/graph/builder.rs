//! The graph's builder: its classes and fixed bounds, checked before anything is allocated, and
//! the build with either engine.

use super::*;

/// Builds a [`Graph`].
#[derive(Debug, Clone)]
pub struct GraphBuilder {
    pub(super) ledger: Ledger,
    pub(super) cells: Vec<u32>,
    pub(super) bounds: Bounds,
}

impl GraphBuilder {
    /// Adds the next class of cells (its [`ClassId`] is its position, as in the ledger).
    pub fn class(mut self, cells: u32) -> Self {
        self.cells.push(cells);
        self
    }

    /// Node slots: jobs admitted and not yet collected (default 1024).
    pub fn nodes(mut self, n: u32) -> Self {
        self.bounds.nodes = n;
        self
    }

    /// Edge slots: dependencies not yet released (default 4096).
    pub fn edges(mut self, n: u32) -> Self {
        self.bounds.edges = n;
        self
    }

    /// Key-table slots, rounded up to a power of two (default 4096). A slot, once a key
    /// claimed it, stays that key's, also after `remove` (the key reuses it when named again).
    pub fn keys(mut self, n: u32) -> Self {
        self.bounds.keys = n;
        self
    }

    /// Backs room for `nodes` jobs, `edges` dependencies and `keys` keys at build, and keeps
    /// it through every shrink (SPEC D51). By default a graph backs a small first segment of
    /// each store and grows at each new high-water mark of use (one allocation per segment,
    /// the segments doubling); a host whose bursts must not allocate at all reserves their
    /// size here. Clamped to the maxima.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
    /// use fairway::graph::Graph;
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
    /// let g = Graph::builder(ledger)
    ///     .class(4)
    ///     .nodes(100_000)
    ///     .edges(400_000)
    ///     .reserve(10_000, 40_000, 10_000)
    ///     .build()?;
    /// let o = g.occupancy();
    /// assert!(o.nodes_backing >= 10_000 && o.nodes_backing < 100_000);
    /// g.reset(); // gives back what grew past the reservation, never the reservation
    /// assert!(g.occupancy().nodes_backing >= 10_000);
    /// # Ok::<(), fairway::Error>(())
    /// ```
    pub fn reserve(mut self, nodes: u32, edges: u32, keys: u32) -> Self {
        self.bounds.reserve = (nodes, edges, keys);
        self
    }

    /// The most dependencies one job may list (default 16; at least 1, at most 1,024).
    pub fn max_deps(mut self, n: u32) -> Self {
        self.bounds.max_deps = n;
        self
    }

    /// The largest generation a key may reach (default and at most
    /// [`Version::MAX_GENERATION`]); `advance` beyond it is refused (SPEC D22).
    pub fn max_generation(mut self, n: u32) -> Self {
        self.bounds.max_gen = n;
        self
    }

    /// The generation every node slot starts at (default 0). Only for tests that exercise
    /// generation exhaustion without 2^32 reuses of a slot.
    #[doc(hidden)]
    pub fn first_node_generation(mut self, gen: u32) -> Self {
        self.bounds.first_gen = gen;
        self
    }

    /// The generation every key slot of the lock-free graph's key table starts at (default 0;
    /// the mutex graph has no key slots and ignores it). Only for tests that exercise a key
    /// slot's generation exhaustion without 2^32 removals on one slot.
    #[doc(hidden)]
    pub fn first_key_slot_generation(mut self, gen: u32) -> Self {
        self.bounds.first_key_gen = gen;
        self
    }

    fn checked(&self) -> Result<Bounds, Error> {
        let b = self.bounds;
        if b.nodes == 0 || b.nodes > 1 << 23 || b.nodes > ClassConfig::MAX_QUEUE_CAPACITY {
            return Err(Error::configuration("nodes"));
        }
        if b.edges == 0 || b.edges > 1 << 30 {
            return Err(Error::configuration("edges"));
        }
        if b.keys == 0 || b.keys > 1 << 30 {
            return Err(Error::configuration("keys"));
        }
        // A graph whose jobs can name no dependency is a configuration mistake: refused.
        if b.max_deps == 0 || b.max_deps as usize > rules::MAX_DEPS {
            return Err(Error::configuration("max_deps"));
        }
        if b.max_gen > Version::MAX_GENERATION {
            return Err(Error::configuration("max_generation"));
        }
        let keys = b.keys.next_power_of_two();
        Ok(Bounds {
            keys,
            reserve: (
                b.reserve.0.min(b.nodes),
                b.reserve.1.min(b.edges),
                b.reserve.2.min(keys),
            ),
            ..b
        })
    }

    /// Builds the graph.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming the field, or the scheduler's build errors.
    pub fn build(self) -> Result<Graph, Error> {
        self.build_with()
    }

    /// Builds the graph's mutex twin (the oracle's).
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    #[doc(hidden)]
    pub fn build_mutex(self) -> Result<GraphOn<MutexGraph>, Error> {
        self.build_with()
    }

    /// Builds with either graph store: the engine's or the mutex twin's.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    #[doc(hidden)]
    pub fn build_with<E: GraphEngine>(self) -> Result<GraphOn<E>, Error> {
        let bounds = self.checked()?;
        let scheduler = Scheduler::builder(self.ledger.clone())
            .payload::<Task>()
            .classes(
                self.cells
                    .iter()
                    .map(|&cells| ClassConfig::new(cells, bounds.nodes)),
            )
            .build()?;
        Ok(GraphOn {
            inner: Arc::new(Inner {
                id: next_graph_id(),
                engine: E::with_bounds(bounds),
                scheduler,
                ledger: self.ledger,
                sleepers: AtomicU32::new(0),
                ended: (Mutex::new(()), Condvar::new()),
                room_wakers: Mutex::new(RoomWaiters::default()),
                room_sleepers: AtomicU32::new(0),
                shut: AtomicBool::new(false),
                capped: AtomicBool::new(false),
                caps: cap::CapSlots::new(node_geometry(bounds), bounds.reserve.0),
                reqs: reqs::ReqSlots::new(node_geometry(bounds), bounds.reserve.0),
                bin: Arc::new(DropBin::default()),
                outcome_waiters: handle::OutcomeWaiters::default(),
            }),
        })
    }
}

/// The segments of the graph's per-node side tables: those of the lock-free engine's node
/// store (SPEC D51).
fn node_geometry(bounds: Bounds) -> segments::Geometry {
    segments::Geometry::new(bounds.nodes, lockfree::FIRST_SEGMENT.max(bounds.reserve.0))
}

fn next_graph_id() -> u64 {
    crate::sync::unique::next(&crate::sync::unique::GRAPH_IDS)
}
