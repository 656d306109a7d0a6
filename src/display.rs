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
        let values = match self.to_vec::<f64>() {
            Ok(v) => v,
            Err(e) => return write!(f, "tensor(<not computed: {e}>)"),
        };
        let style = Style::new(&values, self.dtype());
        let summarize = values.len() > THRESHOLD;
        let mut body = String::new();
        write_axis(&mut body, &values, self.shape(), 0, 0, &style, summarize);
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

fn write_axis(
    out: &mut String,
    v: &[f64],
    shape: &[usize],
    depth: usize,
    start: usize,
    st: &Style,
    summarize: bool,
) {
    if shape.is_empty() {
        out.push_str(&st.format(v[start]));
        return;
    }
    let n = shape[0];
    let inner: usize = shape[1..].iter().product();
    out.push('[');
    let show: Vec<Option<usize>> = if summarize && n > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain([None])
            .chain((n - EDGE..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    };
    for (k, i) in show.iter().enumerate() {
        if k > 0 {
            out.push(',');
            if shape.len() > 1 {
                out.push_str(&"\n".repeat(shape.len() - 1));
                out.push_str(&" ".repeat(depth + 8));
            } else {
                out.push(' ');
            }
        }
        match i {
            None => out.push_str("..."),
            Some(i) if shape.len() == 1 => {
                let s = st.format(v[start + i]);
                out.push_str(&" ".repeat(st.width - s.len()));
                out.push_str(&s);
            }
            Some(i) => write_axis(
                out,
                v,
                &shape[1..],
                depth + 1,
                start + i * inner,
                st,
                summarize,
            ),
        }
    }
    out.push(']');
}
