//! Tensors in and out of files: safetensors (lazy, memory-mapped), npy,
//! npz, and ndarray conversions (with the `ndarray` feature). Round trips
//! on every dtype and through views, known-answer files written byte by
//! byte, and damaged files that must be errors, never aborts.

mod common;

use common::*;
use smelt::{DType, Error, Tensor};
use std::io::Write;
use std::path::PathBuf;

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smelt-files-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const DTYPES: [DType; 5] = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool];

/// Inputs of every dtype, in a non-contiguous layout, with NaN and
/// infinities among the floats.
fn samples() -> Vec<(String, Input)> {
    let specials = [
        1.5,
        f64::NAN,
        -0.0,
        f64::INFINITY,
        -3.0,
        f64::NEG_INFINITY,
        7.0,
    ];
    let mut out = Vec::new();
    for (i, dt) in DTYPES.iter().enumerate() {
        let vals: Vec<f64> = if dt.is_float() {
            specials.to_vec()
        } else {
            vec![1.0, -2.0, 0.0, 5.0, -7.0]
        };
        let layout = LAYOUTS[i % LAYOUTS.len()];
        for (k, shape) in [vec![3, 5], vec![0, 4], vec![], vec![7]].iter().enumerate() {
            let name = format!("{dt}_{k}");
            out.push((name, Input::with_values(layout, shape, *dt, &vals)));
        }
    }
    out
}

fn same_values(what: &str, got: &Tensor, want: &Input) {
    assert_eq!(got.dtype(), want.base.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape.as_slice(), "{what}: shape");
    let g = got.to_vec::<f64>().unwrap();
    let w = want.tensor().to_vec::<f64>().unwrap();
    for (a, b) in g.iter().zip(&w) {
        assert!(a.to_bits() == b.to_bits(), "{what}: {g:?} vs {w:?}");
    }
}

#[test]
fn safetensors_round_trip_every_dtype_lazily() {
    let dir = scratch("st");
    let path = dir.join("all.safetensors");
    let inputs = samples();
    let ts: Vec<Tensor> = inputs.iter().map(|(_, i)| i.tensor()).collect();
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, _)| n.as_str()).zip(&ts).collect();
    smelt::safetensors::save(&path, &named).unwrap();
    let loaded = smelt::safetensors::load(&path, &test_device()).unwrap();
    assert_eq!(loaded.len(), inputs.len());
    for (name, inp) in &inputs {
        same_values(name, &loaded[name], inp);
    }
    // Loaded tensors fuse like any other input.
    let y = (&loaded["float32_0"] * 2.0).exp();
    assert_eq!(y.shape(), &[3, 5]);
    y.realize().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A loaded tensor reads the file when it is first realized, through the
/// mapping: bytes rewritten in place after `load` are what it sees.
#[test]
fn safetensors_tensors_read_the_mapping_when_realized() {
    let dir = scratch("st_lazy");
    let path = dir.join("lazy.safetensors");
    let header = r#"{"v":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}"#;
    let bytes = |a: i32, b: i32| [a.to_le_bytes(), b.to_le_bytes()].concat();
    std::fs::write(&path, handmade_safetensors(header, &bytes(1, 2))).unwrap();
    let loaded = smelt::safetensors::load(&path, &test_device()).unwrap();
    // Same length, rewritten in place: the mapping shows the new bytes.
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::io::Seek::seek(&mut f, std::io::SeekFrom::End(-8)).unwrap();
    f.write_all(&bytes(30, 40)).unwrap();
    f.sync_all().unwrap();
    assert_eq!(loaded["v"].to_vec::<i32>().unwrap(), vec![30, 40]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A safetensors file written byte by byte: the 8-byte header length, the
/// JSON header, then the data.
fn handmade_safetensors(header: &str, data: &[u8]) -> Vec<u8> {
    let mut f = (header.len() as u64).to_le_bytes().to_vec();
    f.extend_from_slice(header.as_bytes());
    f.extend_from_slice(data);
    f
}

#[test]
fn safetensors_known_answer_and_damaged_files() {
    let dir = scratch("st_known");
    let path = dir.join("k.safetensors");
    let mut data = Vec::new();
    for v in [1.0f32, -2.5, 4.0, 0.5] {
        data.extend_from_slice(&v.to_le_bytes());
    }
    data.extend_from_slice(&[1, 0, 1]);
    let header = r#"{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"m":{"dtype":"BOOL","shape":[3],"data_offsets":[16,19]}}"#;
    std::fs::write(&path, handmade_safetensors(header, &data)).unwrap();
    let t = smelt::safetensors::load(&path, &test_device()).unwrap();
    assert_eq!(t["a"].to_vec::<f32>().unwrap(), vec![1.0, -2.5, 4.0, 0.5]);
    assert_eq!(t["m"].to_vec::<bool>().unwrap(), vec![true, false, true]);
    // A dtype smelt lacks, offsets past the end, garbage, a missing file.
    let unsupported = r#"{"c":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}"#;
    std::fs::write(&path, handmade_safetensors(unsupported, &[0; 8])).unwrap();
    match smelt::safetensors::load(&path, &test_device()) {
        Err(Error::Io(m)) => assert!(m.contains("\"c\"") && m.contains("C64"), "{m}"),
        other => panic!("C64 accepted: {:?}", other.map(|m| m.len())),
    }
    let past = r#"{"a":{"dtype":"F32","shape":[1000],"data_offsets":[0,4000]}}"#;
    for bytes in [
        handmade_safetensors(past, &[0; 16]),
        b"\xff\xff\xff\xff\xff\xff\xff\x7fgarbage".to_vec(),
        vec![],
    ] {
        std::fs::write(&path, bytes).unwrap();
        assert!(matches!(
            smelt::safetensors::load(&path, &test_device()),
            Err(Error::Io(_))
        ));
    }
    assert!(matches!(
        smelt::safetensors::load(dir.join("missing"), &test_device()),
        Err(Error::Io(_))
    ));
    let x = Tensor::zeros([2], DType::F32, &test_device());
    assert!(matches!(
        smelt::safetensors::save(&path, &[("x", &x), ("x", &x)]),
        Err(Error::Io(m)) if m.contains("repeats")
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn npy_and_npz_round_trip() {
    let dir = scratch("npy");
    let inputs: Vec<(String, Input)> = samples()
        .into_iter()
        .filter(|(_, i)| i.base.dtype() != DType::BF16)
        .collect();
    for (name, inp) in &inputs {
        let p = dir.join(format!("{name}.npy"));
        smelt::npy::save(&p, &inp.tensor()).unwrap();
        same_values(name, &smelt::npy::load(&p, &test_device()).unwrap(), inp);
    }
    let ts: Vec<Tensor> = inputs.iter().map(|(_, i)| i.tensor()).collect();
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, _)| n.as_str()).zip(&ts).collect();
    let p = dir.join("all.npz");
    smelt::npy::save_npz(&p, &named).unwrap();
    let loaded = smelt::npy::load_npz(&p, &test_device()).unwrap();
    assert_eq!(loaded.len(), inputs.len());
    for (name, inp) in &inputs {
        same_values(name, &loaded[name], inp);
    }
    let b = Tensor::zeros([2], DType::BF16, &test_device());
    assert!(matches!(
        smelt::npy::save(dir.join("b.npy"), &b),
        Err(Error::Io(m)) if m.contains("bfloat16")
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An `.npy` file written byte by byte (format 1.0): magic, version,
/// header length, the header dict padded to 64 bytes, then the data.
fn handmade_npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut f = b"\x93NUMPY\x01\x00".to_vec();
    f.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    f.extend_from_slice(dict.as_bytes());
    f.extend_from_slice(data);
    f
}

#[test]
fn npy_known_answers_byte_orders_fortran_and_damage() {
    let dir = scratch("npy_known");
    let p = dir.join("k.npy");
    let vals = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let be: Vec<u8> = vals.iter().flat_map(|v| v.to_be_bytes()).collect();
    std::fs::write(&p, handmade_npy(">f4", false, "(2, 3)", &be)).unwrap();
    let t = smelt::npy::load(&p, &test_device()).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vals.to_vec(), "big-endian");
    // Fortran order: the same bytes are the transpose's rows.
    let le: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&p, handmade_npy("<f4", true, "(2, 3)", &le)).unwrap();
    let t = smelt::npy::load(&p, &test_device()).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
    );
    let ints: Vec<u8> = [7i32, -8].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&p, handmade_npy("<i4", false, "(2,)", &ints)).unwrap();
    assert_eq!(
        smelt::npy::load(&p, &test_device())
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![7, -8]
    );
    // A header promising far more than the file holds, a truncated body,
    // a dtype smelt lacks, a structured dtype, garbage.
    let damaged = [
        handmade_npy("<f4", false, "(100000000000, 100000)", &le),
        handmade_npy("<f4", false, "(1000,)", &le),
        handmade_npy("<c8", false, "(1,)", &[0; 8]),
        handmade_npy("[('a', '<f4')]", false, "(1,)", &[0; 4]),
        b"not an npy file at all".to_vec(),
    ];
    for (i, bytes) in damaged.into_iter().enumerate() {
        std::fs::write(&p, bytes).unwrap();
        let r = smelt::npy::load(&p, &test_device()).and_then(|t| t.to_vec::<f32>());
        assert!(matches!(r, Err(Error::Io(_))), "damaged file {i} accepted");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn npz_reads_compressed_archives() {
    let dir = scratch("npz");
    let p = dir.join("c.npz");
    let le: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("w.npy", deflated).unwrap();
    zip.write_all(&handmade_npy("<f4", false, "(2,)", &le))
        .unwrap();
    zip.finish().unwrap();
    let m = smelt::npy::load_npz(&p, &test_device()).unwrap();
    assert_eq!(m["w"].to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(feature = "ndarray")]
#[test]
fn ndarray_conversions_keep_shape_and_order() {
    let a = ndarray::Array3::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as i32);
    let view = a.view().permuted_axes([2, 0, 1]);
    let t = Tensor::from_ndarray(&view, &test_device());
    assert_eq!(t.shape(), &[4, 2, 3]);
    assert_eq!(t.to_ndarray::<i32>().unwrap(), view.into_dyn());
    let f = Tensor::from_vec(vec![0.5f32, f32::NAN], [2], &test_device());
    let back = f.to_ndarray::<f32>().unwrap();
    assert_eq!(back.shape(), &[2]);
    assert!(back[[1]].is_nan());
}
