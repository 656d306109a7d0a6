//! The pipeline from a graph to a schedule: the schedule cache, else
//! fusion (or one kernel per op), then lowering, then domain collapse.

use crate::graph::{base, topo_order, GraphLock, NodeRef};
use crate::lower::Trackers;
use crate::plan::{lower_plans, plan_unfused};
use crate::schedule::{Fusion, Planning, Schedule};
use rustc_hash::FxHashSet;
use std::sync::Arc;

impl Schedule {
    /// Plans the kernels that realize `targets`, reusing the plan of an
    /// earlier graph of the same structure (same ops, shapes and dtypes;
    /// other data and other constants' values) and the same options from
    /// the schedule cache. Holds the graph lock, so the
    /// hash, the plan and the cache entry all see the same graph even while
    /// other threads realize parts of it.
    pub fn new(targets: &[NodeRef], options: impl Into<Planning>) -> Schedule {
        let options = options.into();
        let lock = GraphLock::acquire();
        let mut seen = FxHashSet::default();
        let bases: Vec<NodeRef> = targets
            .iter()
            .map(base)
            .filter(|b| b.realized().is_none() && b.computes() && seen.insert(b.id()))
            .collect();
        if bases.is_empty() {
            // Everything is computed (a read of a realized tensor): no plan
            // to make or reuse, and none counted.
            return Schedule {
                items: Arc::new(Vec::new()),
                buffers: Vec::new(),
                scalars: Vec::new(),
                results: Vec::new(),
                dag: Arc::new(crate::dag::KernelDag::new(&[], &[], &[])),
            };
        }
        let fp = crate::cache::Fingerprint::new(&bases, options);
        if let Some(s) = crate::cache::lookup(&fp, &bases) {
            return s;
        }
        let s = Schedule::plan_locked(&bases, options, &lock);
        crate::cache::store(&fp, &s);
        s
    }

    /// Plans without the cache (under the graph lock).
    pub fn plan(bases: &[NodeRef], options: impl Into<Planning>) -> Schedule {
        let lock = GraphLock::acquire();
        Schedule::plan_locked(bases, options.into(), &lock)
    }

    fn plan_locked(bases: &[NodeRef], options: Planning, _lock: &GraphLock) -> Schedule {
        let order = topo_order(bases);
        let mut s = match options.fusion {
            Fusion::Off => lower_plans(&plan_unfused(&order), bases, &mut Trackers::default()).0,
            Fusion::On => crate::fuse::plan(&order, bases, &options),
        };
        let items = Arc::get_mut(&mut s.items).expect("a new schedule is not shared");
        for it in items.iter_mut() {
            crate::collapse::collapse(&mut it.kernel);
        }
        debug_assert_eq!(s.dag.check_order(), Ok(()), "kernel order of\n{s}");
        s
    }
}
