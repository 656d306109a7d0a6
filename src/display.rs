//! Printing tensors like PyTorch: nested brackets, aligned columns, long
//! axes summarised with `...`, then shape, dtype and device.

use crate::Tensor;
use std::fmt;

/// Above this many elements, only the first and last `EDGE` entries of
/// each axis are shown.
const THRESHOLD: usize = 1000;
const EDGE: usize = 3;

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let summarize = self.numel() > THRESHOLD;
        let read = if summarize {
            corners(self)
        } else {
            self.to_vec::<f64>()
        };
        let values = match read {
            Ok(v) => v,
            Err(e) => return write!(f, "tensor(<not computed: {e}>)"),
        };
        // Decided from the printed elements only, as PyTorch does.
        let style = Style::new(&values, self.dtype());
        let shown: Vec<usize> = self
            .shape()
            .iter()
            .map(|n| shown_len(*n, summarize))
            .collect();
        let mut body = String::new();
        let axes = Axes {
            full: self.shape(),
            shown: &shown,
        };
        write_axis(&mut body, &values, axes, 0, 0, &style);
        write!(
            f,
            "tensor({body}, shape={:?}, dtype={}, device={})",
            self.shape(),
            self.dtype(),
            self.device()
        )
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, device={}, realized={})",
            self.shape(),
            self.dtype(),
            self.device(),
            self.is_realized()
        )
    }
}

/// How many entries of an axis of `n` are printed.
fn shown_len(n: usize, summarize: bool) -> usize {
    if summarize && n > 2 * EDGE {
        2 * EDGE
    } else {
        n
    }
}

/// A printed range of an axis: start, length, and position in the shown
/// axis.
type Part = (usize, usize, usize);

/// The printed elements of a summarised tensor, row-major over the shown
/// shape: each corner block is a view computed by one realize (the rest of
/// the tensor is neither computed nor downloaded).
fn corners(t: &Tensor) -> crate::Result<Vec<f64>> {
    // Per axis, the parts of it that are printed.
    let parts: Vec<Vec<Part>> = t
        .shape()
        .iter()
        .map(|&n| {
            if shown_len(n, true) < n {
                vec![(0, EDGE, 0), (n - EDGE, EDGE, EDGE)]
            } else {
                vec![(0, n, 0)]
            }
        })
        .collect();
    let mut blocks: Vec<(Vec<Part>, Tensor)> = vec![(Vec::new(), t.clone())];
    for (ax, ps) in parts.iter().enumerate() {
        blocks = blocks
            .into_iter()
            .flat_map(|(picked, b)| {
                ps.iter().map(move |p| {
                    let mut picked = picked.clone();
                    picked.push(*p);
                    (picked, b.narrow(ax as isize, p.0, p.1))
                })
            })
            .collect();
    }
    let copies: Vec<Tensor> = blocks.iter().map(|(_, b)| b.contiguous()).collect();
    crate::realize_all(
        &copies.iter().collect::<Vec<_>>(),
        smelt_fusion::Fusion::from_env(),
    )?;
    let shown: Vec<usize> = t.shape().iter().map(|n| shown_len(*n, true)).collect();
    let mut out = vec![0.0; shown.iter().product()];
    for ((picked, _), copy) in blocks.iter().zip(&copies) {
        let vals = copy.to_vec::<f64>()?;
        let lens: Vec<usize> = picked.iter().map(|p| p.1).collect();
        for (i, v) in vals.into_iter().enumerate() {
            // Unravel `i` in the block, place it in the shown shape.
            let (mut rest, mut at) = (i, 0);
            let mut stride = 1;
            for ax in (0..lens.len()).rev() {
                at += (picked[ax].2 + rest % lens[ax]) * stride;
                rest /= lens[ax];
                stride *= shown[ax];
            }
            out[at] = v;
        }
    }
    Ok(out)
}

/// The tensor's shape and the shown length of each axis.
#[derive(Clone, Copy)]
struct Axes<'a> {
    full: &'a [usize],
    shown: &'a [usize],
}

/// How every element is printed, decided once from all of them.
struct Style {
    kind: Kind,
    width: usize,
}

enum Kind {
    Bool,
    Int,
    /// Floats that are all whole numbers: `3.`.
    Whole,
    Fixed,
    Sci,
}

impl Style {
    fn new(values: &[f64], dtype: crate::DType) -> Style {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let kind = if dtype == crate::DType::Bool {
            Kind::Bool
        } else if !dtype.is_float() {
            Kind::Int
        } else if finite.iter().all(|v| v.fract() == 0.0 && v.abs() < 1e8) {
            Kind::Whole
        } else {
            let max = finite.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let min = finite
                .iter()
                .filter(|v| **v != 0.0)
                .fold(f64::INFINITY, |m, v| m.min(v.abs()));
            if max >= 1e8
                || (min.is_finite() && min < 1e-4)
                || (min.is_finite() && max / min > 1000.0 && max > 1e3)
            {
                Kind::Sci
            } else {
                Kind::Fixed
            }
        };
        let mut s = Style { kind, width: 0 };
        s.width = values.iter().map(|v| s.format(*v).len()).max().unwrap_or(0);
        s
    }

    fn format(&self, v: f64) -> String {
        if v.is_nan() {
            return "nan".into();
        }
        if v.is_infinite() {
            return if v > 0.0 { "inf".into() } else { "-inf".into() };
        }
        match self.kind {
            Kind::Bool => if v != 0.0 { "True" } else { "False" }.into(),
            Kind::Int => format!("{}", v as i64),
            Kind::Whole => format!("{v:.0}."),
            Kind::Fixed => format!("{v:.4}"),
            Kind::Sci => format!("{v:.4e}"),
        }
    }
}

fn write_axis(out: &mut String, v: &[f64], axes: Axes, depth: usize, start: usize, st: &Style) {
    if axes.full.is_empty() {
        out.push_str(&st.format(v[start]));
        return;
    }
    let m = axes.shown[0];
    let inner: usize = axes.shown[1..].iter().product();
    out.push('[');
    // Positions in the shown data; `None` is the `...` between the edges.
    let show: Vec<Option<usize>> = if m < axes.full[0] {
        (0..EDGE)
            .map(Some)
            .chain([None])
            .chain((EDGE..m).map(Some))
            .collect()
    } else {
        (0..m).map(Some).collect()
    };
    let rank = axes.full.len();
    for (k, i) in show.iter().enumerate() {
        if k > 0 {
            out.push(',');
            if rank > 1 {
                out.push_str(&"\n".repeat(rank - 1));
                out.push_str(&" ".repeat(depth + 8));
            } else {
                out.push(' ');
            }
        }
        match i {
            None => out.push_str("..."),
            Some(i) if rank == 1 => {
                let s = st.format(v[start + i]);
                out.push_str(&" ".repeat(st.width - s.len()));
                out.push_str(&s);
            }
            Some(i) => {
                let sub = Axes {
                    full: &axes.full[1..],
                    shown: &axes.shown[1..],
                };
                write_axis(out, v, sub, depth + 1, start + i * inner, st)
            }
        }
    }
    out.push(']');
}
