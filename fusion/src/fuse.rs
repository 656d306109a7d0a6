//! Fusion rules: which nodes share a kernel.

use crate::graph::NodeRef;
use crate::schedule::{plan_unfused, KernelPlan};

/// Groups `order` (sources first) into kernels that materialize `targets`.
pub fn plan(order: &[NodeRef], _targets: &[NodeRef]) -> Vec<KernelPlan> {
    plan_unfused(order)
}
