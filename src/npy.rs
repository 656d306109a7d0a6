//! NumPy's `.npy` (one array) and `.npz` (a zip of `.npy` files, as
//! `numpy.savez` writes) through the `npyz` and `zip` crates.
//!
//! Reading accepts either byte order and C or Fortran order (a Fortran
//! array loads as a transposed view, no copy). Writing produces
//! little-endian, C-order files that `numpy.load` reads; `.npz` entries
//! are stored uncompressed like `numpy.savez`, and compressed archives
//! (`numpy.savez_compressed`) read too. NumPy has no bfloat16 or FP8: save
//! such a tensor after `cast(DType::F32)`.
//!
//! ```
//! use smelt::{Device, Tensor};
//! let dir = std::env::temp_dir().join(format!("smelt-doc-npy-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let x = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], [2, 3], &Device::Cpu);
//! smelt::npy::save(dir.join("x.npy"), &x).unwrap();
//! let y = smelt::npy::load(dir.join("x.npy"), &Device::Cpu).unwrap();
//! assert_eq!(y.shape(), &[2, 3]);
//! assert_eq!(y.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::{DType, Device, Element, Error, Result, Tensor};
use half::f16;
use npyz::{AutoSerialize, Deserialize, NpyFile, Order, TypeChar, WriterBuilder};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;

/// An [`Error::Io`] about `path`.
fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

/// `e` with `path` (and `entry`, for an archive) put in front of a file
/// error's message; other errors (memory, a realize) pass unchanged.
fn within(path: &Path, entry: &str, e: Error) -> Error {
    match e {
        Error::Io(m) if entry.is_empty() => io_err(path, m),
        Error::Io(m) => io_err(path, format!("{entry}: {m}")),
        e => e,
    }
}

/// The array in `npy`, which holds at most `available` bytes of data.
fn read_array<R: Read>(npy: NpyFile<R>, available: u64, device: &Device) -> Result<Tensor> {
    let fail = |m: String| Error::Io(m);
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(fail(format!(
            "structured dtype {:?} is not supported",
            npy.dtype()
        )));
    };
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|d| usize::try_from(*d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| fail(format!("shape {:?} does not fit in memory", npy.shape())))?;
    // A header may promise more than the file holds: checked before any
    // allocation, so a damaged file is an error, not an abort.
    let need = shape
        .iter()
        .try_fold(1u64, |n, d| n.checked_mul(*d as u64))
        .and_then(|n| n.checked_mul(ts.size_field()));
    if need.is_none_or(|n| n > available) {
        return Err(fail(format!(
            "shape {shape:?} of {ts} needs more than the {available} bytes present"
        )));
    }
    // Fortran order stores the transpose: read it in the reversed shape,
    // then view it back.
    let fortran = npy.order() == Order::Fortran && shape.len() > 1;
    let stored: Vec<usize> = if fortran {
        shape.iter().rev().copied().collect()
    } else {
        shape.clone()
    };
    let t = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 8) => read_as::<f64, R>(npy, &stored, device)?,
        (TypeChar::Float, 4) => read_as::<f32, R>(npy, &stored, device)?,
        (TypeChar::Float, 2) => read_as::<f16, R>(npy, &stored, device)?,
        (TypeChar::Int, 8) => read_as::<i64, R>(npy, &stored, device)?,
        (TypeChar::Int, 4) => read_as::<i32, R>(npy, &stored, device)?,
        (TypeChar::Int, 2) => read_as::<i16, R>(npy, &stored, device)?,
        (TypeChar::Int, 1) => read_as::<i8, R>(npy, &stored, device)?,
        (TypeChar::Uint, 1) => read_as::<u8, R>(npy, &stored, device)?,
        (TypeChar::Bool, 1) => read_as::<bool, R>(npy, &stored, device)?,
        _ => return Err(fail(format!("dtype {ts} is not one smelt has"))),
    };
    Ok(if fortran {
        t.permute((0..shape.len()).rev().collect::<Vec<usize>>())
    } else {
        t
    })
}

/// The elements of `npy` as a tensor of `T`'s dtype and `shape`.
fn read_as<T: Element + Deserialize, R: Read>(
    npy: NpyFile<R>,
    shape: &[usize],
    device: &Device,
) -> Result<Tensor> {
    let n = shape.iter().product();
    let mut v: Vec<T> = smelt_codegen::host_alloc::vec_with_capacity(n)?;
    let data = npy.data::<T>().map_err(|e| Error::Io(e.to_string()))?;
    for x in data {
        v.push(x.map_err(|e| Error::Io(e.to_string()))?);
    }
    Ok(Tensor::from_vec(v, shape, device))
}

/// Writes `t` (realized first) as an `.npy` stream.
fn write_array<W: Write>(w: W, t: &Tensor) -> Result<()> {
    let shape: Vec<u64> = t.shape().iter().map(|d| *d as u64).collect();
    match t.dtype() {
        DType::F64 => write_as(w, &shape, t.to_vec::<f64>()?),
        DType::F32 => write_as(w, &shape, t.to_vec::<f32>()?),
        DType::I64 => write_as(w, &shape, t.to_vec::<i64>()?),
        DType::I16 => write_as(w, &shape, t.to_vec::<i16>()?),
        DType::I8 => write_as(w, &shape, t.to_vec::<i8>()?),
        DType::U8 => write_as(w, &shape, t.to_vec::<u8>()?),
        DType::F16 => write_as(w, &shape, t.to_vec::<f16>()?),
        DType::I32 => write_as(w, &shape, t.to_vec::<i32>()?),
        DType::Bool => write_as(w, &shape, t.to_vec::<bool>()?),
        dt @ (DType::BF16 | DType::F8E4M3 | DType::F8E5M2) => Err(Error::Io(format!(
            "NumPy has no {dt}: save t.cast(DType::F32) instead"
        ))),
    }
}

fn write_as<T: AutoSerialize, W: Write>(w: W, shape: &[u64], data: Vec<T>) -> Result<()> {
    let run = || -> std::io::Result<()> {
        let mut out = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(shape)
            .writer(w)
            .begin_nd()?;
        out.extend(data)?;
        out.finish()
    };
    run().map_err(|e| Error::Io(e.to_string()))
}

/// The array in the `.npy` file at `path`, on `device`.
///
/// # Errors
/// [`Error::Io`] when the file cannot be read, is not a valid `.npy`
/// file, or holds a dtype smelt does not have.
pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<Tensor> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    let npy = NpyFile::new(std::io::BufReader::new(file)).map_err(|e| io_err(path, e))?;
    read_array(npy, len, device).map_err(|e| within(path, "", e))
}

/// Writes `t` to `path` as a `.npy` file (realizing it first).
///
/// # Errors
/// The realize's errors, or [`Error::Io`] when the file cannot be written
/// or the dtype is `BF16` or FP8.
pub fn save(path: impl AsRef<Path>, t: &Tensor) -> Result<()> {
    let path = path.as_ref();
    let file = std::fs::File::create(path).map_err(|e| io_err(path, e))?;
    let mut w = std::io::BufWriter::new(file);
    write_array(&mut w, t).map_err(|e| within(path, "", e))?;
    w.flush().map_err(|e| io_err(path, e))
}

/// Every array of the `.npz` archive at `path`, by name (the entry's name
/// without `.npy`).
///
/// # Errors
/// [`Error::Io`] when the archive or an entry cannot be read or holds a
/// dtype smelt does not have.
pub fn load_npz(path: impl AsRef<Path>, device: &Device) -> Result<HashMap<String, Tensor>> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let mut zip =
        zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| io_err(path, e))?;
    let mut out = HashMap::new();
    for i in 0..zip.len() {
        let entry = zip.by_index(i).map_err(|e| io_err(path, e))?;
        let name = entry.name().to_string();
        let size = entry.size();
        let npy = NpyFile::new(entry).map_err(|e| within(path, &name, Error::Io(e.to_string())))?;
        let t = read_array(npy, size, device).map_err(|e| within(path, &name, e))?;
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        out.insert(key, t);
    }
    Ok(out)
}

/// Writes `arrays` (name, tensor) to `path` as an `.npz` archive that
/// `numpy.load` reads, each entry stored uncompressed as `numpy.savez`
/// does.
///
/// # Errors
/// The realize's errors, or [`Error::Io`] when a name repeats, the file
/// cannot be written, or a dtype is `BF16` or FP8.
pub fn save_npz(path: impl AsRef<Path>, arrays: &[(&str, &Tensor)]) -> Result<()> {
    let path = path.as_ref();
    for (name, _) in arrays {
        if arrays.iter().filter(|(n, _)| n == name).count() > 1 {
            return Err(io_err(path, format!("array name {name:?} repeats")));
        }
    }
    let file = std::fs::File::create(path).map_err(|e| io_err(path, e))?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    for (name, t) in arrays {
        let bytes = t.numel() as u64 * t.dtype().size() as u64;
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            // Zip64 for entries of 4 GiB and more (with room for the header).
            .large_file(bytes >= u32::MAX as u64 - 4096);
        zip.start_file(format!("{name}.npy"), options)
            .map_err(|e| io_err(path, e))?;
        write_array(&mut zip, t).map_err(|e| within(path, name, e))?;
    }
    let mut w = zip.finish().map_err(|e| io_err(path, e))?;
    w.flush().map_err(|e| io_err(path, e))
}
