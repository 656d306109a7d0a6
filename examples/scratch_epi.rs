use smelt::{DType, Device, Tensor};
fn main() {
    let dev = Device::Cpu;
    let n = 1024;
    let x = Tensor::randn([n, n], DType::F32, 1, &dev);
    x.realize().unwrap();
    let w = Tensor::randn([n, n], DType::F32, 2, &dev);
    w.realize().unwrap();
    let b = Tensor::randn([n], DType::F32, 3, &dev);
    b.realize().unwrap();
    for _ in 0..20 {
        let t = std::time::Instant::now();
        (x.matmul(&w) + &b).relu().realize().unwrap();
        eprintln!("epi {:?}", t.elapsed());
    }
    for _ in 0..5 {
        let t = std::time::Instant::now();
        (&x + &b).relu().realize().unwrap();
        eprintln!("elementwise {:?}", t.elapsed());
    }
}
