//! The `Tensor` type: a cheap handle to a node of the lazy graph.

use crate::runtime;
use crate::{DType, Device, Element, Result};
use smelt_codegen::Shape;
use smelt_fusion::{Fusion, Node, NodeRef, Op, Planning, Schedule, ShapeTracker, Target};
use std::sync::Arc;
use std::time::Instant;

/// An n-dimensional array whose ops are recorded, not run, until
/// [`Tensor::realize`] or a read such as [`Tensor::to_vec`].
///
/// Cloning is cheap (a reference count); tensors are immutable values.
///
/// ```
/// use smelt::{Device, DType, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Device::Cpu);
/// let y = (&x * 2.0 + 1.0).sum(1);
/// assert_eq!(y.to_vec::<f32>().unwrap(), vec![8.0, 16.0]);
/// ```
#[derive(Clone)]
pub struct Tensor {
    pub(crate) node: NodeRef,
    pub(crate) device: Device,
}

impl Tensor {
    pub(crate) fn from_node(node: NodeRef, device: Device) -> Tensor {
        Tensor { node, device }
    }

    /// A new tensor computed by `op` on this tensor's device.
    pub(crate) fn derive(&self, op: Op, shape: impl Into<Shape>, dtype: DType) -> Tensor {
        Tensor::from_node(Node::new(op, shape, dtype), self.device)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.node.shape()
    }

    /// Number of axes.
    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.node.numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.node.dtype()
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The graph node (for inspection and the scheduler).
    pub fn node(&self) -> &NodeRef {
        &self.node
    }

    /// True once the data this tensor reads has been computed.
    pub fn is_realized(&self) -> bool {
        let base = smelt_fusion::graph::base(&self.node);
        base.realized().is_some() || matches!(base.op(), Op::Const(_))
    }

    /// Computes this tensor with the fusion mode from `SMELT_FUSION`.
    /// The result is kept: realizing again, or using the tensor in a later
    /// graph, computes nothing. A view of a computed tensor realizes the
    /// tensor below it and stays a view.
    pub fn realize(&self) -> Result<&Tensor> {
        realize_all(&[self], Fusion::from_env())?;
        Ok(self)
    }

    /// [`Tensor::realize`] with an explicit fusion mode, or planning
    /// options (`Planning::from(Fusion::On).attention(AttentionFusion::On)`
    /// forces the fused attention kernel); the target is always this
    /// tensor's device.
    pub fn realize_with(&self, options: impl Into<Planning>) -> Result<&Tensor> {
        realize_all(&[self], options)?;
        Ok(self)
    }

    /// The kernels [`Tensor::realize`] would run, without running them.
    /// It prints as a table (`Display`) and draws as a Graphviz graph with
    /// [`Schedule::to_dot`]: one cluster per kernel with its kind, domain,
    /// bytes and fused ops, buffers as edges (see also [`crate::viz`] and
    /// `SMELT_VIZ`).
    ///
    /// ```
    /// use smelt::{Device, DType, Fusion, Tensor};
    /// let x = Tensor::ones([4, 8], DType::F32, &Device::Cpu);
    /// let y = (&x + 1.0).exp();
    /// assert_eq!(y.schedule(Fusion::Off).items.len(), 2);
    ///
    /// let s = x.softmax(-1).schedule(Fusion::On);
    /// println!("{s}"); // 1 kernel(s), ... multireduce ops [max, sub, exp, sum, div] ...
    /// let dot = s.to_dot(); // `dot -Tsvg` draws it
    /// assert!(dot.contains("subgraph cluster_k0"));
    /// assert!(dot.contains("max → sub → exp → sum → div"));
    /// ```
    pub fn schedule(&self, options: impl Into<Planning>) -> Schedule {
        // A GPU that fails to start fails the realize; planning for it
        // assumes an unknown memory size.
        let target = runtime::target(self.device).unwrap_or(Target::Gpu { memory: 0 });
        Schedule::new(std::slice::from_ref(&self.node), options.into().on(target))
    }

    /// A copy laid out contiguously (a kernel when realized).
    pub fn contiguous(&self) -> Tensor {
        self.derive(
            Op::Cast(self.node.clone()),
            self.shape().to_vec(),
            self.dtype(),
        )
    }

    /// The elements in row-major order, converted to `T`.
    ///
    /// Realizes the tensor itself, so later reads and graphs reuse the
    /// result (a view realizes the tensor below it, then copies the view).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let dt = self.dtype();
        let bytes = self.contiguous_bytes()?;
        let mut out = smelt_codegen::host_alloc::vec_with_capacity(self.numel())?;
        out.extend((0..self.numel()).map(|i| T::read(dt, &bytes, i)));
        Ok(out)
    }

    /// The single element of a tensor with one element.
    ///
    /// # Panics
    /// If the tensor does not have exactly one element.
    pub fn to_scalar<T: Element>(&self) -> Result<T> {
        assert!(
            self.numel() == 1,
            "to_scalar: tensor of shape {:?} has {} elements, expected 1",
            self.shape(),
            self.numel()
        );
        Ok(self.to_vec::<T>()?[0])
    }

    /// Host bytes of the tensor in row-major order.
    ///
    /// Realizes the tensor itself (so a second read computes nothing),
    /// then downloads its buffer, or for a view that is not a plain prefix
    /// of its buffer, a contiguous copy of the view (one copy kernel over
    /// realized data).
    pub(crate) fn contiguous_bytes(&self) -> Result<Vec<u8>> {
        realize_all(&[self], Fusion::from_env())?;
        let plain = match self.node.op_and_data() {
            (_, Some(buf)) => Some(buf),
            (Op::View(src, st), None) if st.is_plain() && src.numel() == self.numel() => {
                src.realized()
            }
            _ => None,
        };
        let buf = match plain {
            Some(buf) => buf,
            None => {
                let copy = self.contiguous();
                copy.realize()?;
                copy.node.realized().ok_or_else(|| {
                    crate::Error::Runtime("a realized copy holds no buffer".into())
                })?
            }
        };
        let len = self.numel() * self.dtype().size();
        runtime::download(&buf, len, self.device)
    }

    /// Moves the tensor to `device` (realizing it first).
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if *device == self.device {
            return Ok(self.clone());
        }
        let bytes = self.contiguous_bytes()?;
        let buf = runtime::upload(bytes, *device)?;
        Ok(Tensor::from_node(
            Node::buffer(buf, self.shape().to_vec(), self.dtype()),
            *device,
        ))
    }

    /// A view node over this tensor's source with `f` applied to its
    /// shape tracker (views of views collapse into one node).
    pub(crate) fn view_with(&self, f: impl FnOnce(&ShapeTracker) -> ShapeTracker) -> Tensor {
        let (src, st) = match &*self.node.op_ref() {
            Op::View(src, st) => (src.clone(), st.clone()),
            _ => (
                self.node.clone(),
                Arc::new(ShapeTracker::contiguous(self.shape())),
            ),
        };
        let st = Arc::new(f(&st));
        self.derive(Op::View(src, st.clone()), st.shape(), self.dtype())
    }
}

/// Realizes several tensors in one schedule, so they share kernels,
/// planned with `options` for their device.
///
/// Safe to call from several threads on overlapping graphs: each plans
/// from a consistent graph, and a tensor another thread realized first
/// keeps that thread's result.
///
/// # Panics
/// If the tensors are on different devices.
pub fn realize_all(tensors: &[&Tensor], options: impl Into<Planning>) -> Result<()> {
    let Some(first) = tensors.first() else {
        return Ok(());
    };
    let device = first.device;
    for t in tensors {
        assert!(
            t.device == device,
            "realize_all: tensors on {} and {}",
            device,
            t.device
        );
    }
    // Created data is placed on its device by the first realize that
    // reaches it (here for the targets, in the runtimes for inputs).
    for t in tensors {
        let base = smelt_fusion::graph::base(&t.node);
        if let Some(buf) = base.realized() {
            let placed = runtime::host::resolve(&buf, device)?;
            if !std::sync::Arc::ptr_eq(&placed, &buf) {
                base.replace_realized(placed, &smelt_fusion::GraphLock::acquire());
            }
        }
    }
    let nodes: Vec<NodeRef> = tensors.iter().map(|t| t.node.clone()).collect();
    let t0 = Instant::now();
    let options = options.into().on(runtime::target(device)?);
    let schedule = Schedule::new(&nodes, options);
    if schedule.items.is_empty() {
        return Ok(());
    }
    crate::viz::on_realize(&schedule);
    // Planned under the graph lock, run outside it, committed under it.
    let bufs = runtime::execute(&schedule, device)?;
    schedule.commit(bufs);
    if runtime::debug_level() >= 1 {
        eprintln!(
            "smelt: realize {} kernel(s) on {} in {:.3} ms",
            schedule.items.len(),
            device,
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
