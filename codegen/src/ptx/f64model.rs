//! [`F64Ops`] as Rust arithmetic with PTX's semantics, and the `f64`
//! algorithms run on it against `std` and `libm` (the CPU backend's
//! references) over edge cases and many random points. The PTX that the
//! GPU runs is the same generic functions read by [`super::f64ops::Ptx`],
//! so these tests check its arithmetic step by step; `tests/math.rs`
//! checks the assembled kernels on a GPU.

use super::f64ops::{Cmp, F64Ops, IOp, Rnd};
use super::{f64alg, f64erf, f64trig};
use crate::rng::SplitMix64;

/// The model: `f64` arithmetic (IEEE, as PTX's `.rn`), `u64` integers.
struct Model;

fn cmp<T: PartialOrd>(c: Cmp, a: T, b: T) -> bool {
    match c {
        Cmp::Lt => a < b,
        Cmp::Le => a <= b,
        Cmp::Gt => a > b,
        Cmp::Eq => a == b,
        // PTX's ordered `ne`: false when either is NaN.
        Cmp::Ne => a.partial_cmp(&b).is_some_and(|o| o.is_ne()),
    }
}

/// A PTX shift amount: the low 32 bits, clamped to 64.
fn amount(n: u64) -> u32 {
    (n as u32).min(64)
}

impl F64Ops for Model {
    type F = f64;
    type I = u64;
    type P = bool;
    fn f(&mut self, v: f64) -> f64 {
        v
    }
    fn i(&mut self, v: i64) -> u64 {
        v as u64
    }
    fn add(&mut self, a: f64, b: f64) -> f64 {
        a + b
    }
    fn sub(&mut self, a: f64, b: f64) -> f64 {
        a - b
    }
    fn mul(&mut self, a: f64, b: f64) -> f64 {
        a * b
    }
    fn div(&mut self, a: f64, b: f64) -> f64 {
        a / b
    }
    fn fma(&mut self, a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }
    fn min(&mut self, a: f64, b: f64) -> f64 {
        a.min(b)
    }
    fn max(&mut self, a: f64, b: f64) -> f64 {
        a.max(b)
    }
    fn neg(&mut self, a: f64) -> f64 {
        -a
    }
    fn abs(&mut self, a: f64) -> f64 {
        a.abs()
    }
    fn round(&mut self, r: Rnd, a: f64) -> f64 {
        match r {
            Rnd::Nearest => a.round_ties_even(),
            Rnd::Zero => a.trunc(),
        }
    }
    fn copysign(&mut self, mag: f64, sign: f64) -> f64 {
        mag.copysign(sign)
    }
    fn cmp(&mut self, c: Cmp, a: f64, b: f64) -> bool {
        cmp(c, a, b)
    }
    fn is_nan(&mut self, a: f64) -> bool {
        a.is_nan()
    }
    fn sel(&mut self, p: bool, a: f64, b: f64) -> f64 {
        if p {
            a
        } else {
            b
        }
    }
    fn and(&mut self, p: bool, q: bool) -> bool {
        p && q
    }
    fn or(&mut self, p: bool, q: bool) -> bool {
        p || q
    }
    fn not(&mut self, p: bool) -> bool {
        !p
    }
    fn bits_of(&mut self, a: f64) -> u64 {
        a.to_bits()
    }
    fn float_of(&mut self, a: u64) -> f64 {
        f64::from_bits(a)
    }
    fn iop(&mut self, op: IOp, a: u64, b: u64) -> u64 {
        match op {
            IOp::Add => a.wrapping_add(b),
            IOp::Sub => a.wrapping_sub(b),
            IOp::And => a & b,
            IOp::Or => a | b,
            IOp::Xor => a ^ b,
            IOp::Shl => a.checked_shl(amount(b)).unwrap_or(0),
            IOp::ShrU => a.checked_shr(amount(b)).unwrap_or(0),
            IOp::ShrS => ((a as i64) >> amount(b).min(63)) as u64,
            IOp::MulLo => a.wrapping_mul(b),
            IOp::MulHiU => ((a as u128 * b as u128) >> 64) as u64,
        }
    }
    fn icmp(&mut self, c: Cmp, signed: bool, a: u64, b: u64) -> bool {
        if signed {
            cmp(c, a as i64, b as i64)
        } else {
            cmp(c, a, b)
        }
    }
    fn isel(&mut self, p: bool, a: u64, b: u64) -> u64 {
        if p {
            a
        } else {
            b
        }
    }
    fn int_to_f(&mut self, a: u64, signed: bool) -> f64 {
        if signed {
            a as i64 as f64
        } else {
            a as f64
        }
    }
    fn f_to_int(&mut self, a: f64) -> u64 {
        a as i64 as u64
    }
    fn unless<const N: usize>(
        &mut self,
        skip: bool,
        cur: [f64; N],
        body: impl FnOnce(&mut Self) -> [f64; N],
    ) -> [f64; N] {
        if skip {
            cur
        } else {
            body(self)
        }
    }
}

/// The distance in ulps (0 for equal values and for two NaNs; zeros of
/// different signs are 1 apart, so a lost sign fails).
fn ulps(a: f64, b: f64) -> u64 {
    if a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) {
        return 0;
    }
    let key = |v: f64| {
        let i = v.to_bits() as i64;
        if i < 0 {
            i64::MIN - i
        } else {
            i
        }
    };
    key(a).abs_diff(key(b)).max(1)
}

/// Edge cases and random points of several scales.
fn inputs() -> Vec<f64> {
    let mut rng = SplitMix64::new(9);
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        1e-300,
        -1e-300,
        5e-324,
        -5e-324,
        1e-310,
        2.2250738585072014e-308,
        709.7,
        709.8,
        709.782712893384,
        -708.0,
        -745.0,
        -745.2,
        -746.0,
        1e300,
        -1e300,
        f64::MAX,
        f64::MIN,
        1024.0,
        -1074.0,
        -1075.0,
        1023.9,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        std::f64::consts::FRAC_1_SQRT_2,
        std::f64::consts::SQRT_2,
        std::f64::consts::PI,
        std::f64::consts::FRAC_PI_2,
        std::f64::consts::FRAC_PI_4,
        1.0 + 1e-15,
        1.0 - 1e-16,
        -1.0 + 1e-16,
        1e-8,
        -1e-8,
        0.75,
        1.75,
        2.75,
        4.0,
        5.9,
        6.0,
        20.0,
        22.0,
        40.0,
        -60.0,
        134_217_727.9,
        134_217_728.0,
        1e22,
        6_381_956_970_095_103.0 * 2f64.powi(797),
        5_000_000_000.0,
    ];
    for _ in 0..20_000 {
        let u = rng.next_f64();
        v.push((u - 0.5) * 1500.0);
        v.push((u - 0.5) * 2.0);
        v.push((u - 0.5) * 16.0);
        v.push(f64::from_bits(rng.next_u64()));
    }
    // Near multiples of pi/2, where the reduction cancels.
    for k in 1..2000 {
        let x = k as f64 * std::f64::consts::FRAC_PI_2;
        v.extend([
            x,
            f64::from_bits(x.to_bits() + 1),
            f64::from_bits(x.to_bits() - 1),
        ]);
    }
    v
}

fn check(name: &str, bound: u64, model: impl Fn(f64) -> f64, reference: impl Fn(f64) -> f64) {
    for x in inputs() {
        let (m, r) = (model(x), reference(x));
        assert!(
            ulps(m, r) <= bound,
            "{name}({x:e}) = {m:e}, reference {r:e} ({} ulp)",
            ulps(m, r)
        );
    }
}

#[test]
fn exp_family() {
    check("exp", 2, |x| f64alg::exp(&mut Model, x, false), f64::exp);
    check("exp2", 2, |x| f64alg::exp(&mut Model, x, true), f64::exp2);
    check("expm1", 2, |x| f64alg::expm1(&mut Model, x), f64::exp_m1);
}

#[test]
fn log_family() {
    check("ln", 1, |x| f64alg::log(&mut Model, x, false), f64::ln);
    check("log2", 1, |x| f64alg::log(&mut Model, x, true), f64::log2);
    check("log1p", 1, |x| f64alg::log1p(&mut Model, x), f64::ln_1p);
}

#[test]
fn tanh_sigmoid() {
    check("tanh", 4, |x| f64alg::tanh(&mut Model, x), f64::tanh);
    let op = crate::UnaryOp::Sigmoid;
    check(
        "sigmoid",
        4,
        |x| f64alg::sigmoid(&mut Model, x, false),
        |x| op.eval(x),
    );
    let op = crate::UnaryOp::Silu;
    check(
        "silu",
        4,
        |x| f64alg::sigmoid(&mut Model, x, true),
        |x| op.eval(x),
    );
}

/// `cos` at the hardest case of `inputs`, from mpmath at 400 digits: the
/// host's `cos` is 8 ulp off there.
const HARD_COS: (f64, f64) = (5.319372648326541e255, -4.687165924254628e-19);

#[test]
fn sin_cos() {
    check(
        "sin",
        2,
        |x| f64trig::sincos(&mut Model, x, false),
        f64::sin,
    );
    let cos = |x: f64| {
        if x == HARD_COS.0 {
            HARD_COS.1
        } else {
            x.cos()
        }
    };
    check("cos", 2, |x| f64trig::sincos(&mut Model, x, true), cos);
    // Huge arguments, every exponent.
    let mut rng = SplitMix64::new(3);
    for _ in 0..50_000 {
        let x = f64::from_bits((rng.next_u64() >> 1) | (1 << 62)) * 0.5;
        for x in [x, -x] {
            let (s, c) = (
                f64trig::sincos(&mut Model, x, false),
                f64trig::sincos(&mut Model, x, true),
            );
            assert!(
                ulps(s, x.sin()) <= 2,
                "sin({x:e}) = {s:e}, std {:e}",
                x.sin()
            );
            assert!(
                ulps(c, cos(x)) <= 2,
                "cos({x:e}) = {c:e}, std {:e}",
                x.cos()
            );
        }
    }
}

#[test]
fn erf_gelu() {
    check("erf", 2, |x| f64erf::erf(&mut Model, x), libm::erf);
    // The GELUs' formulas cancel for negative x: compare within |x| ulp
    // of 1 there.
    for (op, f) in [
        (
            crate::UnaryOp::Gelu,
            f64erf::gelu::<Model> as fn(&mut Model, f64) -> f64,
        ),
        (crate::UnaryOp::GeluTanh, f64erf::gelu_tanh::<Model>),
    ] {
        for x in inputs() {
            let (m, r) = (f(&mut Model, x), op.eval(x));
            let tol = 4.0 * f64::EPSILON * (r.abs() + x.abs());
            assert!(
                ulps(m, r) <= 4 || (m - r).abs() <= tol,
                "{}({x:e}) = {m:e}, reference {r:e}",
                op.name()
            );
        }
    }
}

#[test]
fn atan2() {
    let xs = inputs();
    let mut rng = SplitMix64::new(5);
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
    ];
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    for a in specials {
        for b in specials {
            pairs.push((a, b));
        }
    }
    for _ in 0..100_000 {
        let i = rng.next_u64() as usize % xs.len();
        let j = rng.next_u64() as usize % xs.len();
        pairs.push((xs[i], xs[j]));
    }
    for (y, x) in pairs {
        let (m, r) = (f64trig::atan2(&mut Model, y, x), y.atan2(x));
        assert!(ulps(m, r) <= 2, "atan2({y:e}, {x:e}) = {m:e}, std {r:e}");
    }
}

#[test]
fn pow() {
    let xs = inputs();
    let mut rng = SplitMix64::new(7);
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
        2f64.powi(53),
        2f64.powi(53) + 2.0,
        0.3,
    ];
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    for a in specials {
        for b in specials {
            pairs.push((a, b));
        }
    }
    for _ in 0..100_000 {
        let i = rng.next_u64() as usize % xs.len();
        let u = rng.next_f64();
        // Exponents that keep results in range, and integral ones.
        pairs.push((xs[i].abs(), (u - 0.5) * 60.0));
        pairs.push((xs[i], ((u - 0.5) * 40.0).round()));
        pairs.push((1.0 + (u - 0.5) * 1e-3, (rng.next_f64() - 0.5) * 1.4e6));
        // |y ln x| near 709 and 745: results near overflow, subnormal.
        let x = 0.5 + 3.5 * u;
        let t = if rng.next_u64().is_multiple_of(2) {
            700.0
        } else {
            -700.0
        };
        pairs.push((x, (t + 50.0 * rng.next_f64()) / x.ln()));
    }
    for (x, y) in pairs {
        let (m, r) = (f64alg::pow(&mut Model, x, y), x.powf(y));
        assert!(ulps(m, r) <= 2, "pow({x:e}, {y:e}) = {m:e}, std {r:e}");
    }
}
