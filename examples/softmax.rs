//! Naive softmax (max, sub, exp, sum, div) of a 4096 x 1024 randn matrix:
//! checks that every row sums to 1, prints the kernel count and the time.

use smelt::{DType, Device, Fusion, Tensor};
use std::time::Instant;

fn main() -> smelt::Result<()> {
    let dev = Device::default_device();
    let (m, n) = (4096, 1024);
    let x = Tensor::randn([m, n], DType::F32, 0, &dev);
    x.realize()?;
    let fusion = Fusion::from_env();

    let e = (&x - x.max_keepdim(1)).exp();
    let y = &e / e.sum_keepdim(1);
    let kernels = y.schedule(fusion).items.len();

    let t0 = Instant::now();
    y.realize_with(fusion)?;
    let elapsed = t0.elapsed();

    let sums = y.sum(1).to_vec::<f32>()?;
    let worst = sums.iter().map(|s| (s - 1.0).abs()).fold(0.0f32, f32::max);
    println!(
        "softmax of {m}x{n} f32 on {dev}: {kernels} kernel(s) ({fusion:?}), {:.3} ms",
        elapsed.as_secs_f64() * 1e3
    );
    println!("max |row sum - 1| = {worst:.2e}");
    assert!(worst <= 1e-5, "a row does not sum to 1 (error {worst})");
    println!("{}", y.slice(smelt::s![..2, ..4]));
    Ok(())
}
