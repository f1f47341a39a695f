use super::*;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// A stand-in for per-tenant queues: a count of queued requests per tenant.
struct Queues(Box<[AtomicUsize]>);

impl Queues {
    fn new(tenants: u32) -> Queues {
        Queues((0..tenants).map(|_| AtomicUsize::new(0)).collect())
    }
    fn add(&self, t: u32) {
        self.0[t as usize].fetch_add(1, Ordering::Release);
    }
    /// Takes one request of `t`, if any.
    fn take(&self, t: u32) -> bool {
        self.0[t as usize]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }
    fn has(&self, t: u32) -> bool {
        self.0[t as usize].load(Ordering::Acquire) > 0
    }
}

/// Runs `turn` and every turn it hands on: grant one request of the tenant if it has one (the
/// credit becomes a held cell), end the turn. Returns the cells granted.
fn run(turns: &Turns, queues: &Queues, mut turn: Turn) -> usize {
    let mut granted = 0;
    loop {
        let t = turn.tenant();
        let g = queues.take(t);
        granted += usize::from(g);
        match turns.end_turn(turn, g, || queues.has(t)) {
            Some(next) => turn = next,
            None => return granted,
        }
    }
}

#[test]
fn one_cell_two_tenants_take_turns_in_ring_order() {
    let turns = Turns::new(1, 2);
    let q = Queues::new(2);
    q.add(0);
    q.add(0);
    // Tenant 0 announces with the cell free: the announcer gets the turn at once.
    let turn = turns.announce(0).expect("a free cell and a ready tenant");
    assert_eq!(turn.tenant(), 0);
    assert!(q.take(0));
    // Tenant 1 arrives while tenant 0's turn is running: it waits in the ring.
    q.add(1);
    assert_eq!(turns.announce(1), None);
    assert_eq!(turns.state(1), IN_RING);
    // Tenant 0 still has work: back to the ring's tail, behind tenant 1.
    assert_eq!(turns.end_turn(turn, true, || q.has(0)), None);
    assert_eq!(turns.counters(), (0, 2));
    // The cell comes back: tenant 1's turn (DRR order), then tenant 0's.
    let turn = turns.give_credit().expect("a ready tenant");
    assert_eq!(turn.tenant(), 1);
    assert!(q.take(1));
    assert_eq!(turns.end_turn(turn, true, || q.has(1)), None);
    assert_eq!(turns.state(1), IDLE);
    let turn = turns.give_credit().expect("a ready tenant");
    assert_eq!(turn.tenant(), 0);
    assert!(q.take(0));
    assert_eq!(turns.end_turn(turn, true, || q.has(0)), None);
    assert_eq!(turns.give_credit(), None);
    assert_eq!(turns.counters(), (1, 0));
    assert_eq!((turns.state(0), turns.state(1)), (IDLE, IDLE));
}

#[test]
fn a_turn_that_grants_nothing_returns_its_credit_to_the_next_tenant() {
    let turns = Turns::new(1, 3);
    let q = Queues::new(3);
    // Tenants 0 and 1 announce with no cell free (the cell is taken by a grant first).
    q.add(2);
    let t2 = turns.announce(2).unwrap();
    assert!(q.take(2));
    q.add(0);
    q.add(1);
    assert_eq!(turns.announce(0), None);
    assert_eq!(turns.announce(1), None);
    assert_eq!(turns.end_turn(t2, true, || q.has(2)), None);
    // Tenant 0's request is withdrawn before its turn: the turn finds nothing and hands the
    // credit on to tenant 1 in the same call.
    assert!(q.take(0));
    let t0 = turns.give_credit().unwrap();
    assert_eq!(t0.tenant(), 0);
    let t1 = turns
        .end_turn(t0, false, || q.has(0))
        .expect("the credit goes on to the ready tenant");
    assert_eq!(t1.tenant(), 1);
    assert_eq!(run(&turns, &q, t1), 1);
    assert_eq!(turns.counters(), (0, 0));
}

#[test]
fn a_producer_racing_the_end_of_a_turn_is_seen_by_the_owner() {
    let turns = Turns::new(1, 1);
    let q = Queues::new(1);
    q.add(0);
    let turn = turns.announce(0).unwrap();
    assert!(q.take(0));
    // While the owner decides there is no more work, a producer adds and announces.
    let mut looked = 0;
    let next = turns.end_turn(turn, true, || {
        looked += 1;
        if looked == 1 {
            q.add(0);
            assert_eq!(turns.announce(0), None);
            assert_eq!(turns.state(0), OWNED_DIRTY);
            false
        } else {
            q.has(0)
        }
    });
    // The owner's closing CAS failed on the mark, it looked again and requeued the tenant.
    assert_eq!(looked, 2);
    assert_eq!(next, None);
    assert_eq!(turns.state(0), IN_RING);
    assert_eq!(turns.counters(), (0, 1));
    let turn = turns.give_credit().unwrap();
    assert_eq!(run(&turns, &q, turn), 1);
    assert_eq!(turns.state(0), IDLE);
}

/// Threads produce requests for many tenants and run every turn they are handed; each grant
/// holds a cell that the granting thread releases later. Conservation: every request is granted
/// exactly once, and at the end every credit is back, no tenant is ready and every tenant is
/// idle. At no point do `FREE > 0` and `READY > 0` hold together.
fn stress(cells: u32, tenants: u32, threads: usize, per_thread: usize) {
    let turns = Arc::new(Turns::new(cells, tenants));
    let q = Arc::new(Queues::new(tenants));
    let granted = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|k| {
            let (turns, q, granted) = (turns.clone(), q.clone(), granted.clone());
            std::thread::spawn(move || {
                let mut held = 0usize;
                for i in 0..per_thread {
                    let t = ((k * 7 + i * 13) % tenants as usize) as u32;
                    q.add(t);
                    if let Some(turn) = turns.announce(t) {
                        held += run(&turns, &q, turn);
                    }
                    let (free, ready) = turns.counters();
                    assert!(free == 0 || ready == 0, "a free cell and a ready tenant");
                    // Release a held cell every other step, or whenever all are held here.
                    if held > 0 && (i % 2 == 1 || held == cells as usize) {
                        held -= 1;
                        granted.fetch_add(1, Ordering::Relaxed);
                        if let Some(turn) = turns.give_credit() {
                            held += run(&turns, &q, turn);
                        }
                    }
                }
                while held > 0 {
                    held -= 1;
                    granted.fetch_add(1, Ordering::Relaxed);
                    if let Some(turn) = turns.give_credit() {
                        held += run(&turns, &q, turn);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(granted.load(Ordering::Relaxed), threads * per_thread);
    assert_eq!(turns.counters(), (u64::from(cells), 0));
    for t in 0..tenants {
        assert!(!q.has(t), "tenant {t} still has work");
        assert_eq!(turns.state(t), IDLE, "tenant {t}");
    }
}

const PER: usize = if cfg!(miri) { 30 } else { 20_000 };

#[test]
fn multi_thread_turns_conserve_requests_and_credits() {
    stress(2, 5, 4, PER);
}

#[test]
fn multi_thread_turns_one_cell_one_tenant() {
    stress(1, 1, 3, PER);
}

#[test]
fn multi_thread_turns_many_tenants() {
    stress(8, if cfg!(miri) { 50 } else { 10_000 }, 4, PER);
}

/// SPEC F24 at the turn protocol: a thread paused while it owns a tenant's turn (and one credit)
/// delays that tenant only; the other tenants' requests keep being granted on the other cells.
#[cfg(feature = "pause-points")]
#[test]
fn f24_turns_owner_paused_delays_only_its_tenant() {
    use crate::raw::pause::Gate;
    use std::time::Duration;
    let turns = Arc::new(Turns::new(2, 3));
    let q = Arc::new(Queues::new(3));
    let gate = Gate::new("ring.turn_owned");
    q.add(0);
    let paused = {
        let (turns, q, gate) = (turns.clone(), q.clone(), gate.clone());
        std::thread::spawn(move || {
            gate.arm();
            let turn = turns.announce(0).expect("a free cell");
            run(&turns, &q, turn)
        })
    };
    assert!(gate.wait_parked(Duration::from_secs(10)));
    assert_eq!(turns.state(0), OWNED);
    // Tenants 1 and 2 are granted, one after the other, on the remaining cell.
    for t in [1, 2, 1, 2] {
        q.add(t);
        let turn = turns.announce(t).expect("the other cell is free");
        assert_eq!(turn.tenant(), t);
        assert_eq!(run(&turns, &q, turn), 1);
        assert_eq!(turns.give_credit(), None);
    }
    // Tenant 0's second request waits for its owner, which is paused: no one else may take it.
    q.add(0);
    assert_eq!(turns.announce(0), None);
    assert_eq!(turns.state(0), OWNED_DIRTY);
    gate.release();
    // The owner grants the first request, sees the mark, requeues the tenant; the free cell
    // meets it and the owner grants the second too.
    assert_eq!(paused.join().unwrap(), 2);
    assert!(!q.has(0));
    assert_eq!(turns.counters(), (0, 0));
}

/// SPEC F24 at the turn protocol: a thread paused after taking a credit and a ready unit, before
/// popping the ring, holds one credit; the tenant it would have popped is popped by the next
/// taker, and the other cells keep serving.
#[cfg(feature = "pause-points")]
#[test]
fn f24_turns_taker_paused_before_the_pop_holds_one_credit_only() {
    use crate::raw::pause::Gate;
    use std::time::Duration;
    let turns = Arc::new(Turns::new(0, 2));
    let q = Arc::new(Queues::new(2));
    for t in [0, 1] {
        q.add(t);
        assert_eq!(turns.announce(t), None);
    }
    let gate = Gate::new("ring.credit_taken");
    let paused = {
        let (turns, q, gate) = (turns.clone(), q.clone(), gate.clone());
        std::thread::spawn(move || {
            gate.arm();
            let turn = turns.give_credit().expect("a ready tenant");
            let tenant = turn.tenant();
            (tenant, run(&turns, &q, turn))
        })
    };
    assert!(gate.wait_parked(Duration::from_secs(10)));
    assert_eq!(turns.counters(), (0, 1));
    // A second credit meets the other ready unit and pops tenant 0, the ring's head, which the
    // paused thread would have taken.
    let turn = turns.give_credit().expect("a ready tenant");
    assert_eq!(turn.tenant(), 0);
    assert_eq!(run(&turns, &q, turn), 1);
    gate.release();
    assert_eq!(paused.join().unwrap(), (1, 1));
    assert_eq!(turns.counters(), (0, 0));
}
