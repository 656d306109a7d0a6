//! Element types, their one table of properties, the promotion rules
//! between them and the one conversion rule every backend follows.

use std::fmt;

/// Element type of a tensor.
///
/// Promotion follows PyTorch's `torch.result_type`: the categories order
/// `Bool < integers < floats`, and the higher category wins; within a
/// category the wider type wins, `U8` with `I8` gives `I16` and `F16` with
/// `BF16` gives `F32`.
///
/// ```
/// use smelt_codegen::DType;
/// assert_eq!(DType::I64.promote(DType::F16), DType::F16);
/// assert_eq!(DType::F16.promote(DType::BF16), DType::F32);
/// assert_eq!(DType::U8.promote(DType::I8), DType::I16);
/// assert_eq!(DType::I32.promote(DType::I64), DType::I64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Booleans, one byte each (0 or 1).
    Bool,
    /// 8-bit unsigned integers (arithmetic wraps).
    U8,
    /// 8-bit two's-complement integers (arithmetic wraps).
    I8,
    /// 16-bit two's-complement integers (arithmetic wraps).
    I16,
    /// 32-bit two's-complement integers (arithmetic wraps).
    I32,
    /// 64-bit two's-complement integers (arithmetic wraps); indices
    /// (`argmax`) and integer sums have this type, as in PyTorch.
    I64,
    /// IEEE half precision (computed in `f32`).
    F16,
    /// bfloat16 (computed in `f32`).
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision (computed in `f64`).
    F64,
    /// FP8 E4M3, PyTorch's `float8_e4m3fn` (computed in `f32`): bias 7, 3
    /// mantissa bits, no infinities, NaN is `S.1111.111`, largest finite
    /// 448. Casts round to nearest even; a value that rounds beyond 448,
    /// an infinity or a NaN becomes NaN, as in PyTorch ([`crate::fp8`]).
    F8E4M3,
    /// FP8 E5M2, PyTorch's `float8_e5m2` (computed in `f32`): IEEE-like,
    /// bias 15, 2 mantissa bits, infinities and NaNs, largest finite
    /// 57344. Casts round to nearest even and overflow to infinity.
    F8E5M2,
}

/// The category a dtype promotes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `Bool`.
    Bool,
    /// Unsigned integers (`U8`).
    Unsigned,
    /// Signed integers.
    Signed,
    /// Floating point.
    Float,
}

/// One row of the dtype table.
struct Info {
    kind: Kind,
    size: usize,
    /// Explicit mantissa bits of a float (0 for the others).
    mantissa: u32,
    name: &'static str,
    short: &'static str,
}

impl DType {
    /// Every dtype, narrowest category first.
    pub const ALL: [DType; 12] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::F8E4M3,
        DType::F8E5M2,
    ];

    /// The dtype table: every per-dtype fact the crates need that is not a
    /// conversion lives here.
    fn info(self) -> Info {
        let (kind, size, mantissa, name, short) = match self {
            DType::Bool => (Kind::Bool, 1, 0, "bool", "bool"),
            DType::U8 => (Kind::Unsigned, 1, 0, "uint8", "u8"),
            DType::I8 => (Kind::Signed, 1, 0, "int8", "i8"),
            DType::I16 => (Kind::Signed, 2, 0, "int16", "i16"),
            DType::I32 => (Kind::Signed, 4, 0, "int32", "i32"),
            DType::I64 => (Kind::Signed, 8, 0, "int64", "i64"),
            DType::F16 => (Kind::Float, 2, 10, "float16", "f16"),
            DType::BF16 => (Kind::Float, 2, 7, "bfloat16", "bf16"),
            DType::F32 => (Kind::Float, 4, 23, "float32", "f32"),
            DType::F64 => (Kind::Float, 8, 52, "float64", "f64"),
            DType::F8E4M3 => (Kind::Float, 1, 3, "float8_e4m3fn", "f8e4m3"),
            DType::F8E5M2 => (Kind::Float, 1, 2, "float8_e5m2", "f8e5m2"),
        };
        Info {
            kind,
            size,
            mantissa,
            name,
            short,
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        self.info().size
    }

    /// The promotion category.
    pub fn kind(self) -> Kind {
        self.info().kind
    }

    /// True for the types an index tensor may have (gather, index_select,
    /// embedding, scatter_add): the one place that says which they are.
    pub fn is_index(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// True for the floating-point types.
    pub fn is_float(self) -> bool {
        self.kind() == Kind::Float
    }

    /// True for the floats stored narrower than the `f32` they compute in
    /// (`F16`, `BF16` and the FP8 formats): their sums and products
    /// accumulate in `F32`.
    pub fn is_narrow_float(self) -> bool {
        self.is_float() && self.size() < 4
    }

    /// True for the two FP8 formats.
    pub fn is_fp8(self) -> bool {
        self.is_float() && self.size() == 1
    }

    /// Explicit mantissa bits of a float type (10 for `F16`, 3 for
    /// `F8E4M3`); 0 for the others.
    pub fn mantissa_bits(self) -> u32 {
        self.info().mantissa
    }

    /// The largest magnitude up to which this type holds every integer:
    /// `2^(mantissa + 1)` for floats (2048 for `F16`, 16 for `F8E4M3`),
    /// the range's bound for integers (`int_max`), 1 for `Bool`.
    pub fn exact_int_limit(self) -> i64 {
        if self.is_float() {
            1i64 << (self.mantissa_bits() + 1).min(62)
        } else {
            self.int_max()
        }
    }

    /// True for the integer types (not `Bool`).
    pub fn is_int(self) -> bool {
        matches!(self.kind(), Kind::Signed | Kind::Unsigned)
    }

    /// True for the signed integer types and the floats.
    pub fn is_signed(self) -> bool {
        matches!(self.kind(), Kind::Signed | Kind::Float)
    }

    /// Bits of one element.
    pub fn bits(self) -> u32 {
        8 * self.size() as u32
    }

    /// Smallest value of an integer type or `Bool` (0).
    pub fn int_min(self) -> i64 {
        match self.kind() {
            Kind::Signed => -1i64 << (self.bits() - 1),
            _ => 0,
        }
    }

    /// Largest value of an integer type or `Bool` (1).
    pub fn int_max(self) -> i64 {
        match self.kind() {
            Kind::Signed => ((1u64 << (self.bits() - 1)) - 1) as i64,
            Kind::Bool => 1,
            _ => ((1u64 << self.bits()) - 1) as i64,
        }
    }

    /// Smallest value as an `f64` (`-inf` for floats).
    pub fn min_value(self) -> f64 {
        if self.is_float() {
            f64::NEG_INFINITY
        } else {
            self.int_min() as f64
        }
    }

    /// Largest value as an `f64` (`inf` for floats; `I64`'s rounds to
    /// 2^63, which converts back to `i64::MAX`).
    pub fn max_value(self) -> f64 {
        if self.is_float() {
            f64::INFINITY
        } else {
            self.int_max() as f64
        }
    }

    /// The PTX type of one element in memory (`u8`, `s16`, `f32`, ...;
    /// `Bool` is a `u8`).
    pub fn ptx(self) -> &'static str {
        match self {
            DType::Bool | DType::U8 => "u8",
            DType::I8 => "s8",
            DType::I16 => "s16",
            DType::I32 => "s32",
            DType::I64 => "s64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F8E4M3 | DType::F8E5M2 => "b8",
        }
    }

    /// The type both operands of a binary op are cast to
    /// (`torch.result_type` of two tensors).
    ///
    /// # Panics
    /// On `F8E4M3` with `F8E5M2`, which PyTorch does not promote either:
    /// no FP8 format holds the other, and silently widening would hide a
    /// mixed-format bug (cast one operand explicitly).
    #[track_caller]
    pub fn promote(self, other: DType) -> DType {
        let category = |d: DType| match d.kind() {
            Kind::Bool => 0,
            Kind::Unsigned | Kind::Signed => 1,
            Kind::Float => 2,
        };
        if self == other {
            return self;
        }
        if category(self) != category(other) {
            return if category(self) > category(other) {
                self
            } else {
                other
            };
        }
        match self.kind() {
            Kind::Float if self.is_fp8() && other.is_fp8() => {
                panic!("{self} and {other} do not promote (as in PyTorch): cast one of them first")
            }
            Kind::Float if self.size() == other.size() => DType::F32,
            // U8 with a signed type: the narrowest signed type holding both
            // ranges (I16 for I8).
            k if k != other.kind() => {
                let signed = if k == Kind::Signed { self } else { other };
                if signed.size() > 1 {
                    signed
                } else {
                    DType::I16
                }
            }
            _ if self.size() >= other.size() => self,
            _ => other,
        }
    }

    /// The float type an op such as `exp` or `/` computes in for this input:
    /// integers and bools become `F32` (PyTorch's default float), floats
    /// stay.
    pub fn to_float(self) -> DType {
        if self.is_float() {
            self
        } else {
            DType::F32
        }
    }

    /// The dtype composites (softmax, layer norm, mean, ...) compute their
    /// intermediates in: `F64` for `F64`, `F32` for everything else.
    pub fn compute_float(self) -> DType {
        if self == DType::F64 {
            DType::F64
        } else {
            DType::F32
        }
    }

    /// The name NumPy and PyTorch print (`float32`, `int64`, ...).
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The short name (`f32`, `i64`, ...) of kernel pictures and debug
    /// output.
    pub fn short_name(self) -> &'static str {
        self.info().short
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_is_symmetric_and_matches_torch() {
        for a in DType::ALL {
            for b in DType::ALL {
                if a != b && a.is_fp8() && b.is_fp8() {
                    continue;
                }
                assert_eq!(a.promote(b), b.promote(a));
            }
        }
        assert_eq!(DType::Bool.promote(DType::I32), DType::I32);
        assert_eq!(DType::BF16.promote(DType::I64), DType::BF16);
        assert_eq!(DType::U8.promote(DType::I8), DType::I16);
        assert_eq!(DType::U8.promote(DType::I16), DType::I16);
        assert_eq!(DType::U8.promote(DType::Bool), DType::U8);
        assert_eq!(DType::F64.promote(DType::BF16), DType::F64);
        // FP8 with a wider float is the wider one, with integers itself.
        assert_eq!(DType::F8E4M3.promote(DType::BF16), DType::BF16);
        assert_eq!(DType::F8E5M2.promote(DType::F16), DType::F16);
        assert_eq!(DType::F8E4M3.promote(DType::I64), DType::F8E4M3);
        assert_eq!(DType::Bool.promote(DType::F8E5M2), DType::F8E5M2);
    }

    #[test]
    #[should_panic(expected = "float8_e4m3fn and float8_e5m2 do not promote")]
    fn fp8_formats_do_not_promote() {
        DType::F8E4M3.promote(DType::F8E5M2);
    }

    #[test]
    fn table() {
        assert_eq!(DType::I16.int_min(), i16::MIN as i64);
        assert_eq!(DType::I64.int_max(), i64::MAX);
        assert_eq!(DType::U8.int_max(), 255);
        assert_eq!(DType::I8.size(), 1);
        assert!(DType::U8.is_int() && !DType::U8.is_signed());
        assert_eq!(DType::F64.name(), "float64");
        assert_eq!(DType::F8E4M3.name(), "float8_e4m3fn");
        assert_eq!(DType::F8E5M2.size(), 1);
        assert!(DType::F8E5M2.is_narrow_float() && !DType::F32.is_narrow_float());
        assert_eq!(DType::F16.exact_int_limit(), 2048);
        assert_eq!(DType::F8E4M3.exact_int_limit(), 16);
        assert_eq!(DType::F8E5M2.exact_int_limit(), 8);
        assert_eq!(DType::I8.exact_int_limit(), 127);
    }
}
