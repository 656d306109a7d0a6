"""cuBLAS reference for benches/matmul.rs: torch.matmul (cuBLAS) TFLOP/s for
the same shapes and dtypes, median of 50 CUDA-event-timed runs after 10
warm-up runs. Run on the GPU machine: python3 benches/reference/torch_matmul.py
"""
import torch

SHAPES = [
    (1, 1024, 1024, 1024),
    (1, 2048, 2048, 2048),
    (1, 4096, 4096, 4096),
    (1, 8192, 8192, 8192),
    (1, 4096, 11008, 4096),
    (1, 4096, 4096, 11008),
    (32, 512, 512, 64),
]


def median_ms(fn, warmup=10, runs=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def main():
    torch.backends.cuda.matmul.allow_tf32 = False  # exact f32, like smelt's default
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    print(f"{'batch':>6} {'m':>6} {'n':>6} {'k':>6} {'dtype':>9} {'cuBLAS TFLOP/s':>15} {'+bias+gelu (2 kernels)':>23}")
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        for bs, m, n, k in SHAPES:
            if dt == torch.float32 and m * n * k > 4096**3:
                continue
            a = torch.randn(bs, m, k, device="cuda", dtype=dt)
            b = torch.randn(bs, n, k, device="cuda", dtype=dt).transpose(1, 2)
            bias = torch.randn(n, device="cuda", dtype=dt)
            flops = 2.0 * bs * m * n * k
            mm = median_ms(lambda: torch.matmul(a, b))
            ep = median_ms(lambda: torch.nn.functional.gelu(torch.matmul(a, b) + bias, approximate="tanh"))
            print(f"{bs:>6} {m:>6} {n:>6} {k:>6} {str(dt)[6:]:>9} {flops / mm / 1e9:>15.1f} {flops / ep / 1e9:>23.1f}")


if __name__ == "__main__":
    main()
