//! A NumPy-style data-cleaning pipeline on the best device: a table of
//! 100,000 rows by 16 columns with outliers is standardized per column,
//! clipped to ±3 standard deviations, and then summarized: the column with
//! the largest value in each row (`argmax`), the first column sorted, the 5 largest
//! z-scores of each column before clipping (`topk`: the outliers), and a running total
//! of the first column (`cumsum`). Prints the kernel count of the fused
//! pipeline against the unfused one, checks the results against the CPU
//! backend, and prints a few of them.

use smelt::{realize_all, s, DType, Device, Fusion, Schedule, Tensor};

fn main() -> smelt::Result<()> {
    let dev = Device::default_device();
    let (rows, cols) = (100_000usize, 16usize);
    println!("data cleaning on {dev}: {rows} rows x {cols} columns");

    let outputs = |dev: &Device| -> Vec<Tensor> {
        // Raw data: per-column offsets and scales, and a few huge outliers.
        let noise = Tensor::randn([rows, cols], DType::F32, 7, dev);
        let offset = Tensor::arange(0.0, cols as f64, 1.0, DType::F32, dev) * 10.0;
        let spikes = Tensor::full([rows, cols], 0.001, DType::F32, dev).bernoulli(3);
        let raw = &noise * 2.5 + &offset + spikes * 1000.0;

        // Standardize each column, then clip the outliers.
        let mean = raw.mean_keepdim(0);
        let std = raw.std(0, 1, true);
        let z = (&raw - &mean) / &std;
        let clean = z.clamp(-3.0, 3.0);

        let hottest = clean.argmax(1);
        let (by_first, order) = clean.slice(s![.., 0]).sort(0, false);
        // The outliers clipping removed: the 5 largest z-scores per column.
        let (top5, _) = z.topk(5, 0, true);
        let running = clean.slice(s![.., 0]).cumsum(0);
        vec![clean, hottest, by_first, order, top5, running]
    };

    let ys = outputs(&dev);
    let nodes: Vec<_> = ys.iter().map(|y| y.node().clone()).collect();
    let fused = Schedule::new(&nodes, Fusion::On).items.len();
    let unfused = Schedule::new(&nodes, Fusion::Off).items.len();
    println!("kernels: {fused} fused, {unfused} unfused");
    realize_all(&ys.iter().collect::<Vec<_>>(), Fusion::On)?;

    // The same pipeline on the CPU backend agrees.
    if dev != Device::Cpu {
        let cpu = outputs(&Device::Cpu);
        realize_all(&cpu.iter().collect::<Vec<_>>(), Fusion::On)?;
        for (name, (a, b)) in ["clean", "top5", "running"].iter().zip([
            (&ys[0], &cpu[0]),
            (&ys[4], &cpu[4]),
            (&ys[5], &cpu[5]),
        ]) {
            let (a, b) = (a.to_vec::<f32>()?, b.to_vec::<f32>()?);
            let err = a
                .iter()
                .zip(&b)
                .map(|(x, y)| ((x - y).abs() / y.abs().max(1.0)) as f64)
                .fold(0.0, f64::max);
            println!("{name}: max relative |{dev} - cpu| = {err:.2e}");
            assert!(err <= 1e-3, "{name} differs from the CPU by {err}");
        }
        let idx = |t: &Tensor| t.cast(DType::F32).to_vec::<f32>();
        let same = idx(&ys[1])? == idx(&cpu[1])?;
        println!("argmax equal on both devices: {same}");
    }

    let clean = ys[0].to_vec::<f32>()?;
    let worst = clean.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(worst <= 3.0, "clipping left {worst}");
    let sorted = ys[2].to_vec::<f32>()?;
    assert!(
        sorted.windows(2).all(|w| w[0] <= w[1]),
        "first column not sorted"
    );
    println!("largest |value| after clipping: {worst}");
    println!(
        "top 5 z-scores of the first 4 columns:\n{}",
        ys[4].slice(s![.., ..4])
    );
    println!(
        "hottest column of the first 8 rows: {}",
        ys[1].slice(s![..8])
    );
    println!(
        "running total of the first column, last value: {}",
        ys[5].slice(s![-1..])
    );
    Ok(())
}
