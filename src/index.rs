//! The dtype of integer results that count or index: scan sums of
//! integers, `cummax`/`cummin`, `sort`/`argsort`/`topk` indices.

use crate::DType;

/// `I64`, as in PyTorch (integer scan sums and products wrap past
/// `i64::MAX`). Sort kernels compute positions in `I32` (a sorted axis may
/// not be longer than `i32::MAX`) and widen them when storing.
pub(crate) const INDEX_DTYPE: DType = DType::I64;
