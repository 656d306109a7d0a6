//! smelt-fusion: the lazy graph, views and shape algebra, and the scheduler
//! that groups graph nodes into kernels and lowers them to kernel IR.

#![warn(missing_docs)]

pub mod attention;
pub mod budget;
pub mod cache;
pub mod collapse;
pub mod dag;
pub mod domain;
pub mod dot;
pub mod fuse;
pub mod graph;
pub mod lower;
pub mod pipeline;
pub mod plan;
pub mod schedule;
pub mod view;

pub use graph::{BufferHandle, GraphLock, Node, NodeRef, Op};
pub use schedule::{
    AttentionFusion, BufferSpec, Fusion, Planning, ScalarSpec, Schedule, ScheduleItem, Target,
};
pub use smelt_codegen::{Axes, Shape, Strides};
pub use view::{ShapeTracker, View};
