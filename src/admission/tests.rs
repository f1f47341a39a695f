use super::*;
use crate::clock::ManualClock;
use crate::error::Reason;
use proptest::prelude::*;

fn spec(name: &'static str, explicit_only: bool, limits: Limits) -> ClassSpec {
    ClassSpec {
        name,
        explicit_only,
        limits,
    }
}

fn ledger(classes: Vec<ClassSpec>, max_tenants: u32, tenant_limits: Limits) -> Ledger {
    Ledger::new(LedgerConfig::new(classes, max_tenants).tenant_limits(tenant_limits)).unwrap()
}

fn req(id: u64, tenant: u32) -> AdmissionRequest {
    AdmissionRequest::new(RequestId(id), TenantId(tenant))
}

fn reason(r: Result<Permit>) -> (Code, &'static str) {
    let e = r.unwrap_err();
    (e.code(), e.reason().as_str())
}

fn one(concurrency: u32) -> Limits {
    Limits {
        concurrency,
        ..Limits::UNLIMITED
    }
}

#[test]
fn ledger_config_is_validated() {
    let bad = |classes: Vec<ClassSpec>, max_tenants| {
        Ledger::new(LedgerConfig::new(classes, max_tenants)).unwrap_err()
    };
    assert_eq!(bad(vec![], 1), Error::configuration("classes"));
    assert_eq!(
        bad(vec![ClassSpec::new("a"), ClassSpec::new("a")], 1),
        Error::configuration("classes.name")
    );
    assert_eq!(
        bad(vec![ClassSpec::new("a")], 0),
        Error::configuration("max_tenants")
    );
    let l = ledger(
        vec![ClassSpec::new("a"), ClassSpec::new("b")],
        1,
        Limits::UNLIMITED,
    );
    assert_eq!(l.class_count(), 2);
    assert_eq!(l.class_name(ClassId(1)), Some("b"));
    assert_eq!(l.class_name(ClassId(2)), None);
    assert_eq!(l.class_by_name("b"), Some(ClassId(1)));
}

#[test]
fn admit_refuses_invalid_arguments() {
    let l = ledger(vec![ClassSpec::new("a")], 2, Limits::UNLIMITED);
    let inv = |r| (Code::InvalidArgument, r);
    assert_eq!(reason(l.admit(req(1, 0).weight(0))), inv("weight"));
    assert_eq!(reason(l.admit(req(1, 2))), inv("tenant"));
    assert_eq!(reason(l.admit(req(1, 0).class(ClassId(1)))), inv("class"));
    let empty = ClassChoice::OneOf(ArrayVec::new());
    assert_eq!(reason(l.admit(req(1, 0).classes(empty))), inv("class"));
    assert_eq!(
        ClassChoice::one_of(&[ClassId(0); MAX_CLASS_CHOICES + 1]).unwrap_err(),
        Error::new(Code::InvalidArgument, Reason::Class)
    );
    assert!(l.usage().is_zero());
}

#[test]
fn f04_foreign_permit_is_detectable() {
    let config = || LedgerConfig::new(vec![ClassSpec::new("a")], 1);
    let a = Ledger::new(config()).unwrap();
    let b = Ledger::new(config()).unwrap();
    let p = a.admit(req(1, 0)).unwrap();
    assert!(p.is_from(&a));
    assert!(p.is_from(&a.clone()));
    assert!(!p.is_from(&b));
    assert_eq!(p.ledger_id(), a.id());
    assert_ne!(a.id(), b.id());
    let e = p.into_execution();
    assert!(e.is_from(&a) && !e.is_from(&b));
}

#[test]
fn f05_permit_carries_original_deadline() {
    let clock = std::sync::Arc::new(ManualClock::new());
    clock.advance(Duration::from_nanos(100));
    let l = Ledger::with_clock(
        LedgerConfig::new(vec![ClassSpec::new("a")], 1),
        clock.clone(),
    )
    .unwrap();
    let p = l
        .admit(
            req(5, 0)
                .deadline(Duration::from_nanos(50))
                .priority(7)
                .weight(3)
                .memory_units(4),
        )
        .unwrap();
    clock.advance(Duration::from_nanos(1000));
    assert_eq!(p.deadline(), Some(150));
    assert_eq!(
        (p.id(), p.tenant(), p.class(), p.priority(), p.weight()),
        (RequestId(5), TenantId(0), ClassId(0), 7, 3)
    );
    assert_eq!((p.cpu_units(), p.memory_units()), (0, 4));
    let e = p.into_execution();
    assert_eq!(e.deadline(), Some(150));
    assert_eq!((e.priority(), e.weight(), e.memory_units()), (7, 3, 4));
    assert_eq!(l.admit(req(6, 0)).unwrap().deadline(), None);
    let far = l.admit(req(7, 0).deadline(Duration::MAX)).unwrap();
    assert_eq!(far.deadline(), Some(u64::MAX));
}

#[test]
fn f50_limit_exceeded_reserves_nothing() {
    // A limit that admits exactly one request of (cpu 3, memory 3) per resource.
    let tight = |kind: usize| {
        let mut l = Limits::UNLIMITED;
        match kind {
            QUEUE_SLOTS => l.queue_slots = 1,
            CONCURRENCY => l.concurrency = 1,
            CPU_UNITS => l.cpu_units = 5,
            _ => l.memory_units = 5,
        }
        l
    };
    for kind in 0..KINDS {
        for tenant_side in [true, false] {
            let (tenant_limits, class_limits) = if tenant_side {
                (tight(kind), Limits::UNLIMITED)
            } else {
                (Limits::UNLIMITED, tight(kind))
            };
            let l = ledger(vec![spec("a", false, class_limits)], 2, tenant_limits);
            let r = |id| req(id, 0).cpu_units(3).memory_units(3);
            let held = l.admit(r(1)).unwrap();
            let before = l.usage();
            let expected = if tenant_side {
                TENANT_REASONS[kind].as_str()
            } else {
                CLASS_REASONS[kind].as_str()
            };
            assert_eq!(reason(l.admit(r(2))), (Code::ResourceExhausted, expected));
            assert_eq!(l.usage(), before, "{expected} left something reserved");
            drop(held);
            assert!(l.usage().is_zero());
            drop(l.admit(r(3)).unwrap());
        }
    }
}

#[test]
fn layout_packs_a_prefix_of_the_resources_that_fit() {
    let packed = |q: u32, c: u32, cpu: u64, mem: u64| {
        let l = Layout::new([q.into(), c.into(), cpu, mem]);
        (l.packed, l.shift)
    };
    // Unlimited: queue slots and concurrency share the word, CPU and memory are apart.
    assert_eq!(
        packed(u32::MAX, u32::MAX, u64::MAX, u64::MAX),
        (2, [0, 32, 0, 0])
    );
    // Small limits: all four in one word, each field as wide as its limit.
    assert_eq!(packed(3, 4, 8, 255), (4, [0, 2, 5, 9]));
    // CPU does not fit: memory is not packed either (a prefix only, so refusals keep their
    // order), although it would fit.
    assert_eq!(packed(1000, 1000, u64::MAX, 1).0, 2);
    assert_eq!(packed(u32::MAX, 0xffff, 0xffff, 1).0, 3);
    assert_eq!(packed(0, 0, u64::MAX, 1).0, 3);
}

#[test]
fn f50_packed_fields_fill_to_their_limit_without_carry() {
    // Every field of the tenant's word exactly full (limits 2^k - 1; the class's CPU apart):
    // admitting to the limit and one unit past it must refuse the right resource, never carry
    // into the next field, and refund to zero.
    let limits = Limits {
        queue_slots: 3,
        concurrency: 3,
        cpu_units: 15,
        memory_units: 255,
    };
    let class = Limits {
        cpu_units: u64::MAX - 1,
        ..limits
    };
    let l = ledger(vec![spec("a", false, class)], 1, limits);
    let r = |id, cpu, mem| req(id, 0).cpu_units(cpu).memory_units(mem);
    let a = l.admit(r(1, 15, 200)).unwrap();
    let b = l.admit(r(2, 0, 55)).unwrap();
    let tenant = l.usage().tenants[0];
    assert_eq!(
        (
            tenant.queue_slots,
            tenant.concurrency,
            tenant.cpu_units,
            tenant.memory_units
        ),
        (2, 2, 15, 255)
    );
    let refused = |cpu, mem| reason(l.admit(r(9, cpu, mem)));
    assert_eq!(refused(1, 0).1, "tenant-cpu-units");
    assert_eq!(refused(0, 1).1, "tenant-memory-units");
    assert_eq!(refused(16, 256).1, "tenant-cpu-units");
    let c = l.admit(r(3, 0, 0)).unwrap();
    assert_eq!(refused(0, 0).1, "tenant-queue-slots");
    let c = c.into_execution();
    assert_eq!(refused(0, 0).1, "tenant-concurrency");
    assert_eq!(l.usage().tenants[0].queue_slots, 2);
    drop((a, b, c));
    assert!(l.usage().is_zero(), "{:?}", l.usage());
}

#[test]
fn f51_permit_refunds_exactly_once() {
    let l = ledger(
        vec![spec("a", false, Limits::UNLIMITED)],
        1,
        Limits::UNLIMITED,
    );
    let r = || req(1, 0).cpu_units(2).memory_units(9);
    let full = Usage {
        queue_slots: 1,
        concurrency: 1,
        cpu_units: 2,
        memory_units: 9,
    };

    let p = l.admit(r()).unwrap();
    assert_eq!(l.usage().tenants[0], full);
    assert_eq!(l.usage().classes[0], full);
    drop(p);
    assert!(l.usage().is_zero());

    let e = l.admit(r()).unwrap().into_execution();
    drop(e);
    assert!(l.usage().is_zero());
}

#[test]
fn f45_into_execution_returns_only_queue_slot() {
    let l = ledger(
        vec![spec("a", false, Limits::UNLIMITED.queue_slots(1))],
        1,
        Limits::UNLIMITED,
    );
    let e = l
        .admit(req(1, 0).cpu_units(4).memory_units(5))
        .unwrap()
        .into_execution();
    let held = Usage {
        queue_slots: 0,
        concurrency: 1,
        cpu_units: 4,
        memory_units: 5,
    };
    assert_eq!(l.usage().tenants[0], held);
    assert_eq!(l.usage().classes[0], held);
    // The queue slot is free again: a second request may queue.
    let p = l.admit(req(2, 0)).unwrap();
    drop(e);
    drop(p);
    assert!(l.usage().is_zero());
}

#[test]
fn f52_smallest_class_with_capacity() {
    let l = ledger(
        vec![
            spec("small", false, one(1)),
            spec("medium", false, one(1)),
            spec("large", false, one(1)),
        ],
        1,
        Limits::UNLIMITED,
    );
    let a = l.admit(req(1, 0)).unwrap();
    let b = l.admit(req(2, 0)).unwrap();
    assert_eq!((a.class(), b.class()), (ClassId(0), ClassId(1)));
    // Listed out of order: still tried smallest first.
    let listed = ClassChoice::one_of(&[ClassId(2), ClassId(1), ClassId(2)]).unwrap();
    let c = l.admit(req(3, 0).classes(listed.clone())).unwrap();
    assert_eq!(c.class(), ClassId(2));
    // All full: the error is the first candidate's (here all say class-concurrency).
    assert_eq!(
        reason(l.admit(req(4, 0))),
        (Code::ResourceExhausted, "class-concurrency")
    );
    drop(a);
    assert_eq!(l.admit(req(5, 0)).unwrap().class(), ClassId(0));
    drop((b, c));
    assert!(l.usage().is_zero());
}

#[test]
fn f52_all_refused_reports_first_candidate() {
    let l = ledger(
        vec![
            spec("a", false, Limits::UNLIMITED.queue_slots(0)),
            spec("b", false, one(0)),
        ],
        1,
        Limits::UNLIMITED,
    );
    assert_eq!(
        reason(l.admit(req(1, 0))),
        (Code::ResourceExhausted, "class-queue-slots")
    );
    let listed = ClassChoice::one_of(&[ClassId(1), ClassId(0)]).unwrap();
    assert_eq!(
        reason(l.admit(req(1, 0).classes(listed))),
        (Code::ResourceExhausted, "class-queue-slots")
    );
    assert!(l.usage().is_zero());
}

#[test]
fn f52_explicit_only_only_when_named() {
    let l = ledger(
        vec![
            spec("gpu", true, Limits::UNLIMITED),
            spec("cpu", false, Limits::UNLIMITED),
        ],
        1,
        Limits::UNLIMITED,
    );
    assert_eq!(l.admit(req(1, 0)).unwrap().class(), ClassId(1));
    assert_eq!(
        l.admit(req(2, 0).class(ClassId(0))).unwrap().class(),
        ClassId(0)
    );
    let both = ClassChoice::one_of(&[ClassId(1), ClassId(0)]).unwrap();
    assert_eq!(
        l.admit(req(3, 0).classes(both)).unwrap().class(),
        ClassId(0)
    );

    let only_explicit = ledger(
        vec![spec("gpu", true, Limits::UNLIMITED)],
        1,
        Limits::UNLIMITED,
    );
    assert_eq!(
        reason(only_explicit.admit(req(1, 0))),
        (Code::InvalidArgument, "class")
    );
    assert!(only_explicit.usage().is_zero());
}

/// A step of the conservation property test.
#[derive(Debug, Clone)]
enum Op {
    Admit {
        tenant: u32,
        classes: Option<Vec<u16>>,
        cpu: u64,
        mem: u64,
    },
    Drop(usize),
    IntoExecution(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (
            0..3u32,
            proptest::option::of(proptest::collection::vec(0..3u16, 1..4)),
            0..4u64,
            0..4u64
        )
            .prop_map(|(tenant, classes, cpu, mem)| Op::Admit { tenant, classes, cpu, mem }),
        2 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::IntoExecution),
    ]
}

/// What a live permit holds, in the model.
enum Held {
    Queued(Permit),
    Executing(ExecutionPermit),
}

/// The sequential model: plain counters, the same rules.
struct Model {
    tenant_limits: [u64; KINDS],
    class_limits: Vec<[u64; KINDS]>,
    explicit: Vec<bool>,
    tenants: Vec<[u64; KINDS]>,
    classes: Vec<[u64; KINDS]>,
}

impl Model {
    fn fits(held: &[u64; KINDS], add: &[u64; KINDS], limits: &[u64; KINDS]) -> Option<usize> {
        (0..KINDS).find(|&k| held[k] + add[k] > limits[k])
    }

    fn admit(&mut self, tenant: usize, candidates: &[usize], add: [u64; KINDS]) -> Result<usize> {
        if let Some(k) = Self::fits(&self.tenants[tenant], &add, &self.tenant_limits) {
            return Err(Error::new(Code::ResourceExhausted, TENANT_REASONS[k]));
        }
        let mut first = None;
        for &c in candidates {
            match Self::fits(&self.classes[c], &add, &self.class_limits[c]) {
                None => {
                    for (k, a) in add.iter().enumerate() {
                        self.tenants[tenant][k] += a;
                        self.classes[c][k] += a;
                    }
                    return Ok(c);
                }
                Some(k) => {
                    first.get_or_insert(k);
                }
            }
        }
        Err(Error::new(
            Code::ResourceExhausted,
            CLASS_REASONS[first.unwrap()],
        ))
    }

    fn refund(
        &mut self,
        tenant: usize,
        class: usize,
        sub: [u64; KINDS],
        kinds: core::ops::Range<usize>,
    ) {
        for k in kinds {
            self.tenants[tenant][k] -= sub[k];
            self.classes[class][k] -= sub[k];
        }
    }

    fn usage(&self) -> LedgerUsage {
        let u = |a: &[u64; KINDS]| Usage {
            queue_slots: a[0],
            concurrency: a[1],
            cpu_units: a[2],
            memory_units: a[3],
        };
        LedgerUsage {
            classes: self.classes.iter().map(u).collect(),
            tenants: self.tenants.iter().map(u).collect(),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

    #[test]
    fn f51_conservation_matches_model(ops in proptest::collection::vec(op(), 1..64)) {
        let tenant_limits = Limits { queue_slots: 3, concurrency: 4, cpu_units: 8, memory_units: 9 };
        let class_limits = [
            Limits { queue_slots: 2, concurrency: 3, cpu_units: 6, memory_units: u64::MAX },
            Limits { queue_slots: 4, concurrency: 2, cpu_units: u64::MAX, memory_units: 5 },
            Limits { queue_slots: 3, concurrency: 3, cpu_units: 7, memory_units: 7 },
        ];
        let explicit = [false, false, true];
        let l = ledger(
            (0..3).map(|i| spec(["a", "b", "c"][i], explicit[i], class_limits[i])).collect(),
            3,
            tenant_limits,
        );
        let mut model = Model {
            tenant_limits: tenant_limits.as_array(),
            class_limits: class_limits.iter().map(Limits::as_array).collect(),
            explicit: explicit.to_vec(),
            tenants: vec![[0; KINDS]; 3],
            classes: vec![[0; KINDS]; 3],
        };
        let mut live: Vec<Held> = Vec::new();
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Admit { tenant, classes, cpu, mem } => {
                    let mut r = req(n as u64, tenant).cpu_units(cpu).memory_units(mem);
                    let candidates: Vec<usize> = match &classes {
                        None => (0..3).filter(|&c| !model.explicit[c]).collect(),
                        Some(list) => {
                            r = r.classes(ClassChoice::one_of(&list.iter().map(|&c| ClassId(c)).collect::<Vec<_>>()).unwrap());
                            let mut v: Vec<usize> = list.iter().map(|&c| usize::from(c)).collect();
                            v.sort_unstable();
                            v.dedup();
                            v
                        }
                    };
                    let expected = model.admit(tenant as usize, &candidates, [1, 1, cpu, mem]);
                    match (l.admit(r), expected) {
                        (Ok(p), Ok(c)) => {
                            prop_assert_eq!(p.class(), ClassId(c as u16));
                            live.push(Held::Queued(p));
                        }
                        (Err(e), Err(m)) => prop_assert_eq!(e, m),
                        (got, want) => prop_assert!(false, "ledger {:?} vs model {:?}", got.map(|p| p.class()), want),
                    }
                }
                Op::Drop(i) if !live.is_empty() => {
                    let held = live.swap_remove(i % live.len());
                    let (t, c, sub, kinds) = match &held {
                        Held::Queued(p) => (p.tenant(), p.class(), [1, 1, p.cpu_units(), p.memory_units()], 0..KINDS),
                        Held::Executing(e) => (e.tenant(), e.class(), [1, 1, e.cpu_units(), e.memory_units()], 1..KINDS),
                    };
                    drop(held);
                    model.refund(t.0 as usize, usize::from(c.0), sub, kinds);
                }
                Op::IntoExecution(i) if !live.is_empty() => {
                    let i = i % live.len();
                    if let Held::Queued(_) = live[i] {
                        let Held::Queued(p) = live.swap_remove(i) else { unreachable!() };
                        let (t, c) = (p.tenant(), p.class());
                        live.push(Held::Executing(p.into_execution()));
                        model.refund(t.0 as usize, usize::from(c.0), [1, 0, 0, 0], 0..1);
                    }
                }
                Op::Drop(_) | Op::IntoExecution(_) => {}
            }
            prop_assert_eq!(l.usage(), model.usage());
        }
        drop(live);
        prop_assert!(l.usage().is_zero());
    }
}

/// A small deterministic generator for the churn threads.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn multi_thread_churn_conserves_and_never_exceeds() {
    const THREADS: usize = 4;
    const OPS: usize = if cfg!(miri) { 200 } else { 50_000 };
    let tenant_limits = Limits {
        queue_slots: 3,
        concurrency: 4,
        cpu_units: 10,
        memory_units: 12,
    };
    let class_limits = Limits {
        queue_slots: 4,
        concurrency: 5,
        cpu_units: 12,
        memory_units: 10,
    };
    let l = ledger(
        vec![
            spec("a", false, class_limits),
            spec("b", false, class_limits),
            spec("c", true, class_limits),
        ],
        2,
        tenant_limits,
    );
    let stop = crate::sync::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Relaxed: a stop flag; the scope join orders everything else.
            while !stop.load(Ordering::Relaxed) {
                let u = l.usage();
                assert!(u.tenants.iter().all(|t| t.within(&tenant_limits)), "{u:?}");
                assert!(u.classes.iter().all(|c| c.within(&class_limits)), "{u:?}");
                std::thread::yield_now();
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let l = &l;
                s.spawn(move || {
                    let mut rng = 0x9E37_79B9_7F4A_7C15_u64 ^ (t as u64 + 1);
                    let mut queued: Vec<Permit> = Vec::with_capacity(16);
                    let mut running: Vec<ExecutionPermit> = Vec::with_capacity(16);
                    for n in 0..OPS {
                        let r = xorshift(&mut rng);
                        match r % 5 {
                            0 | 1 => {
                                let classes = if r & 0x100 != 0 {
                                    ClassChoice::Any
                                } else {
                                    ClassChoice::one_of(&[ClassId((r >> 9) as u16 % 3)]).unwrap()
                                };
                                let req = req(n as u64, (r >> 12) as u32 % 2)
                                    .classes(classes)
                                    .cpu_units((r >> 16) % 4)
                                    .memory_units((r >> 20) % 4);
                                if let Ok(p) = l.admit(req) {
                                    queued.push(p);
                                }
                            }
                            2 if !queued.is_empty() => {
                                let i = (r >> 8) as usize % queued.len();
                                running.push(queued.swap_remove(i).into_execution());
                            }
                            3 if !queued.is_empty() => {
                                queued.swap_remove((r >> 8) as usize % queued.len());
                            }
                            _ if !running.is_empty() => {
                                running.swap_remove((r >> 8) as usize % running.len());
                            }
                            _ => {}
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        // Relaxed: see the sampler.
        stop.store(true, Ordering::Relaxed);
    });
    assert!(l.usage().is_zero(), "{:?}", l.usage());
}
