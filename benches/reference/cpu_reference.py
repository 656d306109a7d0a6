"""NumPy (and torch CPU, where importable) reference for benches/cpu.rs: the
same workloads (softmax over [4096, 1024], layer norm over [4096, 4096],
vector add of 2^24, a sum of 2^24, row sums of [4096, 4096], the exact
GELU of [4096, 1024] (NumPy's through scipy.special.erf, where importable),
matmuls of
1024^3 and 2048^3, an MLP block, a small attention, and scans: cumsum along
the rows and down the columns of [4096, 4096] and of 2^24, cummax along rows
(np.maximum.accumulate) and an int64 cumsum, and sorts: np.sort, a stable
np.argsort and an np.partition-based topk of 16 along the rows of
[4096, 4096], np.sort of 2^22 and of int64 rows, and an index_add of
2^20 rows of 64 into 1024 (np.add.at); float32 but the int64 ones and the
index), wall-clock time of each call (the result allocated as the call
makes it, as smelt's realize does), median of 20 runs after 3 warm-up runs.
torch runs with all cores and with one thread.

python3 benches/reference/cpu_reference.py [--smoke] [--only TEXT] [--out FILE]
(--only: the workloads whose name contains TEXT, as benches/cpu.rs takes it)
writes a JSON file (default target/bench/cpu_reference.json) with the
same fields as benches/cpu.rs' cpu.json.
"""
import datetime
import json
import os
import sys
import time

import numpy as np

WARMUP, RUNS = 3, 20


def median_ms(fn):
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_layer_norm(x, eps=1e-5):
    c = x - x.mean(-1, keepdims=True)
    return c / np.sqrt((c * c).mean(-1, keepdims=True) + eps)


def np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.float32(0.7978845608028654) * (x + np.float32(0.044715) * x * x * x)))


def np_gelu():
    """The exact GELU through SciPy's erf (NumPy has none), or None."""
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return lambda x: 0.5 * x * (1 + erf(x * np.float32(0.7071067811865476)))


def np_attention(q, k, v):
    return np_softmax(q @ k.swapaxes(-1, -2) / np.float32(q.shape[-1] ** 0.5)) @ v


def np_topk16(x, k=16):
    # np.partition picks each row's 16 largest; only those are sorted.
    top = np.partition(x, x.shape[-1] - k, -1)[..., -k:]
    return -np.sort(-top, -1)


def np_index_add(x, index, src):
    y = x.copy()
    np.add.at(y, index, src)
    return y


def workloads(smoke):
    s = (lambda full, small: small) if smoke else (lambda full, small: full)
    return [
        ("softmax 4096x1024", [(s(4096, 64), s(1024, 33))], np_softmax,
         lambda t, x: t.softmax(x, -1)),
        ("layer_norm 4096x4096", [(s(4096, 64), s(4096, 65))], np_layer_norm,
         lambda t, x: t.nn.functional.layer_norm(x, x.shape[-1:], eps=1e-5)),
        ("add 2^24", [(s(1 << 24, 1000),), (s(1 << 24, 1000),)], np.add,
         lambda t, a, b: a + b),
        ("sum 2^24", [(s(1 << 24, 1000),)], np.sum, lambda t, x: x.sum()),
        ("row sums 4096x4096", [(s(4096, 64), s(4096, 65))],
         lambda x: x.sum(-1), lambda t, x: x.sum(-1)),
        ("cumsum 4096x4096", [(s(4096, 64), s(4096, 65))],
         lambda x: np.cumsum(x, -1), lambda t, x: t.cumsum(x, -1)),
        ("cumsum axis0 4096x4096", [(s(4096, 64), s(4096, 65))],
         lambda x: np.cumsum(x, 0), lambda t, x: t.cumsum(x, 0)),
        ("cumsum 2^24", [(s(1 << 24, 1000),)], np.cumsum,
         lambda t, x: t.cumsum(x, 0)),
        ("cummax 4096x4096", [(s(4096, 64), s(4096, 65))],
         lambda x: np.maximum.accumulate(x, -1), lambda t, x: t.cummax(x, -1).values),
        ("cumsum i64 4096x4096", [(s(4096, 64), s(4096, 65))],
         lambda x: np.cumsum(x, -1), lambda t, x: t.cumsum(x, -1)),
        ("sort 4096x4096", [(s(4096, 64), s(4096, 65))],
         lambda x: np.sort(x, -1), lambda t, x: t.sort(x, -1).values),
        ("argsort 4096x4096", [(s(4096, 64), s(4096, 65))],
         lambda x: np.argsort(x, -1, kind="stable"),
         lambda t, x: t.argsort(x, dim=-1, stable=True)),
        ("topk16 4096x4096", [(s(4096, 64), s(4096, 65))], np_topk16,
         lambda t, x: t.topk(x, 16, -1).values),
        ("sort 2^22", [(s(1 << 22, 1000),)], np.sort,
         lambda t, x: t.sort(x).values),
        ("sort i64 4096x4096", [(s(4096, 64), s(4096, 65))],
         lambda x: np.sort(x, -1), lambda t, x: t.sort(x, -1).values),
        ("matmul 1024^3", [(s(1024, 33),) * 2] * 2, np.matmul,
         lambda t, a, b: a @ b),
        ("matmul 2048^3", [(s(2048, 65),) * 2] * 2, np.matmul,
         lambda t, a, b: a @ b),
        ("index_add 2^20x64",
         [(s(1024, 16), 64), (s(1 << 20, 1000),), (s(1 << 20, 1000), 64)],
         np_index_add, lambda t, x, i, v: x.index_add(0, i, v)),
        ("gelu 4096x1024", [(s(4096, 64), s(1024, 33))], np_gelu(),
         lambda t, x: t.nn.functional.gelu(x)),
        ("mlp 512x1024x4096",
         [(s(512, 17), s(1024, 33)), (s(1024, 33), s(4096, 65)),
          (s(4096, 65), s(1024, 33))],
         lambda x, w1, w2: np_gelu_tanh(x @ w1) @ w2 + x,
         lambda t, x, w1, w2: t.nn.functional.gelu(x @ w1, approximate="tanh") @ w2 + x),
        ("attention 8x512x64", [(8, s(512, 33), s(64, 16))] * 3, np_attention,
         lambda t, q, k, v: t.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1) @ v),
    ]


def main():
    smoke = "--smoke" in sys.argv
    out = "target/bench/cpu_reference.json"
    if "--out" in sys.argv:
        out = sys.argv[sys.argv.index("--out") + 1]
    try:
        import torch
    except ImportError:
        torch = None
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'workload':<22} {'impl':>18} {'ms':>10}")
    for name, shapes, np_fn, torch_fn in workloads(smoke):
        if only not in name:
            continue
        if "i64" in name:
            xs = [rng.integers(-1000, 1000, sh, dtype=np.int64) for sh in shapes]
        else:
            xs = [rng.standard_normal(sh, dtype=np.float32) for sh in shapes]
        if name.startswith("index_add"):
            # The index holds row numbers of the first input.
            xs[1] = rng.integers(0, shapes[0][0], shapes[1], dtype=np.int64)
        impls = [] if np_fn is None else [("numpy", lambda: np_fn(*xs))]
        if torch is not None:
            ts = [torch.from_numpy(x) for x in xs]
            impls.append(("torch", lambda: torch_fn(torch, *ts)))
            impls.append(("torch 1 thread", lambda: torch_fn(torch, *ts)))
        for impl, fn in impls:
            if torch is not None:
                torch.set_num_threads(1 if impl == "torch 1 thread" else os.cpu_count())
            ms = median_ms(fn)
            print(f"{name:<22} {impl:>18} {ms:>10.3f}")
            rows.append({"workload": name, "impl": impl, "ms": ms})
    report = {
        "date": datetime.date.today().isoformat(),
        "threads": os.cpu_count(),
        "smoke": smoke,
        "numpy": np.__version__,
        "torch": None if torch is None else torch.__version__,
        "results": rows,
    }
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
