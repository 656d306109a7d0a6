//! Attention written with plain tensor ops (`softmax(q @ k^T * s + mask) @
//! v`) is one fused kernel when attention fusion is on: fused, the
//! 3-kernel plan (`AttentionFusion::Off`), unfused (`Fusion::Off`) and an
//! f64 host reference agree for every shape family (batch dims,
//! cross-attention, grouped-query heads, masks, odd lengths, NaN and
//! infinite inputs). The default policy's choice per target and the
//! materialized operands are asserted on plans.

mod common;

use common::{make, test_device, Rng};
use smelt::{AttentionFusion, DType, Fusion, Planning, Schedule, Target, Tensor};

/// The plans compared: one kernel per op, the 3-kernel plan, fused.
fn plans() -> [Planning; 3] {
    let on = Planning::from(Fusion::On);
    [
        Fusion::Off.into(),
        on.attention(AttentionFusion::Off),
        on.attention(AttentionFusion::On),
    ]
}

/// Attention kernels in `s`.
fn attention_kernels(s: &Schedule) -> usize {
    s.items
        .iter()
        .filter(|it| it.kernel.kind.name() == "attention")
        .count()
}

/// How the logits are masked.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mask {
    None,
    /// An additive `[lq, lk]` tensor (padding, ALiBi-style biases).
    Additive,
    /// `where(j <= i, s, -inf)` from `arange` comparisons.
    Causal,
    /// `masked_fill(tril(ones) == 0, -inf)`.
    Tril,
    /// Bottom-right aligned causal, `j <= i + (lk - lq)`, written as
    /// `i >= j` with the rows an `I64` `arange(lk - lq, lk)`.
    CausalShifted,
    /// `masked_fill(j > i, -inf)` (the negated condition).
    CausalFill,
}

impl Mask {
    /// `c` of a causal mask `j <= i + c` for `lq` queries and `lk` keys.
    fn causal(self, lq: usize, lk: usize) -> Option<i64> {
        match self {
            Mask::Causal | Mask::Tril | Mask::CausalFill => Some(0),
            Mask::CausalShifted => Some(lk as i64 - lq as i64),
            Mask::None | Mask::Additive => None,
        }
    }
}

/// How the softmax is written.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    /// `Tensor::softmax(-1)`.
    Softmax,
    /// `exp(x - max) / sum` by hand.
    ByHand,
    /// `.cast(F32).softmax(-1).cast(dtype)`.
    CastF32,
}

#[derive(Clone, Debug)]
struct Case {
    batch: Vec<usize>,
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
    /// Query heads per key/value head: `k` and `v` are expanded over the
    /// last batch axis (grouped-query attention).
    group: usize,
    scale: Option<f64>,
    /// The scale written as a division by its reciprocal.
    divide: bool,
    mask: Mask,
    form: Form,
    dtype: DType,
}

impl Case {
    fn new(batch: &[usize], lq: usize, lk: usize, d: usize, dtype: DType) -> Case {
        Case {
            batch: batch.to_vec(),
            lq,
            lk,
            d,
            dv: d,
            group: 1,
            scale: Some(1.0 / (d as f64).sqrt()),
            divide: false,
            mask: Mask::None,
            form: Form::Softmax,
            dtype,
        }
    }

    fn shape(&self, rows: usize, cols: usize, kv: bool) -> Vec<usize> {
        let mut s = self.batch.clone();
        if kv && self.group > 1 {
            *s.last_mut().expect("GQA needs a head axis") /= self.group;
        }
        s.extend([rows, cols]);
        s
    }
}

/// The inputs of a case: tensors and their exact values.
struct Inputs {
    q: (Tensor, Vec<f64>),
    k: (Tensor, Vec<f64>),
    v: (Tensor, Vec<f64>),
    bias: (Tensor, Vec<f64>),
}

fn inputs(c: &Case, seed: u64, special: &[(usize, f64)]) -> Inputs {
    let mut rng = Rng::new(seed);
    let mut gen = |shape: &[usize], lo: f64, hi: f64, special: &[(usize, f64)]| {
        let n: usize = shape.iter().product();
        let mut vals: Vec<f64> = (0..n).map(|_| rng.uniform(lo, hi)).collect();
        for (at, x) in special {
            if *at < n {
                vals[*at] = *x;
            }
        }
        let (t, h) = make(&vals, shape, c.dtype);
        (t, h.data)
    };
    Inputs {
        q: gen(&c.shape(c.lq, c.d, false), -1.5, 1.5, special),
        k: gen(&c.shape(c.lk, c.d, true), -1.5, 1.5, &[]),
        v: gen(&c.shape(c.lk, c.dv, true), -1.0, 1.0, &[]),
        bias: gen(&[c.lq, c.lk], -2.0, 0.5, &[]),
    }
}

/// `k` or `v` with its heads repeated `group` times (zero-copy).
fn expand_heads(c: &Case, x: &Tensor) -> Tensor {
    if c.group == 1 {
        return x.clone();
    }
    let s = x.shape().to_vec();
    let h = s.len() - 3;
    let mut wide = s.clone();
    wide.insert(h + 1, c.group);
    let mut full = s.clone();
    full[h] *= c.group;
    x.unsqueeze(h as isize + 1).expand(wide).reshape(full)
}

/// The graph, written the naive way.
fn attention(c: &Case, i: &Inputs) -> Tensor {
    let k = expand_heads(c, &i.k.0);
    let v = expand_heads(c, &i.v.0);
    let mut s = i.q.0.matmul(&k.transpose(-2, -1));
    match c.scale {
        Some(scale) if c.divide => s = s / (1.0 / scale),
        Some(scale) => s = s * scale,
        None => {}
    }
    let dev = test_device();
    let s = match c.mask {
        Mask::None => s,
        Mask::Additive => s + &i.bias.0,
        Mask::Causal => {
            let rows = Tensor::arange(0.0, c.lq as f64, 1.0, DType::I32, &dev).reshape([c.lq, 1]);
            let cols = Tensor::arange(0.0, c.lk as f64, 1.0, DType::I32, &dev).reshape([1, c.lk]);
            cols.le(&rows).where_(&s, f64::NEG_INFINITY)
        }
        Mask::Tril => {
            let keep = Tensor::ones([c.lq, c.lk], DType::F32, &dev).tril(0);
            s.masked_fill(&keep.eq(0.0), f64::NEG_INFINITY)
        }
        Mask::CausalShifted => {
            let (lq, lk) = (c.lq as f64, c.lk as f64);
            let rows = Tensor::arange(lk - lq, lk, 1.0, DType::I64, &dev).reshape([c.lq, 1]);
            let cols = Tensor::arange(0.0, lk, 1.0, DType::I64, &dev).reshape([1, c.lk]);
            rows.ge(&cols).where_(&s, f64::NEG_INFINITY)
        }
        Mask::CausalFill => {
            let rows = Tensor::arange(0.0, c.lq as f64, 1.0, DType::I32, &dev).reshape([c.lq, 1]);
            let cols = Tensor::arange(0.0, c.lk as f64, 1.0, DType::I32, &dev).reshape([1, c.lk]);
            s.masked_fill(&cols.gt(&rows), f64::NEG_INFINITY)
        }
    };
    let p = match c.form {
        Form::Softmax => s.softmax(-1),
        Form::ByHand => {
            let e = (&s - s.max_keepdim(-1)).exp();
            &e / e.sum_keepdim(-1)
        }
        Form::CastF32 => s.cast(DType::F32).softmax(-1).cast(c.dtype),
    };
    p.matmul(&v)
}

/// The f64 reference: exact softmax per row (NaN for a row with no
/// finite logit, as PyTorch gives).
fn reference(c: &Case, i: &Inputs) -> Vec<f64> {
    let heads: usize = c.batch.iter().product();
    (0..heads)
        .flat_map(|b| (0..c.lq).flat_map(move |r| reference_row(c, i, b, r)))
        .collect()
}

/// Row `r` of head `b` of the reference.
fn reference_row(c: &Case, i: &Inputs, b: usize, r: usize) -> Vec<f64> {
    let (lq, lk, d, dv) = (c.lq, c.lk, c.d, c.dv);
    let kvb = b / c.group;
    let q = &i.q.1[(b * lq + r) * d..][..d];
    let logits: Vec<f64> = (0..lk)
        .map(|j| {
            let k = &i.k.1[(kvb * lk + j) * d..][..d];
            let mut s: f64 = q.iter().zip(k).map(|(x, y)| x * y).sum();
            s *= c.scale.unwrap_or(1.0);
            match (c.mask, c.mask.causal(lq, lk)) {
                (Mask::Additive, _) => s + i.bias.1[r * lk + j],
                (_, Some(off)) if j as i64 > r as i64 + off => f64::NEG_INFINITY,
                _ => s,
            }
        })
        .collect();
    let m = logits.iter().fold(f64::NEG_INFINITY, |m, x| {
        if m.is_nan() || x.is_nan() {
            f64::NAN
        } else {
            m.max(*x)
        }
    });
    let e: Vec<f64> = logits.iter().map(|x| (x - m).exp()).collect();
    let z: f64 = e.iter().sum();
    (0..dv)
        .map(|col| {
            e.iter()
                .enumerate()
                .map(|(j, p)| p / z * i.v.1[(kvb * lk + j) * dv + col])
                .sum()
        })
        .collect()
}

fn tolerance(dt: DType) -> f64 {
    match dt {
        DType::F64 => 1e-12,
        DType::F32 => 2e-5,
        DType::F16 => 1e-2,
        _ => 6e-2,
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    t.cast(DType::F64).to_vec::<f64>().unwrap()
}

/// Runs `c` with each of [`plans`], compares them with the reference and
/// asserts that the fused plan is one kernel and the 3-kernel plan three.
fn check_with(c: &Case, seed: u64, special: &[(usize, f64)]) {
    check_inputs(c, &inputs(c, seed, special));
}

/// [`check_with`] on given inputs.
fn check_inputs(c: &Case, i: &Inputs) {
    let want = reference(c, i);
    // The f32 softmax of an f64 graph keeps f32's precision.
    let tol = match c.form {
        Form::CastF32 => tolerance(c.dtype).max(tolerance(DType::F32)),
        _ => tolerance(c.dtype),
    };
    for mode in plans() {
        let o = attention(c, i);
        let k0 = smelt::stats::kernels_run();
        o.realize_with(mode).unwrap();
        let kernels = smelt::stats::kernels_run() - k0;
        match mode.attention {
            _ if mode.fusion == Fusion::Off => {}
            AttentionFusion::On => assert_eq!(kernels, 1, "{c:?}: fused attention ran {kernels}"),
            _ => assert_eq!(kernels, 3, "{c:?}: the 3-kernel plan ran {kernels}"),
        }
        let got = values(&o);
        assert_eq!(got.len(), want.len());
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            let ok = if w.is_nan() {
                g.is_nan()
            } else {
                (g - w).abs() <= tol * (1.0 + w.abs())
            };
            assert!(ok, "{c:?} {mode:?}: element {n} is {g}, want {w}");
        }
    }
}

fn check(c: &Case) {
    check_with(c, 7, &[]);
}

#[test]
fn plain_and_scaled() {
    let mut c = Case::new(&[2, 3], 7, 7, 16, DType::F32);
    check(&c);
    c.scale = None;
    check(&c);
}

#[test]
fn batch_dims_zero_one_two() {
    for batch in [&[][..], &[3], &[2, 2]] {
        check(&Case::new(batch, 5, 9, 8, DType::F32));
    }
}

#[test]
fn masks() {
    for mask in [Mask::Additive, Mask::Causal, Mask::Tril] {
        let mut c = Case::new(&[2], 9, 9, 8, DType::F32);
        c.mask = mask;
        check(&c);
    }
}

#[test]
fn softmax_forms() {
    for form in [Form::ByHand, Form::CastF32] {
        let mut c = Case::new(&[2], 6, 11, 8, DType::F32);
        c.form = form;
        check(&c);
    }
}

#[test]
fn cross_attention_and_value_dim() {
    let mut c = Case::new(&[2, 2], 3, 13, 12, DType::F32);
    c.dv = 5;
    check(&c);
    let mut c = Case::new(&[1], 17, 1, 3, DType::F32);
    c.dv = 7;
    check(&c);
}

#[test]
fn grouped_query_heads() {
    let mut c = Case::new(&[2, 6], 5, 7, 8, DType::F32);
    c.group = 3;
    c.mask = Mask::Causal;
    check(&c);
}

#[test]
fn dtypes() {
    for dtype in [DType::F64, DType::F16, DType::BF16] {
        let mut c = Case::new(&[2], 9, 12, 8, dtype);
        c.mask = Mask::Causal;
        check(&c);
        c.form = Form::CastF32;
        c.mask = Mask::Additive;
        check(&c);
    }
}

#[test]
fn odd_lengths() {
    for (lq, lk, d) in [(1, 1, 1), (7, 7, 7), (127, 127, 33), (1000, 1000, 4)] {
        let mut c = Case::new(&[], lq, lk, d, DType::F32);
        c.mask = Mask::Causal;
        check(&c);
    }
}

#[test]
fn fully_masked_rows_are_nan() {
    // Causal with more queries than keys shifted: rows whose keys are all
    // in the future. Here: an additive mask of -inf over whole rows.
    let mut c = Case::new(&[2], 6, 5, 4, DType::F32);
    c.mask = Mask::Additive;
    let mut i = inputs(&c, 3, &[]);
    let mut bias = i.bias.1.clone();
    for j in 0..c.lk {
        bias[2 * c.lk + j] = f64::NEG_INFINITY;
    }
    let (t, h) = make(&bias, &[c.lq, c.lk], c.dtype);
    i.bias = (t, h.data);
    let want = reference(&c, &i);
    assert!(want[2 * c.dv].is_nan() && !want[0].is_nan());
    for mode in plans() {
        let got = values(&attention(&c, &i).realize_with(mode).unwrap().clone());
        for (g, w) in got.iter().zip(&want) {
            assert!(w.is_nan() == g.is_nan() && (w.is_nan() || (g - w).abs() < 1e-5));
        }
    }
}

#[test]
fn nan_and_inf_inputs() {
    let c = Case::new(&[2], 4, 6, 4, DType::F32);
    // A NaN query element poisons its row; +inf and -inf make rows of
    // infinite logits (NaN after subtracting an infinite maximum, or a
    // one-hot row).
    check_with(
        &c,
        5,
        &[(0, f64::NAN), (5, f64::INFINITY), (10, f64::NEG_INFINITY)],
    );
}

/// Kernels planned for `o` with `options`, and how many are attention.
fn planned(o: &Tensor, options: Planning) -> (usize, usize) {
    let s = Schedule::new(std::slice::from_ref(o.node()), options);
    (s.items.len(), attention_kernels(&s))
}

#[test]
fn computed_operands_are_materialized() {
    // Each `k` and `v` element is read once per query tile: lazily
    // computed operands (here Philox draws) get kernels of their own, one
    // per shape, instead of being recomputed for every tile.
    let dev = test_device();
    let q = Tensor::randn([2, 5, 8], DType::F32, 1, &dev) * 0.5;
    let k = Tensor::randn([2, 7, 8], DType::F32, 2, &dev) * 0.5;
    let v = Tensor::randn([2, 7, 3], DType::F32, 3, &dev);
    let o = q.matmul(&k.transpose(-2, -1)).softmax(-1).matmul(&v);
    let fused = Planning::from(Fusion::On).attention(AttentionFusion::On);
    let s = o.schedule(fused);
    assert_eq!(s.items.len(), 4, "{s}");
    let attn = s
        .items
        .iter()
        .find(|it| it.kernel.kind.name() == "attention");
    let ops = &attn.expect("an attention kernel").ops;
    assert!(!ops.iter().any(|op| op.contains("uniform")), "{s}");
    // Casts of realized data are materialized too (as for any matmul
    // operand: the tensor-core kernels read single strided half loads);
    // views of realized data are read in place.
    let (q16, k16) = (q.cast(DType::F16), k.cast(DType::F16));
    smelt::realize_all(&[&q, &k, &v], Fusion::On).unwrap();
    let v16 = v.cast(DType::F16);
    v16.realize().unwrap();
    let o = q16.matmul(&k16.transpose(-2, -1)).softmax(-1).matmul(&v16);
    assert_eq!(o.schedule(fused).items.len(), 3);
    let (q16, k16) = (q16.realize().unwrap(), k16.realize().unwrap());
    let kt = k16.unsqueeze(1).expand([2, 3, 7, 8]).transpose(-2, -1);
    let o = q16
        .unsqueeze(1)
        .matmul(&kt)
        .softmax(-1)
        .matmul(&v16.unsqueeze(1));
    assert_eq!(o.schedule(fused).items.len(), 1);
    // A computed additive mask is evaluated once per logit inside the
    // kernel (as the 3-kernel plan's score epilogue does), never stored:
    // storing it would bring back a score-sized buffer.
    let bias = Tensor::randn([5, 7], DType::F16, 4, &dev) * 0.1;
    let l = q16.matmul(&k16.transpose(-2, -1)) + &bias;
    let o = l.softmax(-1).matmul(&v16);
    assert_eq!(o.schedule(fused).items.len(), 1);
    let want = values(o.realize_with(Planning::from(Fusion::Off)).unwrap());
    let o = l.softmax(-1).matmul(&v16);
    let got = values(o.realize_with(fused).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-2 * (1.0 + w.abs()), "{g} vs {w}");
    }
}

#[test]
fn default_policy_per_target() {
    let dev = test_device();
    let graph_of = |dt: DType, b: usize, lq: usize, lk: usize, d: usize| {
        let q = Tensor::randn([b, lq, d], dt, 1, &dev);
        let k = Tensor::randn([b, lk, d], dt, 2, &dev);
        let v = Tensor::randn([b, lk, 64], dt, 3, &dev);
        let s = q.matmul(&k.transpose(-2, -1)) * 0.125;
        s.cast(DType::F32).softmax(-1).cast(dt).matmul(&v)
    };
    let graph = |b, lq, lk| graph_of(DType::F16, b, lq, lk, 64);
    let auto = Planning::from(Fusion::On).attention(AttentionFusion::Auto);
    let h100 = Target::Gpu { memory: 80 << 30 };
    // (graph, target, fused by default)
    let cases = [
        // The CPU: the 3-kernel plan up to 2^26 scores, fused past them.
        (graph(2, 300, 128), Target::Cpu, false),
        (graph(2, 4096, 8192), Target::Cpu, false),
        (graph(2, 4096, 8193), Target::Cpu, true),
        // A GPU: half operands with head dims up to 256 take the
        // tensor-core attention kernel, fused at every size...
        (graph(64, 2048, 2048), h100, true),
        (graph(2, 1, 4096), h100, true),
        (graph_of(DType::BF16, 2, 7, 5, 256), h100, true),
        // ...f32 operands or a head dim past 256 the 3-kernel plan while
        // its scores fit...
        (graph_of(DType::F32, 2, 300, 300, 64), h100, false),
        (graph_of(DType::F16, 2, 30, 30, 320), h100, false),
        // ...fused past 2^31 scores (seq 131072) or a quarter of memory.
        (graph_of(DType::F32, 1, 1 << 17, 1 << 17, 64), h100, true),
        (
            graph_of(DType::F32, 1, 64, 4096, 64),
            Target::Gpu { memory: 2 << 20 },
            true,
        ),
        (
            graph_of(DType::F32, 1, 64, 4096, 64),
            Target::Gpu { memory: 0 },
            false,
        ),
    ];
    for (o, target, fused) in &cases {
        let (kernels, attn) = planned(o, auto.on(*target));
        assert_eq!(attn, usize::from(*fused), "{:?} on {target:?}", o.shape());
        // The operands' kernel (merged when shapes agree, else one each)
        // plus one attention kernel or three.
        let operands = kernels - if *fused { 1 } else { 3 };
        assert!((1..=3).contains(&operands), "{kernels} kernels");
    }
    // The override wins over the policy.
    let (o, target, _) = &cases[2];
    let off = auto.attention(AttentionFusion::Off).on(*target);
    assert_eq!(planned(o, off).1, 0);
}

/// The PTX of the attention kernel the fused plan of `o` runs, for each
/// checked target.
fn attention_ptx(o: &Tensor) -> Vec<String> {
    let fused = Planning::from(Fusion::On).attention(AttentionFusion::On);
    let s = o.schedule(fused);
    let it = s
        .items
        .iter()
        .find(|it| it.kernel.kind.name() == "attention")
        .expect("an attention kernel");
    smelt_codegen::ptx::Target::CHECKED
        .iter()
        .map(|t| smelt_codegen::ptx::emit(&it.kernel, t).expect("emit").ptx)
        .collect()
}

#[test]
fn half_attention_takes_the_tensor_core_kernel() {
    // `SMELT_ATTENTION_MMA=0` (testing the FMA kernel on half inputs)
    // turns the tensor-core kernel off.
    if !smelt_codegen::env::flag("SMELT_ATTENTION_MMA", true) {
        return;
    }
    // Half operands: mma.sync for both products (ldmatrix.trans for v),
    // or on sm_90 warpgroup MMAs where the tile asks for them; f32 and
    // f64 stay on the exact FMA kernel.
    for dtype in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        let mut c = Case::new(&[2], 9, 12, 40, dtype);
        c.mask = Mask::Causal;
        let o = attention(&c, &inputs(&c, 1, &[]));
        for ptx in attention_ptx(&o) {
            let mma = (ptx.contains("mma.sync.aligned.m16n8k16")
                && ptx.contains("ldmatrix.sync.aligned.m8n8.x4.trans"))
                || ptx.contains("wgmma.mma_async.sync.aligned.m64n");
            assert_eq!(mma, dtype.size() == 2, "{dtype:?}");
            // Realized half operands with 16-byte aligned rows are copied
            // with cp.async.
            assert_eq!(ptx.contains("cp.async.cg"), mma, "{dtype:?}");
        }
    }
    // Grouped-query heads: k and v (expanded over head groups) are copied
    // too, so the kernel has no other global load.
    let mut c = Case::new(&[1, 4], 7, 7, 64, DType::BF16);
    c.group = 2;
    let o = attention(&c, &inputs(&c, 1, &[]));
    for ptx in attention_ptx(&o) {
        assert!(ptx.contains("cp.async.cg") && !ptx.contains("ld.global"));
    }
    // Keys stored transposed (`d` strided): evaluated element by element.
    let dev = test_device();
    let q = Tensor::randn([2, 7, 32], DType::F16, 1, &dev);
    let kt = Tensor::randn([2, 32, 9], DType::F16, 2, &dev);
    let v = Tensor::randn([2, 9, 32], DType::F16, 3, &dev);
    smelt::realize_all(&[&q, &kt, &v], Fusion::On).unwrap();
    let o = q.matmul(&kt).softmax(-1).matmul(&v);
    for ptx in attention_ptx(&o) {
        assert!(ptx.contains("cp.async.cg") && ptx.contains("ld.global.b16"));
    }
    let want = values(o.realize_with(Planning::from(Fusion::Off)).unwrap());
    let o = q.matmul(&kt).softmax(-1).matmul(&v);
    let fused = Planning::from(Fusion::On).attention(AttentionFusion::On);
    let got = values(o.realize_with(fused).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-2 * (1.0 + w.abs()), "{g} vs {w}");
    }
}

/// A logit that is the score times (or over) a scale: the tensor-core
/// kernel takes the maxima of the raw scores and folds the scale into the
/// exponential where it is positive and finite at run time, and evaluates
/// the logits in full for any other scale (zero, negative), which must
/// give the same results.
#[test]
fn scales_fold_into_the_exponential_where_positive() {
    let mut n = 0;
    for (scale, divide) in [(0.125, false), (0.125, true), (-0.5, false), (0.0, false)] {
        for mask in [Mask::None, Mask::Causal] {
            let dtype = [DType::F16, DType::BF16][n % 2];
            n += 1;
            let mut c = Case::new(&[2], 130, 130, 64, dtype);
            (c.scale, c.divide, c.mask) = (Some(scale), divide, mask);
            let i = inputs(&c, 5, &[]);
            if smelt_codegen::env::flag("SMELT_ATTENTION_MMA", true) {
                for ptx in attention_ptx(&attention(&c, &i)) {
                    assert!(ptx.contains("folded into the softmax"), "{c:?}");
                }
            }
            check_inputs(&c, &i);
        }
    }
    // An additive mask is not a scale: the logits are evaluated in full.
    let mut c = Case::new(&[2], 9, 9, 64, DType::F16);
    c.mask = Mask::Additive;
    for ptx in attention_ptx(&attention(&c, &inputs(&c, 5, &[]))) {
        assert!(!ptx.contains("folded into the softmax"));
    }
}

/// The `mma.sync` kernel stores a lane's two adjacent output columns as
/// one point where the value dim is even, and the warpgroup kernel
/// (sm_90) stages `O` through shared memory and stores runs of 16 bytes
/// where the value dim splits into them (48, with a padded last block of
/// columns); an odd value dim (the last column alone, or no staging) and
/// an `f32` epilogue (8-byte pairs, 16-byte runs) store correctly too.
#[test]
fn output_columns_in_pairs() {
    for (dv, dtype) in [(7, DType::F16), (33, DType::BF16), (48, DType::F16)] {
        let mut c = Case::new(&[2], 19, 70, 32, dtype);
        c.dv = dv;
        check(&c);
    }
    let c = Case::new(&[2], 19, 70, 64, DType::BF16);
    let i = inputs(&c, 3, &[]);
    let want = reference(&c, &i);
    let fused = Planning::from(Fusion::On).attention(AttentionFusion::On);
    let o = attention(&c, &i).cast(DType::F32);
    assert_eq!(attention_kernels(&o.schedule(fused)), 1);
    if smelt_codegen::env::flag("SMELT_ATTENTION_MMA", true) {
        // Split kernels (forced by the environment) store their partial
        // sums instead; the combine entry stores the output.
        let split = forced_splits().is_some_and(|n| n > 1);
        for ptx in attention_ptx(&o).iter().filter(|_| !split) {
            let staged = ptx.contains("st.shared.v2.f32");
            let stores = if staged {
                "st.global.v4.b32"
            } else {
                "st.global.v2.b32"
            };
            assert!(ptx.contains(stores), "the cast is fused, {stores}");
            // Every warpgroup tile stages here but three warpgroups with
            // 64-key tiles, whose shares of a buffer hold 16 columns.
            let small = std::env::var("SMELT_ATTENTION_TILE")
                .ok()
                .and_then(|t| smelt_codegen::env::parse_attention_tile(&t).ok())
                .is_some_and(|t| t.warps == 12 && t.bn == 64);
            if !small {
                assert_eq!(ptx.contains("wgmma.mma_async"), staged);
            }
        }
    }
    let got = values(o.realize_with(fused).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= tolerance(c.dtype) * (1.0 + w.abs()),
            "{g} vs {w}"
        );
    }
}

/// The fused attention kernels the tile tests emit, with (batch, length,
/// head dim, causal): every head-dim class of the tile rules (up to 64,
/// up to 128, above), padded and not, f16 and bf16.
fn tile_cases() -> Vec<(usize, usize, usize, bool, smelt_codegen::Kernel)> {
    [
        (2, 127, 40, DType::F16, false),
        (3, 200, 64, DType::BF16, true),
        (2, 129, 128, DType::F16, false),
        (2, 1000, 128, DType::BF16, true),
        (1, 65, 256, DType::F16, true),
    ]
    .into_iter()
    .map(|(batch, l, d, dtype, causal)| {
        let mut c = Case::new(&[batch], l, l, d, dtype);
        if causal {
            c.mask = Mask::Causal;
        }
        let kernel = fused_kernel(&attention(&c, &inputs(&c, 1, &[])));
        (batch, l, d, causal, kernel)
    })
    .collect()
}

/// The `SMELT_ATTENTION_TILE` shapes of the tensor-core kernel (4 or 8
/// warps of 16 or 32 rows, key tiles up to 32, 64 or 128, 2 or 3 buffers,
/// causal row blocks reversed or not) emit and assemble for sm_80 and
/// sm_90 over representative head dims, causal and not, f16 and bf16,
/// and spill no register at head dims 64 and 128; each launch has the
/// tile's threads, CTAs and
/// shared memory, and its loop the tile's pipeline depth. (A GPU run
/// checks the values: `SMELT_ATTENTION_TILE=<tile>` runs every test of
/// this file with that tile.)
#[test]
fn tensor_core_tiles_assemble_without_spills() {
    use smelt_codegen::env::{parse_attention_tile, AttentionTile};
    use smelt_codegen::ptx::{emit_attention_split, ptxas, Target};
    // Key tiles of 32 are what larger ones come to past head dim 64 (at
    // 32 rows a warp) or 128, so one tile asks for them; reversal changes
    // one instruction, so the 3-stage tiles carry it (each distinct kernel
    // costs two ptxas runs).
    let mut tiles = vec![AttentionTile {
        bn: 32,
        ..AttentionTile::DEFAULT
    }];
    for warps in [4, 8] {
        for rows in [16, 32] {
            for bn in [64, 128] {
                for stages in [2, 3] {
                    tiles.push(AttentionTile {
                        warps,
                        rows,
                        bn,
                        stages,
                        reverse: stages == 3,
                        wgmma: false,
                    });
                }
            }
        }
    }
    assert!(tiles.contains(&AttentionTile::DEFAULT));
    let mut jobs = Vec::new();
    for (batch, l, d, causal, kernel) in tile_cases() {
        for t in &tiles {
            assert_eq!(parse_attention_tile(&t.name()), Ok(*t));
            // The tile as this kernel resolves it (32-row warps and key
            // tiles capped by the head dim, reversal for causal only).
            let rows = if d <= 128 { t.rows } else { 16 };
            let cap = [128, 64, 32][usize::from(d > 64) + usize::from(d > 128 || rows == 32)];
            let bn = t.bn.min(cap);
            let reverse = t.reverse && causal;
            let bm = t.warps * rows;
            for target in Target::CHECKED {
                // Unsplit (split-KV has its own test), whatever
                // SMELT_ATTENTION_SPLITS says.
                let p = emit_attention_split(&kernel, &target, Some(t), 0).expect("emits");
                let [launch] = &p.launches[..] else {
                    panic!("one launch")
                };
                assert_eq!(launch.block, (32 * t.warps, 1, 1), "{}", t.name());
                let ctas = batch as u32 * (l as u32).div_ceil(bm);
                assert_eq!(launch.grid, (ctas, 1, 1), "{}", t.name());
                let dp = (d as u32).next_multiple_of(16);
                let shared = bm * (2 * dp + 16) + t.stages * bn * 2 * (2 * dp + 16);
                assert_eq!(launch.shared_bytes, shared, "{}", t.name());
                let wait = format!("cp.async.wait_group {};", t.stages - 2);
                assert!(p.ptx.contains(&wait), "{}", t.name());
                let reversed = p.ptx.contains("row blocks last first");
                assert_eq!(reversed, reverse, "{}", t.name());
                let r = if reverse { "r" } else { "" };
                let shape = format!("{}x{rows}x{bn}x{}{r}", t.warps, t.stages);
                jobs.push((format!("d{d} causal {causal} {shape}"), target.sm, p.ptx));
            }
        }
    }
    // Tiles that resolve alike give the same kernel: assemble each once.
    jobs.sort_by(|a, b| (&a.2, a.1).cmp(&(&b.2, b.1)));
    jobs.dedup_by(|a, b| a.2 == b.2 && a.1 == b.1);
    let mut reports: Vec<_> = jobs
        .iter()
        .zip(ptxas::assemble_each(&sm_jobs(&jobs)))
        .map(|((name, sm, _), r)| {
            (
                name,
                *sm,
                r.unwrap_or_else(|e| panic!("{name} sm_{sm}: {e}")),
            )
        })
        .collect();
    reports.sort();
    for (name, sm, r) in &reports {
        let Some(info) = r else {
            println!("skipped: ptxas not found");
            assert!(
                !smelt_codegen::env::flag("SMELT_REQUIRE_PTXAS", false),
                "SMELT_REQUIRE_PTXAS=1 but ptxas was not found"
            );
            return;
        };
        let used = info
            .lines()
            .find(|l| l.contains("registers"))
            .unwrap_or_default();
        let spilled = spill_stores(info);
        println!("{name} sm_{sm}: {}, {spilled} bytes spilled", used.trim());
        // Head dims 64 and 128, the ones models use and the tiles are
        // sized for; elsewhere ptxas may still spill a few bytes (8 at d =
        // 40 on sm_90 with the default tile), which is reported.
        if name.starts_with("d64 ") || name.starts_with("d128 ") {
            assert_eq!(spilled, 0, "{name} sm_{sm}: {info}");
        }
    }
}

/// The `wgmma` tiles (`SMELT_ATTENTION_TILE=<warps>x16x<bn>w`: one, two
/// or three warpgroups, key tiles of 64 or 128) emit
/// warpgroup MMAs for sm_90a where both head dims round up to at most 128
/// and `mma.sync` elsewhere (sm_80, head dim 256), with swizzled tiles in
/// 1024-byte aligned shared memory, and assemble without spills at head
/// dims 64 and 128. (A GPU run checks the values: `SMELT_ATTENTION_TILE=
/// 8x16x128x2w` runs every test of this file with that tile.)
#[test]
fn wgmma_tiles_assemble_without_spills() {
    use smelt_codegen::env::parse_attention_tile;
    use smelt_codegen::ptx::{emit_attention_split, ptxas, Target};
    let mut jobs = Vec::new();
    for (_, _, d, causal, kernel) in tile_cases() {
        for name in [
            "4x16x64w",
            "4x16x128w",
            "8x16x64w",
            "8x16x128w",
            "12x16x64w",
            "12x16x128w",
        ] {
            let t = parse_attention_tile(name).unwrap();
            for target in Target::CHECKED {
                let p = emit_attention_split(&kernel, &target, Some(&t), 0).expect("emits");
                let wgmma = target.sm >= 90 && d <= 128;
                let has = p.ptx.contains("wgmma.mma_async");
                assert_eq!(has, wgmma, "{name} d{d} sm_{}", target.sm);
                if !wgmma {
                    continue;
                }
                assert!(p.ptx.contains(".target sm_90a") && p.ptx.contains(".align 1024"));
                let [launch] = &p.launches[..] else {
                    panic!("one launch")
                };
                let dp = (d as u32).next_multiple_of(64);
                let bm = 16 * t.warps;
                assert_eq!(launch.block, (32 * t.warps, 1, 1));
                // Three warpgroups take key tiles of 64 past head dim 64.
                let bn = if t.warps > 8 && d > 64 { 64 } else { t.bn };
                // Always 3 buffers (the pipelined loop's), then for two or
                // three warpgroups the copy engine's 12 barriers (plain k and v:
                // every case here).
                let tma = smelt_codegen::env::flag("SMELT_ATTENTION_TMA", true) && t.warps >= 8;
                let barriers = if tma { 96 } else { 0 };
                // One column block of values: the row sums on the tensor
                // cores, `O += P [V | 1]` with 8 more columns read from a
                // block of ones after the buffers.
                let sums = smelt_codegen::env::flag("SMELT_ATTENTION_SUMS", true) && dp == 64;
                let ones = if sums { 16 * 128 } else { 0 };
                let shared = bm * 2 * dp + 3 * bn * 4 * dp + ones + barriers;
                assert_eq!(launch.shared_bytes, shared, "{name} d{d}");
                assert_eq!(p.ptx.contains("m64n72k16"), sums, "{name} d{d}");
                assert_eq!(p.maps.len(), if tma { 2 } else { 0 }, "{name} d{d}");
                assert_eq!(p.ptx.contains("cp.async.bulk.tensor.3d"), tma);
                // Turns by default but for two warpgroups at head dim 64.
                let pingpong = smelt_codegen::env::flag(
                    "SMELT_ATTENTION_PINGPONG",
                    !(t.warps == 8 && dp == 64),
                );
                let turns = tma && pingpong;
                assert_eq!(p.ptx.contains("bar.arrive"), turns, "{name} d{d}");
                // Under a causal mask a warpgroup stops computing at its own
                // rows' last key and walks the CTA's remaining tiles.
                let drain = p.ptx.contains("past this warpgroup's last visible key");
                assert_eq!(drain, tma && causal && bm >= 64 + bn, "{name} d{d}");
                jobs.push((format!("d{d} causal {causal} {name}"), p.ptx));
            }
        }
    }
    let sm90: Vec<_> = jobs.iter().map(|(_, ptx)| (ptx.as_str(), 90)).collect();
    for ((name, _), r) in jobs.iter().zip(ptxas::assemble_each(&sm90)) {
        let Some(info) = r.unwrap_or_else(|e| panic!("{name}: {e}")) else {
            println!("skipped: ptxas not found");
            assert!(!smelt_codegen::env::flag("SMELT_REQUIRE_PTXAS", false));
            return;
        };
        let used = info
            .lines()
            .find(|l| l.contains("registers"))
            .unwrap_or_default();
        let spilled = spill_stores(&info);
        println!("{name}: {}, {spilled} bytes spilled", used.trim());
        if name.starts_with("d64 ") || name.starts_with("d128 ") {
            assert_eq!(spilled, 0, "{name}: {info}");
        }
    }
}

/// `(ptx, sm)` of each named job, for [`ptxas::assemble_each`].
fn sm_jobs(jobs: &[(String, u32, String)]) -> Vec<(&str, u32)> {
    jobs.iter()
        .map(|(_, sm, ptx)| (ptx.as_str(), *sm))
        .collect()
}

/// Bytes of spill stores in a `ptxas -v` report.
fn spill_stores(info: &str) -> u64 {
    info.split(',')
        .filter_map(|part| part.trim().strip_suffix("bytes spill stores"))
        .map(|n| n.trim().parse::<u64>().expect("a byte count"))
        .sum()
}

/// A named change of a base case.
type Family = (&'static str, fn(&mut Case));

/// The shape families of the tensor-core kernel (half inputs; on the CPU
/// the interpreter runs them and `SMELT_CHECK_PTX=1` assembles their
/// `mma.sync` kernels): every head dim it pads (multiples of 16 and not)
/// up to 256, each family once per dtype.
#[test]
fn half_families_over_head_dims() {
    // The dtype alternates with the head dim: the kernel differs between
    // f16 and bf16 only in its MMA and conversion types, and each distinct
    // kernel costs CI a ptxas run.
    for (n, d) in [32, 40, 64, 72, 80, 128, 256].into_iter().enumerate() {
        let dtype = [DType::F16, DType::BF16][n / 2 % 2];
        let l = if n % 2 == 0 { 7 } else { 127 };
        let base = Case::new(&[2], l, l, d, dtype);
        let families: [Family; 8] = [
            ("plain", |c| c.scale = None),
            ("scale", |_| {}),
            ("additive", |c| c.mask = Mask::Additive),
            ("causal", |c| c.mask = Mask::Causal),
            ("cross", |c| {
                c.lq = 5;
                c.lk = 130;
                c.dv = 48;
            }),
            ("gqa", |c| {
                c.batch = vec![1, 4];
                c.group = 2;
                c.mask = Mask::Causal;
            }),
            ("batch", |c| c.batch = vec![2, 1, 2]),
            ("cast-f32", |c| c.form = Form::CastF32),
        ];
        for (name, f) in families {
            let mut c = base.clone();
            f(&mut c);
            eprintln!("{name}: {c:?}");
            check(&c);
        }
    }
}

/// Sequence lengths that are not multiples of the tiles (64 query rows,
/// 64 or 32 keys), square and cross, causal and not.
#[test]
fn half_lengths() {
    // Both dtypes at every length, each length's dtype swapped between the
    // unmasked and the causal case (fewer distinct kernels for CI's ptxas).
    for (n, (lq, lk, d)) in [
        (1, 1, 64),
        (7, 7, 128),
        (127, 127, 256),
        (1000, 1000, 64),
        (4097, 4097, 32),
        (1, 4097, 80),
        (1000, 7, 32),
    ]
    .into_iter()
    .enumerate()
    {
        for (m, mask) in [Mask::None, Mask::Causal].into_iter().enumerate() {
            let dtype = [DType::F16, DType::BF16][(n + m) % 2];
            let mut c = Case::new(&[], lq, lk, d, dtype);
            c.mask = mask;
            check(&c);
        }
    }
}

/// The fused kernel of `o`: its causal mask's offset (`Kernel::attention`
/// finds it in the IR) and its PTX for each checked target.
fn causal_kernel(o: &Tensor) -> (Option<i64>, Vec<String>) {
    let fused = Planning::from(Fusion::On).attention(AttentionFusion::On);
    let s = o.schedule(fused);
    let it = s
        .items
        .iter()
        .find(|it| it.kernel.kind.name() == "attention")
        .expect("an attention kernel");
    let parts = it.kernel.attention().expect("attention parts");
    (parts.causal.map(|c| c.offset), attention_ptx(o))
}

/// A logit written from scores `s`, `lq` and `lk`.
type Logit = fn(&Tensor, usize, usize) -> Tensor;

/// `arange(start, start + n)` of `dtype` viewed as a column (`rows`) or
/// a row.
fn coords(start: i64, n: usize, dtype: DType, rows: bool) -> Tensor {
    let (a, b) = (start as f64, start as f64 + n as f64);
    let t = Tensor::arange(a, b, 1.0, dtype, &test_device());
    if rows {
        t.reshape([n, 1])
    } else {
        t.reshape([1, n])
    }
}

/// Each way of writing a causal mask that the rule takes, with its `c`
/// (`j <= i + c`), and masks it must not take for one: an arbitrary
/// mask tensor (here holding the causal pattern), `tril` (its diagonal
/// `k` is a launch-time scalar, not part of the code) and an upper
/// triangle. The causal kernels end their key loops early (the PTX says
/// so); the others do not.
#[test]
fn causal_masks_are_recognised() {
    let forms: [(&str, Logit, Option<i64>); 9] = [
        (
            "j <= i",
            |s, lq, lk| {
                let (i, j) = (
                    coords(0, lq, DType::I32, true),
                    coords(0, lk, DType::I32, false),
                );
                j.le(&i).where_(s, f64::NEG_INFINITY)
            },
            Some(0),
        ),
        (
            "j < i + 1, f32 aranges",
            |s, lq, lk| {
                let (i, j) = (
                    coords(1, lq, DType::F32, true),
                    coords(0, lk, DType::F32, false),
                );
                j.lt(&i).where_(s, f64::NEG_INFINITY)
            },
            Some(0),
        ),
        (
            "i >= j, i64, bottom-right",
            |s, lq, lk| {
                let off = lk as i64 - lq as i64;
                let (i, j) = (
                    coords(off, lq, DType::I64, true),
                    coords(0, lk, DType::I64, false),
                );
                i.ge(&j).where_(s, f64::NEG_INFINITY)
            },
            Some(3),
        ),
        (
            "masked_fill(j > i)",
            |s, lq, lk| {
                let (i, j) = (
                    coords(0, lq, DType::I32, true),
                    coords(0, lk, DType::I32, false),
                );
                s.masked_fill(&j.gt(&i), f64::NEG_INFINITY)
            },
            Some(0),
        ),
        (
            "masked_fill(i < j - 2)",
            |s, lq, lk| {
                let (i, j) = (
                    coords(0, lq, DType::I32, true),
                    coords(-2, lk, DType::I32, false),
                );
                s.masked_fill(&i.lt(&j), f64::NEG_INFINITY)
            },
            Some(2),
        ),
        (
            "additive tensor",
            |s, lq, lk| {
                let (i, j) = (
                    coords(0, lq, DType::I32, true),
                    coords(0, lk, DType::I32, false),
                );
                let zero = Tensor::zeros([lq, lk], s.dtype(), &test_device());
                let bias = j.le(&i).where_(&zero, f64::NEG_INFINITY);
                bias.realize().unwrap();
                s + &bias
            },
            None,
        ),
        (
            "tril",
            |s, lq, lk| {
                let keep = Tensor::ones([lq, lk], DType::F32, &test_device()).tril(0);
                s.masked_fill(&keep.eq(0.0), f64::NEG_INFINITY)
            },
            None,
        ),
        (
            "upper: j >= i",
            |s, lq, lk| {
                let (i, j) = (
                    coords(0, lq, DType::I32, true),
                    coords(0, lk, DType::I32, false),
                );
                j.ge(&i).where_(s, f64::NEG_INFINITY)
            },
            None,
        ),
        (
            "fill 0, not -inf",
            |s, lq, lk| {
                let (i, j) = (
                    coords(0, lq, DType::I32, true),
                    coords(0, lk, DType::I32, false),
                );
                j.le(&i).where_(s, 0.0)
            },
            None,
        ),
    ];
    for dtype in [DType::F16, DType::F32] {
        let c = Case::new(&[2], 9, 12, 16, dtype);
        let i = inputs(&c, 1, &[]);
        for (name, logit, want) in forms {
            let s = i.q.0.matmul(&i.k.0.transpose(-2, -1));
            let o = logit(&s, c.lq, c.lk).softmax(-1).matmul(&i.v.0);
            let (got, ptx) = causal_kernel(&o);
            assert_eq!(got, want, "{name} {dtype:?}");
            for p in ptx {
                assert_eq!(
                    p.contains("causal mask: the key loop ends"),
                    want.is_some(),
                    "{name}"
                );
                let whole = p.contains("causal mask keeps whole");
                // The tensor-core kernel's (off under SMELT_ATTENTION_MMA=0).
                let mma =
                    dtype == DType::F16 && smelt_codegen::env::flag("SMELT_ATTENTION_MMA", true);
                assert_eq!(whole, want.is_some() && mma, "{name}");
            }
        }
    }
}

/// Causal attention at lengths around the tiles (64 query rows per CTA,
/// 64 or 32 keys per tile, 8 to 32 rows in the FMA kernel), square and
/// cross with the bottom-right alignment (`lq > lk` leaves rows with no
/// key: NaN), over f16, bf16 and f32 and head dims 64 and 128: fused,
/// the 3-kernel plan and unfused agree with the f64 reference.
#[test]
fn causal_lengths() {
    let dtypes = [DType::F16, DType::BF16, DType::F32];
    for (n, len) in [1, 7, 63, 64, 65, 127, 1000, 4097].into_iter().enumerate() {
        // Head dim 128 at 1000 and 64 at 4097 keep the CPU's time modest.
        let (dtype, d) = (dtypes[n % 3], [128, 64][n % 2]);
        let mut cases = vec![
            (len, len, Mask::Causal),
            (len, len / 2 + 3, Mask::CausalShifted),
            (len / 3 + 1, len, Mask::CausalShifted),
        ];
        if len < 128 {
            cases.push((len, len, Mask::CausalFill));
        }
        for (lq, lk, mask) in cases {
            let mut c = Case::new(&[], lq, lk, d, dtype);
            c.mask = mask;
            check(&c);
        }
    }
}

/// The one way the fused causal kernel differs from the unfused graph, a
/// decision: keys a row cannot see are skipped, so a non-finite `v` at
/// such a key no longer makes the row NaN through `0 * inf`. Rows below
/// 64 here never reach key 259 on any backend (the CPU skips every masked
/// key, the GPU kernels end each CTA's key loop after its last row's last
/// key: at most row 191 of a 192-row CTA, in a key tile of 128 that ends
/// at key 255), so they stay finite fused and are NaN unfused.
#[test]
fn causal_skips_masked_values() {
    for dtype in [DType::F16, DType::F32] {
        let mut c = Case::new(&[], 260, 260, 16, dtype);
        c.mask = Mask::Causal;
        let mut i = inputs(&c, 2, &[]);
        // What rows below 64 give with the finite value.
        let want = reference(&c, &i);
        let mut v = i.v.1.clone();
        v[259 * c.dv] = f64::INFINITY;
        let (t, h) = make(&v, &[c.lk, c.dv], dtype);
        i.v = (t, h.data);
        for mode in plans() {
            let got = values(attention(&c, &i).realize_with(mode).unwrap());
            let fused = mode.fusion == Fusion::On && mode.attention == AttentionFusion::On;
            for r in 0..64 {
                let g = got[r * c.dv];
                assert_eq!(g.is_nan(), !fused, "{dtype:?} {mode:?} row {r}: {g}");
                if fused {
                    let w = want[r * c.dv];
                    assert!(
                        (g - w).abs() <= tolerance(dtype) * (1.0 + w.abs()),
                        "{g} vs {w}"
                    );
                }
            }
        }
    }
}

/// Memory is O(s d), never O(s^2) (issue 13): causal f16 attention over
/// 131072 tokens, whose score matrix would be 2^34 logits (32 GiB), runs
/// as one kernel under the default plan on a GPU, and rows sampled across
/// the sequence match the f64 reference. The CPU runs the same graph fused
/// at 4096 tokens (its fused path holds one block of logits per thread).
#[test]
fn long_sequences_run_as_one_kernel_in_linear_memory() {
    let dev = test_device();
    let len = if matches!(dev, smelt::Device::Cpu) {
        4096
    } else {
        131072
    };
    let mut c = Case::new(&[1], len, len, 64, DType::F16);
    c.mask = Mask::Causal;
    let mut rng = Rng::new(11);
    let mut gen = |lo: f64, hi: f64| {
        let vals: Vec<f64> = (0..len * 64).map(|_| rng.uniform(lo, hi)).collect();
        let (t, h) = make(&vals, &[1, len, 64], DType::F16);
        (t, h.data)
    };
    let i = Inputs {
        q: gen(-1.5, 1.5),
        k: gen(-1.5, 1.5),
        v: gen(-1.0, 1.0),
        // Only additive masks read it.
        bias: (Tensor::zeros([1], DType::F16, &dev), Vec::new()),
    };
    let o = attention(&c, &i);
    let k0 = smelt::stats::kernels_run();
    // The default plan on a GPU (the tensor-core kernel); the CPU plans
    // fused by default only past 2^26 scores, so it is asked for there.
    match dev {
        smelt::Device::Cpu => o
            .realize_with(Planning::from(Fusion::On).attention(AttentionFusion::On))
            .unwrap(),
        _ => o.realize().unwrap(),
    };
    assert_eq!(
        smelt::stats::kernels_run() - k0,
        1,
        "one kernel at {len} tokens"
    );
    let got = values(&o);
    for r in [0, 1, 63, 64, len / 2 + 17, len - 2, len - 1] {
        let want = reference_row(&c, &i, 0, r);
        for (col, w) in want.iter().enumerate() {
            let g = got[r * 64 + col];
            assert!(
                (g - w).abs() <= tolerance(DType::F16) * (1.0 + w.abs()),
                "row {r} column {col}: {g}, want {w}"
            );
        }
    }
}

/// Without `SMELT_ATTENTION_TILE`, the tensor-core kernel's tile follows
/// the measured sweeps (`ptx::attention::measured_tile`): on sm_90,
/// `wgmma` for prefill up to head dim 128 (two warpgroups past 64 and
/// causal at 64, three without a mask at 64, on the copy engine, causal
/// row blocks last first); on sm_80 (and sm_90 otherwise) `mma.sync` with 128-row CTAs
/// (4 warps of 32 rows) for prefill, 64-row CTAs for short queries and
/// for causal attention at head dims up to 64.
#[test]
fn default_tile_follows_the_measured_sweep() {
    use smelt_codegen::ptx::{emit, Target};
    if std::env::var_os("SMELT_ATTENTION_TILE").is_some() {
        println!("skipped: SMELT_ATTENTION_TILE names a tile");
        return;
    }
    if !smelt_codegen::env::flag("SMELT_ATTENTION_MMA", true) {
        println!("skipped: SMELT_ATTENTION_MMA=0");
        return;
    }
    // (query rows, key rows, head dim, causal, rows per CTA and threads
    // on sm_80, on sm_90)
    for (lq, lk, d, causal, sm80, sm90) in [
        (200, 200, 128, false, (128, 128), (128, 256)),
        (200, 200, 128, true, (128, 128), (128, 256)),
        (200, 200, 64, false, (128, 128), (192, 384)),
        (200, 200, 64, true, (64, 128), (128, 256)),
        (64, 300, 128, false, (64, 128), (64, 128)),
        (1, 300, 128, false, (64, 128), (64, 128)),
        (100, 100, 256, false, (64, 128), (64, 128)),
    ] {
        let mut c = Case::new(&[2], lq, lk, d, DType::F16);
        if causal {
            c.mask = Mask::CausalShifted;
        }
        let o = attention(&c, &inputs(&c, 1, &[]));
        let s = o.schedule(Planning::from(Fusion::On).attention(AttentionFusion::On));
        let it = s
            .items
            .iter()
            .find(|it| it.kernel.kind.name() == "attention")
            .expect("an attention kernel");
        for (target, (bm, threads)) in Target::CHECKED.iter().zip([sm80, sm90]) {
            let p = emit(&it.kernel, target).expect("emits");
            let ctas = 2 * (lq as u32).div_ceil(bm);
            let l = &p.launches[0];
            assert_eq!(l.block, (threads, 1, 1), "{c:?} sm_{}", target.sm);
            // (The grid's y is the split count under SMELT_ATTENTION_SPLITS.)
            assert_eq!(l.grid.0, ctas, "{c:?}: {bm} rows a CTA");
            // Warpgroup MMAs on sm_90 up to head dim 128 (decode too).
            let wgmma = target.sm >= 90 && d <= 128;
            assert_eq!(p.ptx.contains("wgmma.mma_async"), wgmma, "{c:?}");
            let several = wgmma && threads >= 256;
            let tma = several && smelt_codegen::env::flag("SMELT_ATTENTION_TMA", true);
            assert_eq!(p.maps.len(), if tma { 2 } else { 0 }, "{c:?}");
            let reversed = p.ptx.contains("row blocks last first");
            assert_eq!(reversed, causal && wgmma, "{c:?} sm_{}", target.sm);
            // `mma.sync` warps without rows (a CTA's last, where `bm`
            // does not divide the rows) skip the compute.
            let skips = p.ptx.contains("only copies tiles");
            assert_eq!(skips, !wgmma && !(lq as u32).is_multiple_of(bm), "{c:?}");
        }
    }
}

/// `SMELT_ATTENTION_SPLITS` as the emitter reads it (a GPU run of this
/// file with it set checks the values of every kernel split that way).
fn forced_splits() -> Option<usize> {
    smelt_codegen::env::var("SMELT_ATTENTION_SPLITS", smelt_codegen::env::parse_splits)
}

/// The fused kernel of `o` as the fused plan schedules it (with its
/// split-KV scratch buffer where it may be split).
fn fused_kernel(o: &Tensor) -> smelt_codegen::Kernel {
    let s = o.schedule(Planning::from(Fusion::On).attention(AttentionFusion::On));
    s.items
        .iter()
        .find(|it| it.kernel.kind.name() == "attention")
        .expect("an attention kernel")
        .kernel
        .clone()
}

/// Split-KV (issue 13): decode-shaped attention (1 to 16 query rows over
/// 4097 or 20000 keys, 8 heads: 8 CTAs unsplit) splits its keys by the
/// default rule into one kernel of two launches (the split key loops,
/// then the combine); fused, the 3-kernel plan and unfused agree with the
/// f64 reference (on the CPU the interpreter runs them and
/// `SMELT_CHECK_PTX=1` assembles the split kernels; on a GPU they run).
/// Top-left causal rows see a few keys only, so most of their splits
/// have none; a row whose additive mask is all `-inf` is NaN.
#[test]
fn split_kv_decode() {
    use smelt_codegen::ptx::{emit, Target};
    // (query rows, keys, head dim, mask, GQA group, dtype)
    let cases = [
        (1, 4097, 64, Mask::None, 1, DType::F16),
        (1, 20000, 128, Mask::CausalShifted, 2, DType::BF16),
        (5, 20000, 64, Mask::CausalShifted, 1, DType::F32),
        (16, 4097, 64, Mask::Causal, 1, DType::F16),
        (16, 4097, 128, Mask::Causal, 1, DType::F32),
        (3, 4097, 80, Mask::None, 4, DType::BF16),
    ];
    for (lq, lk, d, mask, group, dtype) in cases {
        let mut c = Case::new(&[2, 4], lq, lk, d, dtype);
        c.mask = mask;
        c.group = group;
        eprintln!("{c:?}");
        let i = inputs(&c, 3, &[]);
        if forced_splits().is_none() {
            let kernel = fused_kernel(&attention(&c, &i));
            for t in Target::CHECKED {
                let p = emit(&kernel, &t).expect("emits");
                let [main, combine] = &p.launches[..] else {
                    panic!("{c:?}: split into two launches, got {:?}", p.launches)
                };
                assert!(main.grid.1 >= 2, "{c:?}: {main:?}");
                assert!(combine.entry.ends_with("_combine"), "{combine:?}");
                assert_eq!(combine.grid.0, 8 * lq as u32, "{c:?}");
            }
        }
        check_inputs(&c, &i);
    }
    // An additive mask that hides every key from row 1.
    let mut c = Case::new(&[2, 4], 2, 4097, 64, DType::F16);
    c.mask = Mask::Additive;
    let mut i = inputs(&c, 4, &[]);
    let mut bias = i.bias.1.clone();
    bias[c.lk..2 * c.lk].fill(f64::NEG_INFINITY);
    let (t, h) = make(&bias, &[c.lq, c.lk], c.dtype);
    i.bias = (t, h.data);
    let want = reference(&c, &i);
    assert!(want[c.dv].is_nan() && !want[0].is_nan());
    check_inputs(&c, &i);
}

/// Split-KV at the emitter's level, for both emitters (the tensor-core
/// kernel with the default tile, the FMA one for `tile` `None`), f16,
/// bf16, f32 and f64, causal and not: `n` splits asked become at most
/// what the planned scratch buffer holds, in key ranges of whole key
/// tiles (`count = ceil(lk / chunk)`, `chunk = ceil(lk / n)` rounded up
/// to the key tile); the first launch's grid has the count as its `y`,
/// the second is the combine (a CTA per row); 0 or 1 split, or a kernel
/// without a scratch buffer (keys too few for the rule), is one launch.
/// Every kernel assembles for sm_80 and sm_90, and the tensor-core
/// kernels spill nothing at head dims 64 and 128.
#[test]
fn split_kv_launches_and_assemble() {
    use smelt_codegen::env::AttentionTile;
    use smelt_codegen::ptx::{emit_attention_split, ptxas, Target};
    // (query rows, keys, head dim, dtype, causal)
    let cases = [
        (1, 20000, 64, DType::F16, false),
        (16, 20000, 128, DType::BF16, true),
        (7, 9000, 40, DType::F16, true),
        (3, 20000, 64, DType::F32, true),
        (2, 9000, 32, DType::F64, false),
    ];
    let mut jobs = Vec::new();
    for (lq, lk, d, dtype, causal) in cases {
        let mut c = Case::new(&[2, 4], lq, lk, d, dtype);
        if causal {
            c.mask = Mask::CausalShifted;
        }
        let kernel = fused_kernel(&attention(&c, &inputs(&c, 1, &[])));
        let scratch = *kernel.outputs.last().expect("outputs");
        let acc = if dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        assert_eq!(scratch.dtype, acc, "{c:?}");
        let rows = 8 * lq;
        assert_eq!(scratch.len % (rows * (d + 2)), 0, "{c:?}");
        let capacity = scratch.len / (rows * (d + 2));
        // (SMELT_ATTENTION_SPLITS=<n> sizes it for n.)
        if forced_splits().is_none() {
            assert!(capacity >= 7, "{c:?}: scratch for {capacity} splits");
        }
        let half = dtype.size() == 2;
        let tiles: Vec<(Option<AttentionTile>, usize)> = if half {
            // The default tile's key tiles: 64 up to head dim 128.
            vec![(Some(AttentionTile::DEFAULT), 64), (None, 32)]
        } else {
            vec![(None, 32)]
        };
        for (tile, bn) in tiles {
            for want in [0, 1, 2, 3, 7, 1000] {
                for target in Target::CHECKED {
                    let p =
                        emit_attention_split(&kernel, &target, tile.as_ref(), want).expect("emits");
                    let n = want.min(capacity);
                    if n < 2 {
                        assert_eq!(p.launches.len(), 1, "{c:?} {want}");
                        continue;
                    }
                    let chunk = lk.div_ceil(n).next_multiple_of(bn);
                    let count = lk.div_ceil(chunk) as u32;
                    let [main, combine] = &p.launches[..] else {
                        panic!("{c:?} {want}: two launches, got {:?}", p.launches)
                    };
                    assert_eq!(main.grid.1, count, "{c:?} {want} {tile:?}");
                    assert!(count >= 2 && count as usize <= n, "{count} of {n}");
                    let threads = (d as u32).next_multiple_of(32).min(256);
                    assert_eq!(combine.block, (threads, 1, 1));
                    let cols = (d as u32).div_ceil(threads);
                    assert_eq!(combine.grid, (rows as u32, cols, 1), "{c:?}");
                    assert!(p.ptx.contains(&format!(".entry {}(", combine.entry)));
                    let kind = if tile.is_some() { "mma" } else { "fma" };
                    let name = format!("d{d} {dtype:?} {kind} {count} splits");
                    jobs.push((name, target.sm, p.ptx));
                }
            }
        }
    }
    // Keys too few for the rule: no scratch buffer, no split.
    if forced_splits().is_none() {
        let c = Case::new(&[2, 4], 1, 1000, 64, DType::F16);
        let kernel = fused_kernel(&attention(&c, &inputs(&c, 1, &[])));
        assert!(smelt_codegen::ptx::attention_scratch(&kernel).is_none());
        let p = emit_attention_split(&kernel, &Target::CHECKED[1], None, 4).expect("emits");
        assert_eq!(p.launches.len(), 1);
    }
    jobs.sort_by(|a, b| (&a.2, a.1).cmp(&(&b.2, b.1)));
    jobs.dedup_by(|a, b| a.2 == b.2 && a.1 == b.1);
    for ((name, sm, _), r) in jobs.iter().zip(ptxas::assemble_each(&sm_jobs(&jobs))) {
        let Some(info) = r.unwrap_or_else(|e| panic!("{name}: {e}")) else {
            println!("skipped: ptxas not found");
            assert!(
                !smelt_codegen::env::flag("SMELT_REQUIRE_PTXAS", false),
                "SMELT_REQUIRE_PTXAS=1 but ptxas was not found"
            );
            return;
        };
        let spilled = spill_stores(&info);
        println!("{name} sm_{sm}: {spilled} bytes spilled");
        if name.contains(" mma ") && (name.starts_with("d64 ") || name.starts_with("d128 ")) {
            assert_eq!(spilled, 0, "{name} sm_{sm}: {info}");
        }
    }
}

/// Split-KV keeps `causal_skips_masked_values`' decision: top-left causal
/// decode rows (16 rows over 4097 keys, 8 heads: split by the rule) see
/// keys `0..=i` only, and an infinite `v` at every key from 128 on (past
/// any CTA's first key tile) leaves them finite fused, though every
/// split but the first has no key they see (the tensor-core kernel still
/// computes one masked tile of each: the combine skips such splits).
#[test]
fn split_kv_skips_masked_values() {
    for dtype in [DType::F16, DType::F32] {
        let mut c = Case::new(&[2, 4], 16, 4097, 64, dtype);
        c.mask = Mask::Causal;
        let mut i = inputs(&c, 2, &[]);
        let want = reference(&c, &i);
        let mut v = i.v.1.clone();
        for (n, x) in v.iter_mut().enumerate() {
            if n / c.dv % c.lk >= 128 {
                *x = f64::INFINITY;
            }
        }
        let (t, h) = make(&v, &c.shape(c.lk, c.dv, true), dtype);
        i.v = (t, h.data);
        let fused = Planning::from(Fusion::On).attention(AttentionFusion::On);
        let got = values(attention(&c, &i).realize_with(fused).unwrap());
        assert_eq!(got.len(), want.len());
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= tolerance(dtype) * (1.0 + w.abs()),
                "{dtype:?} element {n}: {g}, want {w}"
            );
        }
    }
}
