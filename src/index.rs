//! The dtype of integer results that count or index: scan sums of
//! integers, `cummax`/`cummin`, `sort`/`argsort`/`topk` indices.

use crate::DType;

/// PyTorch uses `int64`; smelt has no 64-bit integer yet, so `I32` (sums
/// wrap past `i32::MAX`, and a sorted axis may not be longer than
/// `i32::MAX`). The one place to change when `I64` lands.
pub(crate) const INDEX_DTYPE: DType = DType::I32;
