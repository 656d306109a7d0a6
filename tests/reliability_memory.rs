//! Issue 10, items 6 and 12: memory failures are `Err` (or a clear panic at
//! the op for sizes that cannot exist), and reads realize the tensor itself.

mod common;

use common::test_device;
use smelt::stats::kernels_run;
use smelt::{DType, Device, Error, Fusion, Tensor};
use std::sync::{Mutex, MutexGuard};

/// One test at a time: the GPU test fills device memory, which would make
/// the others fail with out-of-memory if they ran beside it.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_read_realizes_the_tensor_itself() {
    let _serial = serial();
    let dev = test_device();
    let x = Tensor::from_vec((0..24).map(|i| i as f32 / 8.0).collect(), [4, 6], &dev);
    let y = (&x * 2.0 + 1.0).exp();
    let want: Vec<f64> = (0..24).map(|i| (i as f64 / 4.0 + 1.0).exp()).collect();
    let got = y.to_vec::<f32>().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((*g as f64 - w).abs() <= 1e-5 * w, "{g} vs {w}");
    }
    assert!(y.is_realized(), "to_vec left the tensor unrealized");
    let k0 = kernels_run();
    assert_eq!(y.to_vec::<f32>().unwrap(), got);
    assert_eq!(kernels_run(), k0, "a second read ran kernels");

    let s = y.sum(..);
    let total = s.to_scalar::<f32>().unwrap();
    assert!((total as f64 - want.iter().sum::<f64>()).abs() <= 1e-4 * total as f64);
    assert!(s.is_realized(), "to_scalar left the tensor unrealized");

    let z = &x - 1.0;
    let _ = format!("{z}");
    assert!(z.is_realized(), "Display left the tensor unrealized");
}

#[test]
fn a_view_of_a_lazy_tensor_read_twice_computes_the_graph_once() {
    let _serial = serial();
    let dev = test_device();
    let (m, k, n) = (8usize, 5usize, 6usize);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let ta = Tensor::from_vec(a.clone(), [m, k], &dev);
    let tb = Tensor::from_vec(b.clone(), [k, n], &dev);
    let y = ta.matmul(&tb).exp().sum_keepdim(1) + ta.matmul(&tb);
    let v = y.t();
    let mut want = vec![0f64; n * m];
    for i in 0..m {
        let row: Vec<f64> = (0..n)
            .map(|j| {
                (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum()
            })
            .collect();
        let se: f64 = row.iter().map(|x| x.exp()).sum();
        for j in 0..n {
            want[j * m + i] = se + row[j];
        }
    }
    let k0 = kernels_run();
    let first = v.to_vec::<f32>().unwrap();
    let k1 = kernels_run();
    assert!(y.is_realized(), "reading a view left its tensor unrealized");
    let second = v.to_vec::<f32>().unwrap();
    let k2 = kernels_run();
    assert_eq!(first, second);
    for (g, w) in first.iter().zip(&want) {
        assert!(
            (*g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{g} vs {w}"
        );
    }
    assert!(
        k2 - k1 <= 1 && k2 - k1 < k1 - k0,
        "the second read ran {} kernel(s), the first {}",
        k2 - k1,
        k1 - k0
    );
}

#[test]
fn a_failed_host_allocation_is_an_err() {
    let _serial = serial();
    // 2^60 bytes: the element count and the byte size fit, no allocator can
    // give it. The copy kernel's output allocation must fail with `Err`.
    let x = Tensor::zeros([1usize << 58], DType::F32, &Device::Cpu);
    match x.contiguous().realize_with(Fusion::On) {
        Err(Error::OutOfMemory(m)) => assert!(m.contains("bytes"), "{m}"),
        Err(e) => panic!("expected out of memory, got {e}"),
        Ok(_) => panic!("a 2^60-byte buffer was allocated"),
    }
    // The same on the test device (device memory when it is a GPU).
    let y = Tensor::ones([1usize << 58], DType::F32, &test_device()) + 1.0;
    assert!(matches!(y.realize(), Err(Error::OutOfMemory(_))));
    // And a small op still works afterwards.
    let z = Tensor::ones([3], DType::F32, &test_device()) + 1.0;
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![2.0; 3]);
}

#[test]
#[should_panic(expected = "arange: [0, 1000000000000000000000000000000) with step 1")]
fn arange_with_more_elements_than_a_buffer_holds_panics_at_the_op() {
    let _serial = serial();
    let _ = Tensor::arange(0.0, 1e30, 1.0, DType::F32, &Device::Cpu);
}

#[test]
fn arange_still_counts_its_elements() {
    let _serial = serial();
    let t = Tensor::arange(0.5, 3.0, 0.5, DType::F32, &test_device());
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.5, 1.0, 1.5, 2.0, 2.5]);
    let e = Tensor::arange(3.0, 0.0, 1.0, DType::I32, &test_device());
    assert_eq!(e.numel(), 0);
}

#[test]
fn display_computes_and_reads_only_the_corners() {
    let _serial = serial();
    let dev = test_device();
    // 2^48 f32 elements (1 PiB): neither computable nor storable, so the
    // printed corners prove nothing else was computed or downloaded.
    let big = Tensor::full([1usize << 24, 1usize << 24], 1.5, DType::F32, &dev) * 2.0;
    let k0 = kernels_run();
    let s = format!("{big}");
    assert!(kernels_run() - k0 <= 4, "{} kernels", kernels_run() - k0);
    assert!(!s.contains("not computed"), "{s}");
    assert_eq!(s.matches("3.").count(), 36, "{s}");
    assert!(s.contains("..."), "{s}");
    // The corners sit where they belong: row r, column c of a realized
    // tensor prints r * 1000 + c.
    let (r, c) = (9usize, 11usize);
    let data: Vec<i32> = (0..r * c)
        .map(|i| ((i / c) * 1000 + i % c) as i32)
        .collect();
    let t = Tensor::from_vec(data, [r, c], &dev);
    let wide = t.reshape([1, r, c]).expand([120, r, c]);
    let s = format!("{wide}");
    for want in ["0,", "2,", "8,", "10]", "1000", "8010]", "2002"] {
        assert!(s.contains(want), "{want} missing from {s}");
    }
    assert!(!s.contains("3003") && !s.contains(" 5,"), "{s}");
}

/// Devices that do not exist here: the ordinal past the last GPU, and
/// `cuda:0` on a machine without CUDA.
fn missing_devices() -> Vec<Device> {
    let n = smelt::cuda::device_count();
    let mut devs = vec![Device::Cuda(n.max(7))];
    if n == 0 {
        devs.push(Device::Cuda(0));
    }
    devs
}

#[test]
fn every_creation_function_on_a_missing_device_gives_err_at_the_read() {
    let _serial = serial();
    for dev in missing_devices() {
        let made: Vec<(&str, Tensor)> = vec![
            ("from_vec", Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev)),
            ("from_slice", Tensor::from_slice(&[1i32, 2, 3], [3], &dev)),
            ("rand", Tensor::rand([4, 4], DType::F32, 1, &dev)),
            ("randn", Tensor::randn([4, 4], DType::F16, 1, &dev)),
            ("arange", Tensor::arange(0.0, 5.0, 1.0, DType::I32, &dev)),
            ("linspace", Tensor::linspace(0.0, 1.0, 5, DType::F32, &dev)),
            ("eye", Tensor::eye(3, DType::F32, &dev)),
            ("full", Tensor::full([2, 3], 1.5, DType::F32, &dev)),
            ("scalar", Tensor::scalar(2.0f32, &dev)),
        ];
        for (name, t) in made {
            match t.to_vec::<f32>() {
                Err(Error::NoDevice(_)) => {}
                other => panic!("{name} on {dev}: expected Err(NoDevice), got {other:?}"),
            }
            assert!(matches!((&t + 1.0).realize(), Err(Error::NoDevice(_))));
            assert!(format!("{t}").contains("not computed"), "{name}");
        }
    }
}

#[test]
fn created_data_is_placed_once_and_reads_back_exactly() {
    let _serial = serial();
    let dev = test_device();
    let x = Tensor::arange(0.0, 10.0, 1.0, DType::I32, &dev);
    let e = Tensor::eye(3, DType::F32, &dev);
    let l = Tensor::linspace(0.0, 1.0, 5, DType::F32, &dev);
    let y = &x * 2;
    assert_eq!(
        y.to_vec::<i32>().unwrap(),
        (0..10).map(|i| 2 * i).collect::<Vec<_>>()
    );
    assert_eq!(x.to_vec::<i32>().unwrap(), (0..10).collect::<Vec<_>>());
    assert_eq!(
        e.to_vec::<f32>().unwrap(),
        vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    );
    assert_eq!(l.to_vec::<f32>().unwrap(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    let a = Tensor::rand([64], DType::F32, 5, &dev)
        .to_vec::<f32>()
        .unwrap();
    let b = Tensor::rand([64], DType::F32, 5, &Device::Cpu)
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(a, b, "the same seed gives the same values on every device");
}

#[test]
fn filling_gpu_memory_gives_err_and_recovers() {
    let _serial = serial();
    let dev = test_device();
    if dev == Device::Cpu {
        println!("skipped: the test device is the CPU (device memory is only filled on a GPU)");
        return;
    }
    let chunk = 1usize << 26; // 256 MiB of f32
    let pending = Tensor::from_vec(vec![3.0f32; chunk], [chunk], &dev);
    let lazy = Tensor::full([chunk], 2.0, DType::F32, &dev) + 1.0;
    let mut held = Vec::new();
    let mut failed = None;
    for i in 0..4096 {
        let t = Tensor::full([chunk], i as f64, DType::F32, &dev).contiguous();
        match t.realize() {
            Ok(_) => held.push(t),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let failed = failed.expect("device memory never ran out");
    assert!(matches!(failed, Error::OutOfMemory(_)), "{failed}");
    let small = Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev) * 2.0;
    assert_eq!(small.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    // While memory is full, the pending work fails without being lost.
    let while_full = (&pending + &lazy).realize().map(|_| ());
    held.clear();
    if let Err(e) = while_full {
        assert!(matches!(e, Error::OutOfMemory(_)), "{e}");
    }
    let sum = (&pending + &lazy).sum(..).to_scalar::<f32>().unwrap();
    let want = 6.0 * chunk as f64;
    assert!((sum as f64 - want).abs() <= 1e-4 * want, "{sum} vs {want}");
}

/// Realizes a tensor of `len` NaNs of `dtype` and drops it, so that on the
/// CPU a freed buffer of that size (its bytes all NaN) waits for the next
/// output of that size.
fn leave_nan_buffer(len: usize, dtype: DType, dev: &Device) {
    let x = Tensor::full([len], 1.0, dtype, dev);
    let nan = &x * f64::NAN;
    nan.realize().unwrap();
}

#[test]
fn recycled_host_buffers_never_leak_old_values() {
    let _serial = serial();
    let dev = test_device();
    let n = 1usize << 18;
    let f = DType::F32;
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 - 500.0).collect();
    let x = Tensor::from_vec(host.clone(), [n], &dev);
    x.realize().unwrap();

    // A scatter: a copy of zeros, then adds at every third position.
    leave_nan_buffer(n, f, &dev);
    let m = n / 3;
    let idx: Vec<i64> = (0..m).map(|i| (3 * i) as i64).collect();
    let y = Tensor::zeros([n], f, &dev).scatter_add(
        0,
        &Tensor::from_vec(idx, [m], &dev),
        &x.narrow(0, 0, m),
    );
    let mut want = vec![0f32; n];
    for i in 0..m {
        want[3 * i] += host[i];
    }
    assert_eq!(y.to_vec::<f32>().unwrap(), want, "scatter_add");

    // Two halves written by two stores (`cat`), and a padded view.
    leave_nan_buffer(n, f, &dev);
    let h = x.narrow(0, 0, n / 2);
    let y = Tensor::cat(&[&h, &(&h * 2.0)], 0);
    let want: Vec<f32> = (0..n)
        .map(|i| match i < n / 2 {
            true => host[i],
            false => 2.0 * host[i - n / 2],
        })
        .collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want, "cat");
    leave_nan_buffer(n, f, &dev);
    let y = x.narrow(0, 0, n - 10).pad(&[(3, 7)], 0.0);
    let want: Vec<f32> = (0..n)
        .map(|i| match i >= 3 && i < n - 7 {
            true => host[i - 3],
            false => 0.0,
        })
        .collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want, "pad");

    // Sums over an empty axis: zeros with no element read.
    leave_nan_buffer(n, f, &dev);
    let y = Tensor::zeros([n, 0], f, &dev).sum(1);
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0f32; n], "empty sums");

    // The top 2 of each row of 4: values and `i64` positions, each output
    // the size of a recycled buffer.
    leave_nan_buffer(n, f, &dev);
    leave_nan_buffer(n, DType::F64, &dev);
    let pairs = x.reshape([n / 2, 2]);
    let (vals, pos) = Tensor::cat(&[&pairs, &pairs], 1).topk(2, -1, true);
    let got_v = vals.to_vec::<f32>().unwrap();
    let got_p = pos.to_vec::<i64>().unwrap();
    for r in 0..n / 2 {
        let (a, b) = (host[2 * r], host[2 * r + 1]);
        let top = a.max(b);
        assert_eq!(got_v[2 * r..2 * r + 2], [top, top], "topk row {r}");
        let p = &got_p[2 * r..2 * r + 2];
        assert!(
            p.iter().all(|&j| [a, b, a, b][j as usize] == top) && p[0] != p[1],
            "topk positions of row {r}: {p:?}"
        );
    }

    // A long cumsum (its look-back status buffer, where the plan has one).
    leave_nan_buffer(n, f, &dev);
    let ones = Tensor::full([n], 1.0, f, &dev);
    let want: Vec<f32> = (1..=n).map(|i| i as f32).collect();
    assert_eq!(ones.cumsum(0).to_vec::<f32>().unwrap(), want, "cumsum");
}
