use smelt::{DType, Device, Tensor};
fn main() {
    let x = Tensor::randn([4096, 1024], DType::F32, 0, &Device::Cpu);
    x.realize().unwrap();
    let y = x.softmax(-1);
    let z = x.layer_norm(-1, None, None, 1e-5);
    for it in z.schedule(smelt::Fusion::On).items.iter() {
        println!("{}", it.kernel);
    }
    for it in y.schedule(smelt::Fusion::On).items.iter() {
        println!("{}", it.kernel);
    }
}
