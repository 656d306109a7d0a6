//! The schedule cache: a graph with the same structure as an earlier one
//! (same ops, shapes, dtypes and views; other data, other values of its
//! constants) reuses its kernels, so a realize in a loop costs a hash of
//! the graph, not a plan. Constants are kernel parameters
//! ([`ScalarSpec`]): a loop that changes a learning rate or a temperature
//! plans and compiles once.

use crate::graph::{post_order, BufferHandle, NodeRef, Op};
use crate::schedule::{BufferSpec, Planning, ScalarSpec, Schedule, ScheduleItem};
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

/// Plans kept at most; the cache is cleared when full (fuzzers make many).
const CAPACITY: usize = 4096;

/// How many schedules a thread planned and took from the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanCounts {
    /// Schedules planned from scratch (cache misses).
    pub planned: u64,
    /// Schedules reused from the cache (hits).
    pub reused: u64,
}

thread_local! {
    static COUNTS: Cell<PlanCounts> = const {
        Cell::new(PlanCounts {
            planned: 0,
            reused: 0,
        })
    };
}

/// This thread's schedule cache misses and hits so far. Per thread, so a
/// measurement is not disturbed by realizes on other threads.
pub fn counts() -> PlanCounts {
    COUNTS.with(Cell::get)
}

fn count(f: impl FnOnce(&mut PlanCounts)) {
    COUNTS.with(|c| {
        let mut n = c.get();
        f(&mut n);
        c.set(n);
    });
}

/// A graph's structural hash and, in visiting order, its realized inputs
/// and its constants' values.
pub struct Fingerprint {
    key: u64,
    /// `(node id, data)` of every realized leaf, in visiting order.
    leaves: Vec<(u64, BufferHandle)>,
    /// `(node id, value)` of every constant, in visiting order.
    consts: Vec<(u64, f64)>,
}

enum Buf {
    Leaf(usize),
    New(BufferSpec),
}

struct Template {
    items: Arc<Vec<ScheduleItem>>,
    buffers: Vec<Buf>,
    /// The fingerprint position of each schedule scalar's constant.
    scalars: Vec<usize>,
    /// `(index into the targets, buffer)`.
    results: Vec<(usize, usize)>,
    dag: Arc<crate::dag::KernelDag>,
}

fn cache() -> &'static Mutex<HashMap<u64, Arc<Template>>> {
    static CACHE: OnceLock<Mutex<HashMap<u64, Arc<Template>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Fingerprint {
    /// Hashes the planning options and the graph below `targets`
    /// (post-order, sources by position).
    pub fn new(targets: &[NodeRef], options: Planning) -> Fingerprint {
        let mut h = DefaultHasher::new();
        options.hash(&mut h);
        let mut pos: FxHashMap<u64, usize> = FxHashMap::default();
        let mut leaves = Vec::new();
        let mut consts = Vec::new();
        post_order(targets, |n, op, data| {
            (n.shape(), n.dtype()).hash(&mut h);
            match data {
                Some(d) => {
                    (0u8, leaves.len()).hash(&mut h);
                    leaves.push((n.id(), d.clone()));
                }
                None => {
                    if let Op::Const(c) = op {
                        consts.push((n.id(), *c));
                    }
                    hash_op(op, &mut h);
                    for s in op.srcs() {
                        pos[&s.id()].hash(&mut h);
                    }
                }
            }
            pos.insert(n.id(), pos.len());
        });
        for t in targets {
            pos[&t.id()].hash(&mut h);
        }
        Fingerprint {
            key: h.finish(),
            leaves,
            consts,
        }
    }
}

/// Hashes what `op` is, not its sources; a finite constant without its value
/// (bound per realize, see [`Fingerprint::consts`]).
fn hash_op(op: &Op, h: &mut DefaultHasher) {
    match op {
        Op::Buffer => 1u8.hash(h),
        // Finite values are kernel parameters; a non-finite one is
        // compiled in (lower.rs), so its value is part of the structure.
        Op::Const(c) if c.is_finite() => 2u8.hash(h),
        Op::Const(c) => (16u8, non_finite_class(*c)).hash(h),
        Op::View(_, st) => (3u8, st).hash(h),
        Op::Unary(o, _) => (4u8, o).hash(h),
        Op::Binary(o, _, _) => (5u8, o).hash(h),
        Op::Where(..) => 6u8.hash(h),
        Op::Cast(_) => 7u8.hash(h),
        Op::Reduce(o, _, axes) => (8u8, o, axes).hash(h),
        Op::Matmul(..) => 9u8.hash(h),
        Op::Scan(o, _, axis) => (10u8, o, axis).hash(h),
        Op::Gather(_, _, axis) => (11u8, axis).hash(h),
        Op::Iota { start, step } => (12u8, start, step).hash(h),
        Op::Random(d, _) => (13u8, d).hash(h),
        Op::Sort(o, _, axis) => (14u8, o, axis).hash(h),
        Op::ScatterAdd(_, _, _, axis) => (15u8, axis).hash(h),
    }
}

/// Which non-finite value `c` is: `+inf`, `-inf` or NaN (any payload:
/// kernels compile every NaN alike).
fn non_finite_class(c: f64) -> u8 {
    if c.is_nan() {
        0
    } else if c > 0.0 {
        1
    } else {
        2
    }
}

/// The cached schedule for `fp`, bound to this graph's data and constants.
pub fn lookup(fp: &Fingerprint, targets: &[NodeRef]) -> Option<Schedule> {
    let t = cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&fp.key)?
        .clone();
    count(|c| c.reused += 1);
    let buffers = t
        .buffers
        .iter()
        .map(|b| match b {
            Buf::Leaf(i) => BufferSpec::Realized {
                node: fp.leaves[*i].0,
                data: fp.leaves[*i].1.clone(),
            },
            Buf::New(spec) => spec.clone(),
        })
        .collect();
    let scalars = t
        .scalars
        .iter()
        .map(|i| ScalarSpec {
            node: fp.consts[*i].0,
            value: fp.consts[*i].1,
        })
        .collect();
    let results = t
        .results
        .iter()
        .map(|(i, b)| (targets[*i].clone(), *b))
        .collect();
    Some(Schedule {
        items: t.items.clone(),
        buffers,
        scalars,
        results,
        dag: t.dag.clone(),
    })
}

/// Remembers `s`, planned for the graph of `fp`.
pub fn store(fp: &Fingerprint, s: &Schedule) {
    count(|c| c.planned += 1);
    let leaf_pos: FxHashMap<u64, usize> = fp
        .leaves
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (*id, i))
        .collect();
    let buffers = s
        .buffers
        .iter()
        .map(|b| match b {
            BufferSpec::Realized { node, .. } => Buf::Leaf(leaf_pos[node]),
            spec => Buf::New(spec.clone()),
        })
        .collect();
    let const_pos: FxHashMap<u64, usize> = fp
        .consts
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (*id, i))
        .collect();
    let scalars = s.scalars.iter().map(|c| const_pos[&c.node]).collect();
    let results = s
        .results
        .iter()
        .enumerate()
        .map(|(i, (_, b))| (i, *b))
        .collect();
    let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
    if c.len() >= CAPACITY {
        c.clear();
    }
    c.insert(
        fp.key,
        Arc::new(Template {
            items: s.items.clone(),
            buffers,
            scalars,
            results,
            dag: s.dag.clone(),
        }),
    );
}
