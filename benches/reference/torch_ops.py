"""PyTorch reference for benches/ops.rs: the torch equivalent of every case,
with the same protocol (GPU time by CUDA events around each run, the GPU kept
busy before the start event so launch latency is not counted, median of 50
runs after 10 warm-up runs, inputs rotated so that each run reads data not in
L2) and the same bytes per case (reads plus writes):
- cumsum over 2^24 elements along the last axis of [rows, n], n from 256 to
  2^24 (the last is one row), along the first axis of [n, 4096] and the
  middle one of [64, n, 64], f32 and
  bf16 (bf16 results as bf16: dtype= keeps torch from promoting); the input
  read and the result written.
- torch.sort (values and indices) in f32 and bf16 and torch.topk with k = 8
  and 64 in f32 along the last axis of [rows, n], 2^22 elements, n from 256
  to 2^20; the input read once, values and indices written (indices counted
  as 4 bytes, as in ops.rs, though torch writes int64).
- embedding: F.embedding of int64 ids into [50257, dim] tables, dim 768 and
  4096, f16 and f32, 4096 and 16384 ids (only the ids rotate); the ids read,
  the named rows read once and written.
- index_select along axis 0 of [32768, 1024] with int32 indices (4096, 16384,
  32768), f32 and bf16; the indices read, the rows read and written.
- gather along the last axis (take_along_axis) of [rows, n], 2^24 elements,
  n = 256, 4096, 65536, with an int64 index of the same shape, f32 and bf16;
  the index read, one source element read per index, the result written.
- torch.cat of 2, 4 and 8 equal inputs along the first and the last axis
  into [4096, 4096], f32 and bf16; the inputs read, the result written.
Prints a table per case and writes torch_ops.json ($SMELT_BENCH_OUT, else
target/bench) in ops.json's format, with the same series names and x values:
`cargo bench --bench ops -- --compare ops.json torch_ops.json` then prints
both side by side with the ratio (torch's time over smelt's).
Run on the GPU machine: python3 benches/reference/torch_ops.py
"""
import datetime
import json
import os

import torch

# The protocol (rotation, median of CUDA-event times, copy ceiling) is the
# softmax reference's: one definition for both scripts.
from torch_softmax import copy_gbps, median_ms, rotation

SCAN_ELEMS = 1 << 24
SCAN_NS = [256, 1024, 4096, 16384, 65536, 1 << 20, 1 << 24]
SCAN_COLS = 4096
SORT_ELEMS = 1 << 22
SORT_NS = [256, 1024, 4096, 16384, 65536, 1 << 20]
TOPK_KS = [8, 64]
VOCAB = 50257
DIMS = [768, 4096]
IDS = [4096, 16384]
SELECT_SRC = (32768, 1024)
SELECTS = [4096, 16384, 32768]
GATHER_ELEMS = 1 << 24
GATHER_NS = [256, 4096, 65536]
CAT_SHAPE = (4096, 4096)
CAT_INPUTS = [2, 4, 8]

# The copy ceiling's series name in ops.json.
CEILING = "copy ceiling (1 GiB)"


def name(dt):
    """A dtype's name as smelt prints it (float32, bfloat16, ...)."""
    return str(dt)[len("torch."):]


def size(dt):
    return torch.tensor([], dtype=dt).element_size()


class Report:
    """The points of ops.json's format, each printed as a table row."""

    def __init__(self, ceiling):
        self.ceiling = ceiling
        self.points = [{"series": CEILING, "x": float(1 << 30), "gbps": ceiling, "ms": 0.0}]

    @staticmethod
    def header(title):
        print(f"\n{title}\n{'shape':>15} {'ms':>9} {'GB/s':>10} {'% copy':>8}", flush=True)

    def measure(self, series, x, shape, nbytes, fn, rot):
        """Times fn(i) (i: the rotation index), prints a row, records (series, x)."""
        ms = median_ms(fn, rot)
        gbps = nbytes / ms / 1e6
        print(f"{shape:>15} {ms:>9.4f} {gbps:>10.0f} {100 * gbps / self.ceiling:>7.1f}%", flush=True)
        self.points.append({"series": series, "x": float(x), "gbps": gbps, "ms": ms})


def randn(shape, dt):
    return torch.randn(*shape, device="cuda").to(dt)


def randint(bound, shape, dt):
    return torch.randint(0, bound, shape, device="cuda", dtype=dt)


def scans(r):
    for dt in (torch.float32, torch.bfloat16):
        nbytes = 2 * SCAN_ELEMS * size(dt)
        r.header(f"cumsum {name(dt)}, {SCAN_ELEMS} elements")
        cases = [("last", (SCAN_ELEMS // n, n), -1) for n in SCAN_NS]
        n = SCAN_ELEMS // SCAN_COLS
        cases.append(("first", (n, SCAN_COLS), 0))
        cases.append(("middle", (64, n, SCAN_COLS // 64), 1))
        for along, shape, axis in cases:
            rot = rotation(nbytes)
            xs = [randn(shape, dt) for _ in range(rot)]
            x = shape[axis]
            fn = lambda i: torch.cumsum(xs[i], axis, dtype=dt)
            r.measure(f"cumsum {along} {name(dt)}", x, str(list(shape)), nbytes, fn, rot)
            del xs


def sorts(r):
    cases = [(torch.float32, None), (torch.bfloat16, None)] + [(torch.float32, k) for k in TOPK_KS]
    for dt, k in cases:
        series = f"sort {name(dt)}" if k is None else f"topk k={k} {name(dt)}"
        r.header(f"{series}, {SORT_ELEMS} elements")
        for n in SORT_NS:
            shape = (SORT_ELEMS // n, n)
            kept = n if k is None else min(k, n)
            nbytes = SORT_ELEMS * size(dt) + shape[0] * kept * (size(dt) + 4)
            rot = rotation(nbytes)
            xs = [randn(shape, dt) for _ in range(rot)]
            if k is None:
                fn = lambda i: torch.sort(xs[i], dim=-1, descending=False, stable=True)
            else:
                fn = lambda i, k=k: torch.topk(xs[i], k, -1, largest=True, sorted=True)
            r.measure(series, n, str(list(shape)), nbytes, fn, rot)
            del xs


def embeddings(r):
    for dt in (torch.float16, torch.float32):
        for dim in DIMS:
            series = f"embedding {name(dt)} dim {dim}"
            r.header(f"{series}, vocab {VOCAB}")
            table = randn((VOCAB, dim), dt)
            for n in IDS:
                nbytes = n * 8 + 2 * n * dim * size(dt)
                rot = rotation(nbytes)
                ids = [randint(VOCAB, (n,), torch.int64) for _ in range(rot)]
                fn = lambda i: torch.nn.functional.embedding(ids[i], table)
                r.measure(series, n, f"{n} ids", nbytes, fn, rot)
            del table


def selects(r):
    rows, dim = SELECT_SRC
    for dt in (torch.float32, torch.bfloat16):
        series = f"index_select axis 0 {name(dt)}"
        r.header(f"{series}, source {list(SELECT_SRC)}")
        x = randn(SELECT_SRC, dt)
        for n in SELECTS:
            nbytes = n * 4 + 2 * n * dim * size(dt)
            rot = rotation(nbytes)
            index = [randint(rows, (n,), torch.int32) for _ in range(rot)]
            fn = lambda i: torch.index_select(x, 0, index[i])
            r.measure(series, n, f"{n} rows", nbytes, fn, rot)
        del x


def take_along_axis(r):
    for dt in (torch.float32, torch.bfloat16):
        series = f"gather last {name(dt)}"
        r.header(f"{series}, {GATHER_ELEMS} elements")
        for n in GATHER_NS:
            shape = (GATHER_ELEMS // n, n)
            nbytes = GATHER_ELEMS * (8 + 2 * size(dt))
            rot = rotation(nbytes)
            xs = [randn(shape, dt) for _ in range(rot)]
            index = [randint(n, shape, torch.int64) for _ in range(rot)]
            fn = lambda i: torch.gather(xs[i], -1, index[i])
            r.measure(series, n, str(list(shape)), nbytes, fn, rot)
            del xs, index


def cats(r):
    rows, cols = CAT_SHAPE
    for dt in (torch.float32, torch.bfloat16):
        for axis in (0, -1):
            series = f"cat axis {axis} {name(dt)}"
            r.header(f"{series}, result {list(CAT_SHAPE)}")
            for n in CAT_INPUTS:
                part = (rows // n, cols) if axis == 0 else (rows, cols // n)
                nbytes = 2 * rows * cols * size(dt)
                rot = rotation(nbytes)
                sets = [[randn(part, dt) for _ in range(n)] for _ in range(rot)]
                fn = lambda i: torch.cat(sets[i], axis)
                r.measure(series, n, f"{n} x {list(part)}", nbytes, fn, rot)
                del sets


def main():
    device = torch.cuda.get_device_name()
    print(device, "torch", torch.__version__)
    ceiling = copy_gbps(1 << 30)
    print(f"copy of 1 GiB: {ceiling:.0f} GB/s")
    r = Report(ceiling)
    for section in (scans, sorts, embeddings, selects, take_along_axis, cats):
        section(r)
    out = os.environ.get("SMELT_BENCH_OUT", "target/bench")
    os.makedirs(out, exist_ok=True)
    report = {
        "device": f"{device}, torch {torch.__version__}",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "points": r.points,
    }
    with open(os.path.join(out, "torch_ops.json"), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"report in {out}/torch_ops.json")


if __name__ == "__main__":
    main()
