//! Reads from input buffers and writes to outputs, run by run (see
//! [`crate::exec::runs`]): a run whose index steps by 1 is one slice, any
//! other step a strided loop; range checks are intervals of the run.
//! Every index is checked against its buffer before it is touched.

use crate::exec::runs::{for_runs, Run, Runs};
use crate::exec::vals::{class, convert, Class, Vals};
use crate::expr::{Cond, Expr};
use crate::interp::{self, InterpError};
use crate::ir::Kernel;
use crate::outs::Outs;
use crate::{fp8, DType};

/// The points an instruction is evaluated at, of the space of variables
/// with sizes `ranges`: `n` points from `p0`, in segments of `seg`
/// consecutive points whose starts are `stride` apart (one segment for
/// most tiles; a column tile's rows for a scan along a strided axis:
/// `exec::tiling`).
#[derive(Clone, Copy)]
pub struct Space<'a> {
    /// Sizes of the space's variables.
    pub ranges: &'a [i64],
    /// First point.
    pub p0: usize,
    /// Number of points.
    pub n: usize,
    /// Points per segment (`n` for one segment).
    pub seg: usize,
    /// Distance between the starts of consecutive segments.
    pub stride: usize,
}

impl<'a> Space<'a> {
    /// `n` consecutive points from `p0`.
    pub fn contiguous(ranges: &'a [i64], p0: usize, n: usize) -> Space<'a> {
        Space {
            ranges,
            p0,
            n,
            seg: n,
            stride: n,
        }
    }

    /// `segs` segments of `seg` points from `p0`, `stride` apart.
    pub fn segments(ranges: &'a [i64], p0: usize, segs: usize, seg: usize, stride: usize) -> Self {
        if stride == seg {
            return Space::contiguous(ranges, p0, segs * seg);
        }
        Space {
            ranges,
            p0,
            n: segs * seg,
            seg,
            stride,
        }
    }

    /// Whether `runs` gives these points one run: one segment within one
    /// span.
    fn one_run(&self, runs: &Runs) -> bool {
        self.n > 0
            && self.seg == self.n
            && self.p0 / runs.span == (self.p0 + self.n - 1) / runs.span
    }

    /// The runs of `index` and `valid` over these points, segment after
    /// segment (each run's offset counts the points of the segments
    /// before it).
    pub(crate) fn runs<E>(
        &self,
        index: Option<&Expr>,
        valid: &Cond,
        runs: &Runs,
        mut f: impl FnMut(Run) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.seg == self.n {
            return for_runs(self.ranges, self.p0, self.n, index, valid, runs, f);
        }
        for s in 0..self.n / self.seg {
            let (p0, off) = (self.p0 + s * self.stride, s * self.seg);
            for_runs(self.ranges, p0, self.seg, index, valid, runs, |r| {
                f(Run {
                    off: r.off + off,
                    ..r
                })
            })?;
        }
        Ok(())
    }
}

/// Element `j` of a buffer of `T`s decoded by `dec`.
#[inline(always)]
fn elem<T, const N: usize>(buf: &[u8], j: usize, dec: impl Fn([u8; N]) -> T) -> T {
    dec(buf[N * j..N * j + N].try_into().expect("N bytes"))
}

/// Appends elements `base + step * j` for `j` in `0..len` of a buffer of
/// `N`-byte values.
#[inline(always)]
fn read_run<T: Copy, const N: usize>(
    buf: &[u8],
    base: usize,
    step: i64,
    len: usize,
    dec: impl Fn([u8; N]) -> T + Copy,
    out: &mut Vec<T>,
) {
    if len == 0 {
        // Nothing valid: `base` may lie outside the buffer.
        return;
    }
    if step == 0 {
        // A broadcast (a scatter's row index along the row).
        out.extend(std::iter::repeat_n(elem(buf, base, dec), len));
    } else if step == 1 {
        let bytes = &buf[N * base..N * (base + len)];
        out.extend(
            bytes
                .chunks_exact(N)
                .map(|c| dec(c.try_into().expect("N bytes"))),
        );
    } else {
        out.extend((0..len).map(|j| elem(buf, (base as i64 + step * j as i64) as usize, dec)));
    }
}

/// Elements of a buffer to read, in order.
trait Walk {
    /// Appends the elements, decoded by `dec` from `N` bytes each, to
    /// `out`.
    fn read<T: Copy + Default, const N: usize>(
        &self,
        buf: &[u8],
        dec: impl Fn([u8; N]) -> T + Copy,
        out: &mut Vec<T>,
    );
}

/// A run of points of index step `step`: positions `lo..hi` read, 0
/// elsewhere.
struct RunWalk<'r>(&'r Run, i64);

impl Walk for RunWalk<'_> {
    fn read<T: Copy + Default, const N: usize>(
        &self,
        buf: &[u8],
        dec: impl Fn([u8; N]) -> T + Copy,
        out: &mut Vec<T>,
    ) {
        let (r, step) = (self.0, self.1);
        let n = r.hi - r.lo;
        // Unused (and possibly negative) when nothing is valid.
        let first = if n == 0 {
            0
        } else {
            (r.base + step * r.lo as i64) as usize
        };
        out.extend(std::iter::repeat_n(T::default(), r.lo));
        read_run(buf, first, step, n, dec, out);
        out.extend(std::iter::repeat_n(T::default(), r.len - r.hi));
    }
}

/// A column tile (`Columns`): element `base + s * across + j * along` at
/// segment `s`, position `j`, appended segment by segment.
struct ColumnWalk(Columns);

impl Walk for ColumnWalk {
    fn read<T: Copy + Default, const N: usize>(
        &self,
        buf: &[u8],
        dec: impl Fn([u8; N]) -> T + Copy,
        out: &mut Vec<T>,
    ) {
        let c = &self.0;
        let start = out.len();
        out.resize(start + c.segs * c.seg, T::default());
        let tile = &mut out[start..];
        // Position by position, each a contiguous row of the buffer (the
        // segments' elements side by side), in blocks of positions that
        // fill whole lines of the tile.
        for j0 in (0..c.seg).step_by(COLUMN_BLOCK) {
            for j in j0..c.seg.min(j0 + COLUMN_BLOCK) {
                let row = c.base + j as i64 * c.along;
                for s in 0..c.segs {
                    tile[s * c.seg + j] = elem(buf, (row + s as i64) as usize, dec);
                }
            }
        }
    }
}

/// Positions per block of a column tile's transposed copy: a line of
/// `f32`s.
const COLUMN_BLOCK: usize = 16;

/// A tile of `segs` segments of `seg` points whose elements are
/// `base + s + j * along` (segment `s`, position `j`): neighbouring
/// segments are neighbours in memory (a scan down the columns of a
/// matrix, in column tiles).
#[derive(Clone, Copy, Debug)]
struct Columns {
    base: i64,
    along: i64,
    segs: usize,
    seg: usize,
}

impl Columns {
    /// The column tile of `index` over `sp` (segments whose runs are
    /// whole and valid, with bases one element apart), if it is one.
    fn of(index: &Expr, valid: &Cond, runs: &Runs, sp: Space) -> Option<Columns> {
        if sp.seg == sp.n || sp.seg < 2 || !valid.is_always() {
            return None;
        }
        let mut bases = Vec::with_capacity(sp.n / sp.seg);
        sp.runs(Some(index), valid, runs, |r| match r.len == sp.seg {
            true => {
                bases.push(r.base);
                Ok(())
            }
            false => Err(()),
        })
        .ok()?;
        let consecutive = bases.windows(2).all(|w| w[1] == w[0] + 1);
        (consecutive && runs.index.abs() > 1).then(|| Columns {
            base: bases[0],
            along: runs.index,
            segs: bases.len(),
            seg: sp.seg,
        })
    }

    /// The first and last elements the tile touches.
    fn touched(&self) -> (i64, i64) {
        let far = self.base + (self.seg as i64 - 1) * self.along;
        let last = self.segs as i64 - 1;
        (self.base.min(far), self.base.max(far) + last)
    }
}

/// Appends the elements `walk` gives of a `dt` buffer to `out`, which
/// holds `dt`'s class.
fn read_into(dt: DType, buf: &[u8], walk: &impl Walk, out: &mut Vals<'_>) {
    match out {
        Vals::F32(v) => match dt {
            DType::F32 => walk.read(buf, f32::from_le_bytes, v),
            DType::F16 => walk.read(buf, |b| half::f16::from_le_bytes(b).to_f32(), v),
            DType::F8E4M3 | DType::F8E5M2 => walk.read(buf, |b: [u8; 1]| fp8::to_f32(dt, b[0]), v),
            DType::BF16 => walk.read(buf, |b| half::bf16::from_le_bytes(b).to_f32(), v),
            _ => unreachable!("{dt} values are not held in f32"),
        },
        Vals::F32In(_) => unreachable!("reads go to owned vectors"),
        Vals::F64(v) => walk.read(buf, f64::from_le_bytes, v),
        Vals::I64(v) => match dt {
            DType::I64 => walk.read(buf, i64::from_le_bytes, v),
            DType::I32 => walk.read(buf, |b| i32::from_le_bytes(b).into(), v),
            DType::I16 => walk.read(buf, |b| i16::from_le_bytes(b).into(), v),
            DType::I8 => walk.read(buf, |b: [u8; 1]| (b[0] as i8).into(), v),
            DType::U8 => walk.read(buf, |b: [u8; 1]| b[0].into(), v),
            DType::Bool => walk.read(buf, |b: [u8; 1]| (b[0] != 0).into(), v),
            _ => unreachable!("{dt} values are not held in i64"),
        },
    }
}

/// An out-of-bounds load: a scheduler bug, reported as the interpreter
/// does.
fn oob(k: &Kernel, input: usize, j: i64, len: usize) -> InterpError {
    InterpError(format!(
        "kernel {}: load index {j} outside in{input} of {len} elements",
        k.name
    ))
}

/// The first and last index a run touches (valid positions only), if any.
fn touched(r: &Run, step: i64) -> Option<(i64, i64)> {
    (r.hi > r.lo).then(|| {
        let a = r.base + step * r.lo as i64;
        let b = r.base + step * (r.hi - 1) as i64;
        (a.min(b), a.max(b))
    })
}

/// `Load { input, index, valid }` of dtype `dt` at the points of `sp`.
#[allow(clippy::too_many_arguments)]
pub fn load<'a>(
    k: &Kernel,
    input: usize,
    index: &Expr,
    valid: &Cond,
    runs: &Runs,
    buf: &'a [u8],
    dt: DType,
    sp: Space,
    out: &mut Vals<'a>,
) -> Result<(), InterpError> {
    let arg = k.inputs[input];
    if let Some(v) = in_place(k, input, index, valid, runs, buf, dt, sp)? {
        *out = v;
        return Ok(());
    }
    let mut raw = Vals::default();
    match class(arg.dtype) {
        Class::F32 => raw.f32().reserve(sp.n),
        Class::F64 => raw.f64().reserve(sp.n),
        Class::I64 => raw.i64().reserve(sp.n),
    };
    let outside = |(a, b): (i64, i64)| match a < 0 || b as usize >= arg.len {
        true => Err(oob(k, input, if a < 0 { a } else { b }, arg.len)),
        false => Ok(()),
    };
    if let Some(c) = Columns::of(index, valid, runs, sp) {
        outside(c.touched())?;
        read_into(arg.dtype, buf, &ColumnWalk(c), &mut raw);
    } else {
        sp.runs(Some(index), valid, runs, |r| {
            touched(&r, runs.index).map_or(Ok(()), outside)?;
            read_into(arg.dtype, buf, &RunWalk(&r, runs.index), &mut raw);
            Ok::<(), InterpError>(())
        })?;
    }
    *out = match convert(&raw, arg.dtype, dt) {
        std::borrow::Cow::Borrowed(_) => raw,
        std::borrow::Cow::Owned(v) => v,
    };
    Ok(())
}

/// An `F32` load of consecutive elements at every point of `sp` (one run,
/// all valid, step 1) as the input's own memory, when it is aligned for
/// `f32` on a little-endian host; `None` for any other load.
#[allow(clippy::too_many_arguments)]
fn in_place<'a>(
    k: &Kernel,
    input: usize,
    index: &Expr,
    valid: &Cond,
    runs: &Runs,
    buf: &'a [u8],
    dt: DType,
    sp: Space,
) -> Result<Option<Vals<'a>>, InterpError> {
    let arg = k.inputs[input];
    if !cfg!(target_endian = "little")
        || arg.dtype != DType::F32
        || dt != DType::F32
        || runs.index != 1
        || !sp.one_run(runs)
    {
        return Ok(None);
    }
    let mut run = None;
    sp.runs(Some(index), valid, runs, |r| {
        run = Some(r);
        Ok::<(), ()>(())
    })
    .expect("infallible");
    let r = run.expect("one run");
    if r.lo != 0 || r.hi != r.len {
        return Ok(None);
    }
    if r.base < 0 || r.base as usize + r.len > arg.len {
        let bad = if r.base < 0 {
            r.base
        } else {
            r.base + r.len as i64 - 1
        };
        return Err(oob(k, input, bad, arg.len));
    }
    let bytes = &buf[4 * r.base as usize..4 * (r.base as usize + r.len)];
    // SAFETY: every bit pattern is a valid f32, and `align_to` only puts
    // aligned elements in the middle part.
    let (head, vals, _) = unsafe { bytes.align_to::<f32>() };
    Ok((head.is_empty() && vals.len() == r.len).then_some(Vals::F32In(vals)))
}

/// The value of `index` at every point of `sp`, and whether `valid` holds
/// there.
pub fn index_values(index: &Expr, valid: &Cond, runs: &Runs, sp: Space) -> (Vec<i64>, Vec<bool>) {
    let mut idx = Vec::with_capacity(sp.n);
    let mut ok = Vec::with_capacity(sp.n);
    let step = runs.index;
    sp.runs(Some(index), valid, runs, |r| {
        idx.extend((0..r.len).map(|j| r.base + step * j as i64));
        ok.extend((0..r.len).map(|j| r.lo <= j && j < r.hi));
        Ok::<(), ()>(())
    })
    .expect("infallible");
    (idx, ok)
}

/// `Valid(c)` of dtype `dt`: 1 where `c` holds, else 0.
pub fn valid_values<'a>(c: &Cond, runs: &Runs, dt: DType, sp: Space) -> Vals<'a> {
    let mut b = Vec::with_capacity(sp.n);
    sp.runs(None, c, runs, |r| {
        b.extend((0..r.len).map(|j| i64::from(r.lo <= j && j < r.hi)));
        Ok::<(), ()>(())
    })
    .expect("infallible");
    convert(&Vals::I64(b), DType::Bool, dt).into_owned()
}

/// `Gather { input, index, valid, at, stride, len }` of dtype `dt`: `ats`
/// holds the position at every point of `sp`.
#[allow(clippy::too_many_arguments)]
pub fn gather<'a>(
    k: &Kernel,
    g: &crate::ir::Gather,
    runs: &Runs,
    ats: &[i64],
    buf: &[u8],
    dt: DType,
    sp: Space,
) -> Result<Vals<'a>, InterpError> {
    let arg = k.inputs[g.input];
    let (idx, ok) = index_values(&g.index, &g.valid, runs, sp);
    let mut js = Vec::with_capacity(sp.n);
    for p in 0..sp.n {
        if !ok[p] {
            js.push(None);
            continue;
        }
        let a = ats[p];
        if a < 0 || a >= g.len {
            return Err(InterpError(format!(
                "kernel {}: index {a} is out of range for an axis of size {}",
                k.name, g.len
            )));
        }
        let j = idx[p] + a * g.stride;
        if j < 0 || j as usize >= arg.len {
            return Err(oob(k, g.input, j, arg.len));
        }
        js.push(Some(j as usize));
    }
    // Masked points read 0 and touch no memory.
    let mut raw = Vals::default();
    let at = arg.dtype;
    match class(at) {
        Class::F32 => raw
            .f32()
            .extend(js.iter().map(|j| j.map_or(0.0, |j| at.read(buf, j) as f32))),
        Class::F64 => raw
            .f64()
            .extend(js.iter().map(|j| j.map_or(0.0, |j| at.read(buf, j)))),
        Class::I64 => raw
            .i64()
            .extend(js.iter().map(|j| j.map_or(0, |j| at.read_int(buf, j)))),
    }
    Ok(convert(&raw, at, dt).into_owned())
}

/// Encodes values of `dt`'s class (already converted to `dt`) into bytes.
fn encode(dt: DType, vals: &Vals, p: usize, out: &mut [u8]) {
    match vals {
        Vals::F32(_) | Vals::F32In(_) => {
            let v = vals.f32s()[p];
            match dt {
                DType::F32 => out.copy_from_slice(&v.to_le_bytes()),
                DType::F16 => out.copy_from_slice(&half::f16::from_f32(v).to_le_bytes()),
                DType::BF16 => out.copy_from_slice(&half::bf16::from_f32(v).to_le_bytes()),
                DType::F8E4M3 | DType::F8E5M2 => out[0] = fp8::from_f32(dt, v),
                _ => unreachable!("{dt} values are not held in f32"),
            }
        }
        Vals::F64(v) => out.copy_from_slice(&v[p].to_le_bytes()),
        Vals::I64(v) => out.copy_from_slice(&v[p].to_le_bytes()[..dt.size()]),
    }
}

/// Writes `vals` as `N`-byte little-endian elements over `bytes`.
fn put_run<T: Copy, const N: usize>(bytes: &mut [u8], vals: &[T], enc: impl Fn(T) -> [u8; N]) {
    for (b, x) in bytes.chunks_exact_mut(N).zip(vals) {
        b.copy_from_slice(&enc(*x));
    }
}

/// An out-of-bounds store (a scheduler bug) as the interpreter reports it.
fn check_store(k: &Kernel, o: usize, r: &Run, step: i64) -> Result<(), InterpError> {
    let len = k.outputs[o].len;
    match touched(r, step) {
        Some((a, b)) if a < 0 || b as usize >= len => {
            Err(interp::store_outside(k, o, if a < 0 { a } else { b }))
        }
        _ => Ok(()),
    }
}

/// The elements of `F32` output `o` that a store at `index` (runs `runs`)
/// writes at the points of `sp`, as one `f32` slice in point order, when
/// they are consecutive (one run of step 1) and aligned for `f32` on a
/// little-endian host; `None` otherwise (the caller then stores through
/// [`store`]). Errs as [`store`] does for indices outside the output.
///
/// # Safety
/// No other thread accesses these elements while the slice lives (as
/// [`Outs::elems`]).
#[allow(clippy::mut_from_ref)]
pub unsafe fn out_f32<'o>(
    k: &Kernel,
    o: usize,
    index: &Expr,
    runs: &Runs,
    outs: &'o Outs,
    sp: Space,
) -> Result<Option<&'o mut [f32]>, InterpError> {
    if !cfg!(target_endian = "little")
        || k.outputs[o].dtype != DType::F32
        || runs.index != 1
        || !sp.one_run(runs)
    {
        return Ok(None);
    }
    let mut run = None;
    sp.runs(Some(index), &Cond::always(), runs, |r| {
        run = Some(r);
        Ok::<(), ()>(())
    })
    .expect("infallible");
    let r = run.expect("one run");
    check_store(k, o, &r, 1)?;
    // SAFETY: in bounds (checked above); exclusive by the caller's
    // contract.
    let bytes = unsafe { outs.elems(o, r.base as usize, r.len, 4) };
    // SAFETY: every bit pattern is a valid f32 (and every f32 valid
    // bytes), and `align_to_mut` only puts aligned elements in the middle.
    let (head, vals, _) = unsafe { bytes.align_to_mut::<f32>() };
    Ok((head.is_empty() && vals.len() == r.len).then_some(vals))
}

/// Writes `vals` (of dtype `from`, a value per point of `sp`) to output
/// `o` at `index`, converted to the output's dtype.
#[allow(clippy::too_many_arguments)]
pub fn store(
    k: &Kernel,
    o: usize,
    index: &Expr,
    runs: &Runs,
    vals: &Vals,
    from: DType,
    outs: &Outs,
    sp: Space,
) -> Result<(), InterpError> {
    let arg = k.outputs[o];
    let (dt, size) = (arg.dtype, arg.dtype.size());
    let vals = convert(vals, from, dt);
    let step = runs.index;
    if let Some(c) = Columns::of(index, &Cond::always(), runs, sp) {
        let (a, b) = c.touched();
        if a < 0 || b as usize >= arg.len {
            return Err(interp::store_outside(k, o, if a < 0 { a } else { b }));
        }
        // Position by position, each a contiguous row of the output (the
        // segments' elements side by side), in blocks of positions that
        // read whole lines of the tile.
        for j0 in (0..c.seg).step_by(COLUMN_BLOCK) {
            for j in j0..c.seg.min(j0 + COLUMN_BLOCK) {
                let row = (c.base + j as i64 * c.along) as usize;
                // SAFETY: these elements are this tile's points, written by
                // this thread only.
                let bytes = unsafe { outs.elems(o, row, c.segs, size) };
                match (&*vals, dt) {
                    (Vals::F32(_) | Vals::F32In(_), DType::F32) => {
                        let v = vals.f32s();
                        for (s, b) in bytes.chunks_exact_mut(4).enumerate() {
                            b.copy_from_slice(&v[s * c.seg + j].to_le_bytes());
                        }
                    }
                    _ => {
                        for (s, b) in bytes.chunks_exact_mut(size).enumerate() {
                            encode(dt, &vals, s * c.seg + j, b);
                        }
                    }
                }
            }
        }
        return Ok(());
    }
    sp.runs(Some(index), &Cond::always(), runs, |r| {
        check_store(k, o, &r, step)?;
        if step == 1 && dt == DType::F32 {
            // SAFETY: this run's elements are written by this thread only.
            let bytes = unsafe { outs.elems(o, r.base as usize, r.len, size) };
            let v = &vals.f32s()[r.off..r.off + r.len];
            if cfg!(target_endian = "little") {
                // One `memcpy` (a loop of 4-byte copies ran at the
                // baseline width, 10% of a softmax).
                // SAFETY: an `f32` is 4 initialised bytes, no padding; the
                // view borrows `v` and is read as `u8`s (alignment 1).
                let raw =
                    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), 4 * v.len()) };
                bytes.copy_from_slice(raw);
            } else {
                for (b, x) in bytes.chunks_exact_mut(4).zip(v) {
                    b.copy_from_slice(&x.to_le_bytes());
                }
            }
        } else if step == 1 {
            // SAFETY: as above.
            let bytes = unsafe { outs.elems(o, r.base as usize, r.len, size) };
            match (&*vals, dt) {
                // Whole runs of 8-byte values: element by element through
                // `elems` and `encode`'s match took an `int64` scan's
                // store 4x as long as its scan.
                (Vals::F64(v), _) => put_run(bytes, &v[r.off..r.off + r.len], f64::to_le_bytes),
                (Vals::I64(v), DType::I64) => {
                    put_run(bytes, &v[r.off..r.off + r.len], i64::to_le_bytes)
                }
                _ => {
                    for (j, b) in bytes.chunks_exact_mut(size).enumerate() {
                        encode(dt, &vals, r.off + j, b);
                    }
                }
            }
        } else {
            for j in 0..r.len {
                let e = (r.base + step * j as i64) as usize;
                // SAFETY: as above, element by element (a strided run's
                // gaps may belong to other threads).
                let bytes = unsafe { outs.elems(o, e, 1, size) };
                encode(dt, &vals, r.off + j, bytes);
            }
        }
        Ok(())
    })
}
