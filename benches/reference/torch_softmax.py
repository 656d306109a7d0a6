"""PyTorch reference for benches/softmax.rs, with the same protocol: GB/s of
torch.softmax, the naive 5-kernel torch softmax, torch.compile's softmax,
torch.nn.functional.layer_norm (eager and compiled) and vector add, M = 4096
rows. GPU time by CUDA events around each run, the GPU kept busy before the
start event (so launch latency is not counted), median of 50 runs after 10
warm-up runs, inputs rotated so that each run reads data not in L2.
Run on the GPU machine: python3 benches/reference/torch_softmax.py [--no-compile]
"""
import sys
import torch

M = 4096
NS = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]


def rotation(nbytes):
    return max(1, min(64, 100_000_000 // max(1, nbytes)))


def median_ms(fn, rot, warmup=10, runs=50):
    for i in range(warmup):
        fn(i % rot)
    torch.cuda.synchronize()
    times = []
    for i in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(400_000)  # about 200 us: the run is queued before it starts
        s.record()
        fn((warmup + i) % rot)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def naive_softmax(x):
    m = x.max(-1, keepdim=True).values
    e = torch.exp(x - m)
    return e / e.sum(-1, keepdim=True)


def copy_gbps(nbytes):
    rot = rotation(2 * nbytes)
    xs = [torch.empty(nbytes, dtype=torch.uint8, device="cuda") for _ in range(rot)]
    ys = [torch.empty_like(x) for x in xs]
    ms = median_ms(lambda i: ys[i].copy_(xs[i]), rot)
    return 2 * nbytes / ms / 1e6


def main():
    compile_ = "--no-compile" not in sys.argv
    torch._dynamo.config.cache_size_limit = 64  # 20 shapes, each compiled once
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    print(f"copy of 1 GiB: {copy_gbps(1 << 30):.0f} GB/s")
    print("vector add f32")
    for e in range(20, 29, 2):
        n = 1 << e
        rot = rotation(12 * n)
        xs = [(torch.randn(n, device="cuda"), torch.randn(n, device="cuda")) for _ in range(rot)]
        ms = median_ms(lambda i: xs[i][0] + xs[i][1], rot)
        print(f"  2^{e}: {12 * n / ms / 1e6:.0f} GB/s")
    # dynamic=False: one kernel specialised per shape, as the issue measured
    # (a recompile would otherwise switch to a shape-generic kernel).
    sm = torch.compile(lambda x: torch.softmax(x, -1), dynamic=False) if compile_ else None
    ln = torch.compile(torch.nn.functional.layer_norm, dynamic=False) if compile_ else None
    for dt in (torch.float32, torch.bfloat16):
        print(f"softmax / layer_norm {str(dt)[6:]}, GB/s")
        print(f"{'N':>7} {'softmax':>8} {'naive':>8} {'compile':>8} {'layer_norm':>11} {'ln compile':>11}")
        for n in NS:
            el = torch.tensor([], dtype=dt).element_size()
            nbytes = 2 * M * n * el
            rot = rotation(nbytes)
            xs = [torch.randn(M, n, device="cuda").to(dt) for _ in range(rot)]
            w = torch.randn(n, device="cuda").to(dt)
            b = torch.randn(n, device="cuda").to(dt)
            gb = lambda ms: f"{nbytes / ms / 1e6:.0f}"
            row = [gb(median_ms(lambda i: torch.softmax(xs[i], -1), rot))]
            row.append(gb(median_ms(lambda i: naive_softmax(xs[i]), rot)))
            row.append(gb(median_ms(lambda i: sm(xs[i]), rot)) if sm else "-")
            row.append(gb(median_ms(lambda i: torch.nn.functional.layer_norm(xs[i], (n,), w, b), rot)))
            row.append(gb(median_ms(lambda i: ln(xs[i], (n,), w, b), rot)) if ln else "-")
            print(f"{n:>7} {row[0]:>8} {row[1]:>8} {row[2]:>8} {row[3]:>11} {row[4]:>11}", flush=True)
            del xs


if __name__ == "__main__":
    main()
