//! Pre-launch check that a kernel's loads and stores stay inside their
//! buffers: a second line of defence behind the shape checks at the ops,
//! so a view bug becomes an `Err` instead of an out-of-bounds GPU read.

use crate::expr::{Atom, Expr};
use crate::ir::{Gather, Inst, Kernel, StoreKind};

impl Kernel {
    /// Checks every unmasked load and every store against its buffer's
    /// length (gathers and adds at data-dependent positions over their
    /// whole axis), and every scalar read against the scalar parameters
    /// ([`Kernel::check_scalars`]).
    ///
    /// Only indices whose extremes are exact are judged: affine in distinct
    /// loop variables (the bounds of divisions and remainders may exceed the
    /// values they really take, and a false alarm would fail a correct
    /// kernel). Masked loads are skipped: padding reads outside the buffer
    /// where the mask is false.
    ///
    /// # Errors
    /// A message naming the kernel, the buffer and the index range.
    pub fn check_bounds(&self) -> Result<(), String> {
        self.check_scalars()?;
        if self.ranges.contains(&0) {
            return Ok(()); // nothing runs
        }
        let loads = self.insts.iter().filter_map(|n| match &n.inst {
            Inst::Load {
                input,
                index,
                valid,
            } if valid.is_always() => Some(("input", *input, index, self.inputs[*input].len)),
            _ => None,
        });
        // Stores write the first `stored_len` positions of a row only (a
        // sort's `k`).
        let store_ranges = self.store_ranges();
        let stores = self.stores.iter().filter(|s| !s.is_add()).map(|s| {
            let len = self.outputs[s.output].len;
            ("output", s.output, &s.index, len, &store_ranges)
        });
        let ranges = &self.ranges;
        let gathers = self.insts.iter().filter_map(|n| match &n.inst {
            // The data-dependent part is checked at run time; the rest of
            // the index is checked here over the whole axis `0..len`.
            Inst::Gather(Gather {
                input,
                index,
                valid,
                stride,
                len: axis @ 1..,
                ..
            }) if valid.is_always() => {
                let (lo, hi) = exact_bounds(index, ranges)?;
                let end = (axis - 1) * stride;
                let len = self.inputs[*input].len;
                Some(("input", *input, lo + end.min(0), hi + end.max(0), len))
            }
            _ => None,
        });
        // Adds at data-dependent positions, likewise over the whole axis.
        let adds = self.stores.iter().filter_map(|s| match s.kind {
            StoreKind::AddAt {
                stride,
                len: axis @ 1..,
                ..
            } => {
                let (lo, hi) = exact_bounds(&s.index, ranges)?;
                let end = (axis - 1) * stride;
                let len = self.outputs[s.output].len;
                Some(("output", s.output, lo + end.min(0), hi + end.max(0), len))
            }
            _ => None,
        });
        let affine = loads
            .map(|(what, buf, index, len)| (what, buf, index, len, ranges))
            .chain(stores)
            .filter_map(|(what, buf, index, len, ranges)| {
                if ranges.contains(&0) {
                    return None; // nothing stored
                }
                let (lo, hi) = exact_bounds(index, ranges)?;
                Some((what, buf, lo, hi, len))
            });
        for (what, buf, lo, hi, len) in affine.chain(gathers).chain(adds) {
            if lo < 0 || hi >= len as i64 {
                return Err(format!(
                    "kernel {}: {what} {buf} is indexed in {lo}..={hi} but has {len} elements",
                    self.name
                ));
            }
        }
        Ok(())
    }
}

/// `index`'s (min, max) over the domain when both are attained.
fn exact_bounds(index: &Expr, ranges: &[i64]) -> Option<(i64, i64)> {
    let (atoms, _) = index.parts();
    let mut seen = Vec::with_capacity(atoms.len());
    for (atom, _) in atoms {
        match atom {
            Atom::Var(v) if !seen.contains(v) => seen.push(*v),
            _ => return None,
        }
    }
    Some(index.bounds(ranges))
}

#[cfg(test)]
mod tests {
    use crate::expr::Cond;
    use crate::ir::{Arg, Gather, Inst, Kernel, KernelKind, Node, Store, StoreKind};
    use crate::{DType, Expr};

    /// A copy `out[i] = in[i + offset]` over `n` elements of an input of
    /// `len` elements.
    fn copy(n: i64, offset: i64, len: usize, valid: Cond) -> Kernel {
        Kernel {
            name: "copy".into(),
            kind: KernelKind::Elementwise,
            ranges: crate::dims![n],
            n_kept: 1,
            inputs: vec![Arg {
                dtype: DType::F32,
                len,
            }],
            outputs: vec![Arg {
                dtype: DType::F32,
                len: n as usize,
            }],
            scalars: vec![],
            insts: vec![Node {
                inst: Inst::Load {
                    input: 0,
                    index: Expr::var(0).add_const(offset),
                    valid,
                },
                dtype: DType::F32,
            }],
            stores: vec![Store::write(0, Expr::var(0), 0)],
        }
    }

    #[test]
    fn in_range_loads_pass() {
        assert_eq!(copy(4, 0, 4, Cond::always()).check_bounds(), Ok(()));
        assert_eq!(copy(2, 2, 4, Cond::always()).check_bounds(), Ok(()));
    }

    #[test]
    fn wrapped_offset_is_an_error() {
        // What a wrapped `narrow(0, usize::MAX, 2)` would have produced.
        let e = copy(2, -1, 4, Cond::always()).check_bounds().unwrap_err();
        assert!(
            e.contains("input 0 is indexed in -1..=0 but has 4 elements"),
            "{e}"
        );
    }

    #[test]
    fn read_past_the_end_is_an_error() {
        let e = copy(4, 1, 4, Cond::always()).check_bounds().unwrap_err();
        assert!(
            e.contains("input 0 is indexed in 1..=4 but has 4 elements"),
            "{e}"
        );
    }

    /// A gather of `n` points along an axis of `len` elements with `stride`
    /// from element `offset` of a buffer of 8 elements.
    fn gather(offset: i64, stride: i64, len: i64) -> Kernel {
        let mut k = copy(2, 0, 8, Cond::always());
        k.inputs.push(Arg {
            dtype: DType::I32,
            len: 2,
        });
        k.insts = vec![
            Node {
                inst: Inst::Load {
                    input: 1,
                    index: Expr::var(0),
                    valid: Cond::always(),
                },
                dtype: DType::I32,
            },
            Node {
                inst: Inst::Gather(Gather {
                    input: 0,
                    index: Expr::var(0).add_const(offset),
                    valid: Cond::always(),
                    at: 0,
                    stride,
                    len,
                }),
                dtype: DType::F32,
            },
        ];
        k.stores[0].value = 1;
        k
    }

    #[test]
    fn gathers_are_judged_over_their_whole_axis() {
        assert_eq!(gather(0, 2, 4).check_bounds(), Ok(()));
        assert_eq!(gather(6, -2, 4).check_bounds(), Ok(()));
        let e = gather(1, 2, 4).check_bounds().unwrap_err();
        assert!(e.contains("input 0 is indexed in 1..=8"), "{e}");
        let e = gather(5, -2, 4).check_bounds().unwrap_err();
        assert!(e.contains("input 0 is indexed in -1..=6"), "{e}");
    }

    /// A scatter-add of 2 points into an output of 8 elements along an
    /// axis of `len` elements with `stride` from element `offset`.
    fn scatter(offset: i64, stride: i64, len: i64) -> Kernel {
        let mut k = gather(0, 1, 2);
        k.outputs[0].len = 8;
        k.stores = vec![Store {
            output: 0,
            index: Expr::var(0).add_const(offset),
            value: 0,
            kind: StoreKind::AddAt { at: 0, stride, len },
        }];
        k
    }

    #[test]
    fn scatter_adds_are_judged_over_their_whole_axis() {
        assert_eq!(scatter(0, 2, 4).check_bounds(), Ok(()));
        assert_eq!(scatter(6, -2, 4).check_bounds(), Ok(()));
        let e = scatter(1, 2, 4).check_bounds().unwrap_err();
        assert!(e.contains("output 0 is indexed in 1..=8"), "{e}");
    }

    #[test]
    fn masked_loads_are_not_judged() {
        let pad = Cond::always().and_range(Expr::var(0).add_const(-1), 0, 4, &[6]);
        assert_eq!(copy(6, -1, 4, pad).check_bounds(), Ok(()));
    }
}
