//! An intrusive, allocation-free pairing heap over a fixed node array.
//!
//! The policy keeps every queued entry in two heaps at once: its tenant's order heap (F13) and,
//! when it has a finite deadline, the class-wide deadline heap (F46). Both are pairing heaps whose
//! links live inside the entry's node ([`Links`]); an [`Order`] names which links a heap uses and
//! how it compares two nodes. Nothing here allocates: a heap is just the `u32` index of its root.
//!
//! Link invariants of one heap (with [`NONE`] for "no node"):
//!
//! | field     | root       | first child of `p` | later child, left sibling `s` | not in the heap |
//! |-----------|------------|--------------------|-------------------------------|-----------------|
//! | `prev`    | `NONE`     | `p`                | `s`                           | `NONE`          |
//! | `sibling` | `NONE`     | next child or NONE | next child or NONE            | `NONE`          |
//! | `child`   | first child or `NONE` | first child or `NONE` | first child or `NONE`  | `NONE`          |
//!
//! Every parent precedes all of its children under [`Order::before`]. The order is total over
//! the nodes the policy stores (the sequence number breaks every tie), so the root is the unique
//! minimum whatever shape the heap has: the heap's outputs depend only on its contents, never on
//! the order of the operations that built it. That is what lets two engines driving the policy
//! through different interleavings of the same single-threaded history agree.
//!
//! Costs (amortised, the classic pairing heap bounds): insert and meld O(1), decrease-key O(1)
//! amortised (at most O(log n)), delete-min and delete of an arbitrary node O(log n). None of the
//! operations walks the heap beyond the removed node's children.

/// The "no node" index. Node indices are therefore limited to `0..u32::MAX`.
pub(crate) const NONE: u32 = u32::MAX;

/// The three links a node needs to sit in one pairing heap (see the module's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Links {
    /// The node's first child, or [`NONE`].
    pub(crate) child: u32,
    /// The next child of the node's parent, or [`NONE`].
    pub(crate) sibling: u32,
    /// The parent (for a first child), the left sibling (for a later child), or [`NONE`] for a
    /// root or a node outside the heap.
    pub(crate) prev: u32,
}

impl Links {
    /// The links of a node that is in no heap (or is a lone root).
    pub(crate) const DETACHED: Links = Links {
        child: NONE,
        sibling: NONE,
        prev: NONE,
    };
}

/// Storage of a heap's nodes, indexed by node index: a slice, or a view whose every access
/// touches one node only (the tenant-ring engine's per-tenant heaps share one node array between
/// owners of different tenants, so no owner may borrow the whole array).
pub(crate) trait Nodes<N>: core::ops::IndexMut<usize, Output = N> {}

impl<N, S: core::ops::IndexMut<usize, Output = N> + ?Sized> Nodes<N> for S {}

/// Which links of a node type a heap uses, and its order.
pub(crate) trait Order<N> {
    /// The links this heap threads through `node`.
    fn links(node: &N) -> &Links;
    /// Mutable access to the links this heap threads through `node`.
    fn links_mut(node: &mut N) -> &mut Links;
    /// Whether `a` must come out of the heap before `b`. A strict total order over the nodes
    /// stored together.
    fn before(a: &N, b: &N) -> bool;
}

/// Links two roots (both with `prev == sibling == NONE`) into one heap and returns its root.
#[inline]
fn link<N, O: Order<N>, S: Nodes<N> + ?Sized>(nodes: &mut S, a: u32, b: u32) -> u32 {
    debug_assert!(a != NONE && b != NONE && a != b);
    let (top, sub) = if O::before(&nodes[b as usize], &nodes[a as usize]) {
        (b, a)
    } else {
        (a, b)
    };
    let first = O::links(&nodes[top as usize]).child;
    if first != NONE {
        O::links_mut(&mut nodes[first as usize]).prev = sub;
    }
    let s = O::links_mut(&mut nodes[sub as usize]);
    s.sibling = first;
    s.prev = top;
    O::links_mut(&mut nodes[top as usize]).child = sub;
    top
}

/// Melds the heap rooted at `b` into the heap rooted at `a`; either may be [`NONE`].
#[inline]
pub(crate) fn meld<N, O: Order<N>, S: Nodes<N> + ?Sized>(nodes: &mut S, a: u32, b: u32) -> u32 {
    if a == NONE {
        b
    } else if b == NONE {
        a
    } else {
        link::<N, O, S>(nodes, a, b)
    }
}

/// Adds the detached node `x` to the heap rooted at `root`; returns the new root.
#[inline]
pub(crate) fn push<N, O: Order<N>, S: Nodes<N> + ?Sized>(nodes: &mut S, root: u32, x: u32) -> u32 {
    *O::links_mut(&mut nodes[x as usize]) = Links::DETACHED;
    meld::<N, O, S>(nodes, root, x)
}

/// Detaches the non-root node `x` (with its subtree) from its parent's child list.
#[inline]
fn cut<N, O: Order<N>, S: Nodes<N> + ?Sized>(nodes: &mut S, x: u32) {
    let Links { sibling, prev, .. } = *O::links(&nodes[x as usize]);
    debug_assert!(prev != NONE, "cut of a root");
    let p = O::links_mut(&mut nodes[prev as usize]);
    if p.child == x {
        p.child = sibling;
    } else {
        p.sibling = sibling;
    }
    if sibling != NONE {
        O::links_mut(&mut nodes[sibling as usize]).prev = prev;
    }
    let l = O::links_mut(&mut nodes[x as usize]);
    l.sibling = NONE;
    l.prev = NONE;
}

/// Combines the child list starting at `first` into one heap (the standard two-pass pairing:
/// pair left to right, then meld the pairs right to left) and returns its root. Uses the
/// children's own `sibling` links as the stack of pairs, so it needs no memory.
fn merge_pairs<N, O: Order<N>, S: Nodes<N> + ?Sized>(nodes: &mut S, first: u32) -> u32 {
    if first == NONE {
        return NONE;
    }
    // First pass: meld children pairwise; push each pair's root on a stack linked by `sibling`.
    let mut stack = NONE;
    let mut cur = first;
    while cur != NONE {
        let a = cur;
        let b = O::links(&nodes[a as usize]).sibling;
        let next = if b == NONE {
            NONE
        } else {
            O::links(&nodes[b as usize]).sibling
        };
        let la = O::links_mut(&mut nodes[a as usize]);
        la.sibling = NONE;
        la.prev = NONE;
        let top = if b == NONE {
            a
        } else {
            let lb = O::links_mut(&mut nodes[b as usize]);
            lb.sibling = NONE;
            lb.prev = NONE;
            link::<N, O, S>(nodes, a, b)
        };
        O::links_mut(&mut nodes[top as usize]).sibling = stack;
        stack = top;
        cur = next;
    }
    // Second pass: meld the pairs from the last one back to the first.
    let mut acc = stack;
    let mut rest = O::links(&nodes[acc as usize]).sibling;
    O::links_mut(&mut nodes[acc as usize]).sibling = NONE;
    while rest != NONE {
        let r = rest;
        rest = O::links(&nodes[r as usize]).sibling;
        O::links_mut(&mut nodes[r as usize]).sibling = NONE;
        acc = link::<N, O, S>(nodes, acc, r);
    }
    acc
}

/// Removes `x` (which is in the heap rooted at `root`) and returns the new root. `x` ends up
/// detached.
#[inline]
pub(crate) fn remove<N, O: Order<N>, S: Nodes<N> + ?Sized>(
    nodes: &mut S,
    root: u32,
    x: u32,
) -> u32 {
    let child = O::links(&nodes[x as usize]).child;
    if x == root {
        *O::links_mut(&mut nodes[x as usize]) = Links::DETACHED;
        return merge_pairs::<N, O, S>(nodes, child);
    }
    cut::<N, O, S>(nodes, x);
    O::links_mut(&mut nodes[x as usize]).child = NONE;
    let sub = merge_pairs::<N, O, S>(nodes, child);
    meld::<N, O, S>(nodes, root, sub)
}

/// Restores the heap order after `x`'s key moved *earlier* (it now precedes at least what it
/// preceded before); returns the new root.
#[inline]
pub(crate) fn decrease<N, O: Order<N>, S: Nodes<N> + ?Sized>(
    nodes: &mut S,
    root: u32,
    x: u32,
) -> u32 {
    if x == root {
        return root;
    }
    cut::<N, O, S>(nodes, x);
    link::<N, O, S>(nodes, root, x)
}
