//! Tensors in and out of `.safetensors` files (Hugging Face's format: a
//! JSON header, then each tensor's little-endian bytes), through the
//! `safetensors` crate.
//!
//! [`load`] maps the file and returns lazy tensors: nothing is read until
//! a tensor is first realized, and then its bytes go from the mapping
//! straight to its device (one upload for a GPU, no host copy in between).
//!
//! ```
//! use smelt::{Device, Tensor};
//! let dir = std::env::temp_dir().join(format!("smelt-doc-st-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("w.safetensors");
//! let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Device::Cpu);
//! smelt::safetensors::save(&path, &[("w", &w)]).unwrap();
//! let loaded = smelt::safetensors::load(&path, &Device::Cpu).unwrap();
//! assert_eq!(loaded["w"].shape(), &[2, 2]);
//! assert_eq!(loaded["w"].to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::runtime::host::{Mapped, Source};
use crate::{DType, Device, Error, Result, Tensor};
use ::safetensors::tensor::{Dtype, SafeTensors, View};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// The file format's name for `dt`.
fn to_format(dt: DType) -> Dtype {
    match dt {
        DType::F64 => Dtype::F64,
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::I64 => Dtype::I64,
        DType::I16 => Dtype::I16,
        DType::I8 => Dtype::I8,
        DType::U8 => Dtype::U8,
        DType::BF16 => Dtype::BF16,
        DType::I32 => Dtype::I32,
        DType::Bool => Dtype::BOOL,
        DType::F8E4M3 => Dtype::F8_E4M3,
        DType::F8E5M2 => Dtype::F8_E5M2,
    }
}

/// The dtype a file's tensor loads as, if smelt has it.
fn from_format(dt: Dtype) -> Option<DType> {
    DType::ALL.into_iter().find(|d| to_format(*d) == dt)
}

/// Every tensor of the file at `path`, by name, as lazy tensors on
/// `device` backed by a read-only mapping of the file.
///
/// The mapping stays valid while any loaded tensor is unrealized; as with
/// every memory-mapped reader, another process must not truncate the file
/// meanwhile.
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened or mapped, is not a valid
/// safetensors file, or holds a dtype smelt does not have (named with the
/// tensor).
pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<HashMap<String, Tensor>> {
    let path = path.as_ref();
    let io = |e: &dyn std::fmt::Display| Error::Io(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| io(&e))?;
    // SAFETY: the mapping is read-only and owned by the tensors that read
    // it; the only hazard, another process shrinking the file, is the
    // documented precondition above.
    let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io(&e))?);
    let st = SafeTensors::deserialize(&map).map_err(|e| io(&e))?;
    let base = map.as_ptr() as usize;
    let mut out = HashMap::new();
    for (name, view) in st.tensors() {
        let dtype = from_format(view.dtype()).ok_or_else(|| {
            io(&format!(
                "tensor {name:?} has dtype {:?}, which smelt does not have",
                view.dtype()
            ))
        })?;
        let data = view.data();
        let source = Source::Mapped(Mapped {
            map: map.clone(),
            start: data.as_ptr() as usize - base,
            len: data.len(),
        });
        let shape = view.shape().to_vec();
        out.insert(name, Tensor::from_source(source, shape, dtype, device));
    }
    Ok(out)
}

/// A realized tensor's bytes, as the format's writer wants them.
struct Bytes {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Bytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Writes `tensors` (name, tensor) to `path` as a safetensors file,
/// realizing each one first. Views are written as their values, row-major.
///
/// # Errors
/// The realize's errors, or [`Error::Io`] when a name repeats or the file
/// cannot be written.
pub fn save(path: impl AsRef<Path>, tensors: &[(&str, &Tensor)]) -> Result<()> {
    let path = path.as_ref();
    let mut bytes = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        if tensors.iter().filter(|(n, _)| n == name).count() > 1 {
            return Err(Error::Io(format!(
                "{}: tensor name {name:?} repeats",
                path.display()
            )));
        }
        bytes.push(Bytes {
            dtype: to_format(t.dtype()),
            shape: t.shape().to_vec(),
            data: t.contiguous_bytes()?,
        });
    }
    let named = tensors.iter().map(|(n, _)| *n).zip(bytes.iter());
    ::safetensors::serialize_to_file(named, None, path)
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))
}
