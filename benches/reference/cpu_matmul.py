"""NumPy reference for benches/cpu_matmul.rs, same cases and protocol: wall
time per call, median of runs for about 2 s (at least 5) after 3 warm-up
runs. Prints JSON to stdout:
{"numpy": version, "blas": name, "cases": {case name: median ms}}.
Run: python3 benches/reference/cpu_matmul.py [--smoke] [--big]
(cargo bench --bench cpu_matmul runs it itself).
"""
import json
import sys
import time

import numpy as np


def median_ms(fn, smoke):
    for _ in range(1 if smoke else 3):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < (1 if smoke else 5) or (not smoke and time.perf_counter() - start < 2.0):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def randn(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32).astype(dtype)


def silu(x):
    return x / (1 + np.exp(-x))


def blas_name():
    try:
        info = np.show_config(mode="dicts")
        return info["Build Dependencies"]["blas"]["name"]
    except Exception:  # older NumPy: no dict mode
        return "unknown BLAS"


def main():
    smoke, big = "--smoke" in sys.argv, "--big" in sys.argv
    cases = {}
    sizes = [64, 96] if smoke else [1024, 2048] + ([4096] if big else [])
    for n in sizes:
        a, b = randn((n, n), np.float32, 1), randn((n, n), np.float32, 2)
        cases[f"matmul f32 {n}^3"] = median_ms(lambda: a @ b, smoke)
    n = 64 if smoke else 1024
    x, w, bias = randn((n, n), np.float32, 3), randn((n, n), np.float32, 4), randn(n, np.float32, 5)
    cases[f"relu(x@w+b) f32 {n}^3"] = median_ms(lambda: np.maximum(x @ w + bias, 0), smoke)
    m, k, h = (16, 32, 64) if smoke else (256, 512, 1024)
    x, w1, w3 = (randn(s, np.float16, i) for i, s in [(6, (m, k)), (7, (k, h)), (8, (k, h))])

    def swiglu():
        # f32 compute (NumPy has no f16 GEMM), f16 in and out like smelt's.
        x32 = x.astype(np.float32)
        h1 = x32 @ w1.astype(np.float32)
        h3 = x32 @ w3.astype(np.float32)
        return (silu(h1) * h3).astype(np.float16)

    cases[f"swiglu f16 {m}x{k}x{h}"] = median_ms(swiglu, smoke)
    print(json.dumps({"numpy": np.__version__, "blas": blas_name(), "cases": cases}))


if __name__ == "__main__":
    main()
