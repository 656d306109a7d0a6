"""PyTorch reference for benches/attention.rs: the same cases (numbered from
1 in the same order), dtypes and masks, with the same protocol (CUDA events,
the GPU kept busy before the start event so launch latency is not counted,
median after warm-up; slow plans get fewer runs, at least 5), under torch's
plans:
- eager: the naive code as smelt's bench writes it (scaled scores, the causal
  mask by a where over arange comparisons, the softmax in f32, cast back);
- compile: torch.compile of that function (dynamic=False, one kernel set per
  shape; skipped with --no-compile, it compiles 18 times);
- sdpa-flash / sdpa-cudnn: F.scaled_dot_product_attention restricted to the
  FlashAttention-2 or cuDNN backend (is_causal for the causal cases); a case
  a backend refuses is left out.
Writes torch_attention.json ($SMELT_BENCH_OUT, else target/bench) in
attention.json's format: series "{plan} {dtype} {full|causal}", x the case
number, y TFLOP/s (4 b h sq sk d, halved for causal), ms.
`cargo bench --bench attention -- --compare attention.json
torch_attention.json` prints both side by side.
Run on the GPU machine: python3 benches/reference/torch_attention.py
"""
import datetime
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# (b, h, sq, sk, d, causal): benches/attention.rs's CASES, in order.
CASES = [
    (4, 16, 2048, 2048, 128, False),
    (2, 16, 8192, 8192, 128, False),
    (4, 32, 2048, 2048, 64, False),
    (4, 16, 2048, 2048, 128, True),
    (2, 16, 8192, 8192, 128, True),
    (4, 32, 2048, 2048, 64, True),
    (64, 16, 1, 4096, 128, False),
    (16, 16, 1, 32768, 128, False),
    (8, 16, 1, 131072, 128, False),
]
WARMUP, RUNS, MIN_RUNS, BUDGET_MS = 10, 50, 5, 3000.0


def naive(q, k, v, causal):
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        rows = torch.arange(q.shape[-2], device=q.device).reshape(-1, 1)
        cols = torch.arange(k.shape[-2], device=q.device).reshape(1, -1)
        s = torch.where(cols <= rows, s, float("-inf"))
    return torch.softmax(s.float(), -1).to(q.dtype) @ v


def sdpa(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def median_ms(fn):
    """Median CUDA-event time of fn(); the first call compiles or warms
    caches, a second estimates how many runs fit the budget."""
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    runs = max(MIN_RUNS, min(RUNS, int(BUDGET_MS / max(s.elapsed_time(e), 1e-3))))
    for _ in range(min(WARMUP, runs)):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(400_000)  # about 200 us: the run is queued before it starts
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def main():
    compile_ = "--no-compile" not in sys.argv
    torch._dynamo.config.cache_size_limit = 64
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    plans = [("eager", naive)]
    if compile_:
        plans.append(("compile", torch.compile(naive, dynamic=False)))
    plans += [("sdpa-flash", sdpa(SDPBackend.FLASH_ATTENTION)), ("sdpa-cudnn", sdpa(SDPBackend.CUDNN_ATTENTION))]
    points = []
    for dt in (torch.float16, torch.bfloat16):
        name = str(dt)[len("torch."):]
        print(f"\n{name}: case, plan, ms, TFLOP/s", flush=True)
        for n, (b, h, sq, sk, d, causal) in enumerate(CASES, 1):
            g = torch.Generator(device="cuda").manual_seed(n)
            q, k, v = (torch.randn(b, h, l, d, device="cuda", dtype=dt, generator=g) for l in (sq, sk, sk))
            flops = 4.0 * b * h * sq * sk * d / (2 if causal else 1)
            for plan, fn in plans:
                try:
                    ms = median_ms(lambda: fn(q, k, v, causal))
                except Exception as e:  # a backend that refuses the case
                    print(f"  {n:>2} {plan:<10} skipped: {str(e).splitlines()[0][:100]}", flush=True)
                    continue
                tf = flops / (ms * 1e-3) / 1e12
                print(f"  {n:>2} {plan:<10} {ms:9.3f} {tf:8.1f}", flush=True)
                mask = "causal" if causal else "full"
                points.append({"series": f"{plan} {name} {mask}", "x": float(n), "gbps": tf, "ms": ms})
            del q, k, v
            torch.cuda.empty_cache()
    out = os.environ.get("SMELT_BENCH_OUT", "target/bench")
    os.makedirs(out, exist_ok=True)
    device = f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
    with open(os.path.join(out, "torch_attention.json"), "w") as f:
        json.dump({"device": device, "date": datetime.date.today().isoformat(), "points": points}, f, indent=1)
    print(f"report in {out}/torch_attention.json")


if __name__ == "__main__":
    main()
