"""PyTorch reference for benches/ops.rs, with the same protocol: GB/s of
torch.cumsum (bytes read and written) over 2^24 elements along the last axis
of [rows, n] for n from 256 to 2^24 (the last is one row) and along the
first axis of [n, 4096], in f32 and bf16 (bf16 results as bf16: dtype= keeps
torch from promoting). GPU time by CUDA events around each run, the GPU kept
busy before the start event (so launch latency is not counted), median of
50 runs after 10 warm-up runs, inputs rotated so that each run reads data
not in L2.
Sorts: torch.sort (values and indices) in f32 and bf16 and torch.topk with
k = 8 and 64 in f32 along the last axis of [rows, n], 2^22 elements, n from
256 to 2^20; GB/s counts the input read once and the values and indices
written (indices counted as 4 bytes, as smelt's i32, though torch writes
int64).
Run on the GPU machine: python3 benches/reference/torch_ops.py
"""
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


def scan_section(ceiling):
    for dt in (torch.float32, torch.bfloat16):
        el = torch.tensor([], dtype=dt).element_size()
        nbytes = 2 * SCAN_ELEMS * el
        print(f"cumsum {str(dt)[6:]}, {SCAN_ELEMS} elements")
        print(f"{'shape':>16} {'ms':>10} {'GB/s':>10} {'% copy':>8}")
        cases = [((SCAN_ELEMS // n, n), -1) for n in SCAN_NS]
        cases.append(((SCAN_ELEMS // SCAN_COLS, SCAN_COLS), 0))
        for shape, axis in cases:
            rot = rotation(nbytes)
            xs = [torch.randn(*shape, device="cuda").to(dt) for _ in range(rot)]
            ms = median_ms(lambda i: torch.cumsum(xs[i], axis, dtype=dt), rot)
            gbps = nbytes / ms / 1e6
            print(f"{str(list(shape)):>16} {ms:>10.4f} {gbps:>10.0f} {100 * gbps / ceiling:>7.1f}%", flush=True)
            del xs


def sort_section(ceiling):
    cases = [(torch.float32, None), (torch.bfloat16, None)] + [(torch.float32, k) for k in TOPK_KS]
    for dt, k in cases:
        el = torch.tensor([], dtype=dt).element_size()
        name = f"sort {str(dt)[6:]}" if k is None else f"topk k={k} {str(dt)[6:]}"
        print(f"{name}, {SORT_ELEMS} elements")
        print(f"{'shape':>16} {'ms':>10} {'GB/s':>10} {'% copy':>8}")
        for n in SORT_NS:
            shape = (SORT_ELEMS // n, n)
            kept = n if k is None else min(k, n)
            nbytes = SORT_ELEMS * el + shape[0] * kept * (el + 4)
            rot = rotation(nbytes)
            xs = [torch.randn(*shape, device="cuda").to(dt) for _ in range(rot)]
            if k is None:
                fn = lambda i: torch.sort(xs[i], dim=-1, descending=False, stable=True)
            else:
                fn = lambda i, k=k: torch.topk(xs[i], k, -1, largest=True, sorted=True)
            ms = median_ms(fn, rot)
            gbps = nbytes / ms / 1e6
            print(f"{str(list(shape)):>16} {ms:>10.4f} {gbps:>10.0f} {100 * gbps / ceiling:>7.1f}%", flush=True)
            del xs


def main():
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    ceiling = copy_gbps(1 << 30)
    print(f"copy of 1 GiB: {ceiling:.0f} GB/s")
    scan_section(ceiling)
    sort_section(ceiling)


if __name__ == "__main__":
    main()
