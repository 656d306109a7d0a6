"""Tables and a bar chart for BENCHMARKS.md from benches/cpu.rs' cpu.json and
cpu_reference.py's JSON of the same machine.

python3 benches/reference/cpu_report.py CPU_JSON REF_JSON TITLE SVG_OUT
prints a markdown table (ms per workload and implementation, and smelt's
executor against NumPy and torch on all cores, and its LLVM JIT against
torch where the run has it: > 1 means smelt is faster)
and writes a grouped bar chart of the same times (log scale) to SVG_OUT.
"""
import json
import math
import sys

COLS = ["smelt exec", "smelt llvm", "smelt exec unfused", "smelt interp", "numpy",
        "torch", "torch 1 thread"]
COLOURS = ["#1f77b4", "#17becf", "#aec7e8", "#7f7f7f", "#2ca02c", "#d62728", "#ff9896"]


def load(cpu, ref):
    rows = {}
    for r in json.load(open(cpu))["results"] + json.load(open(ref))["results"]:
        rows.setdefault(r["workload"], {})[r["impl"]] = r["ms"]
    return rows


def table(rows):
    cols = [c for c in COLS if any(c in v for v in rows.values())]
    # (reference, smelt mode) pairs: the reference's time over smelt's.
    pairs = [("numpy", "smelt exec"), ("torch", "smelt exec")]
    if "smelt llvm" in cols:
        pairs.append(("torch", "smelt llvm"))
    names = [f"{m.split()[1]} vs {'NumPy' if o == 'numpy' else o}" for o, m in pairs]
    out = ["| workload | " + " | ".join(cols + names) + " |",
           "|---" * (len(cols) + len(pairs) + 1) + "|"]
    for w, v in rows.items():
        cell = [f"{v[c]:.3f}" if c in v else "" for c in cols]
        ratio = [f"{v[o] / v[m]:.2f}x" if o in v and m in v else "" for o, m in pairs]
        out.append(f"| {w} | " + " | ".join(cell + ratio) + " |")
    return "\n".join(out)


def svg(rows, title):
    cols = [c for c in COLS if any(c in v for v in rows.values())]
    ms = [x for v in rows.values() for x in v.values() if x > 0]
    lo, hi = math.floor(math.log10(min(ms))), math.ceil(math.log10(max(ms)))
    bar, gap, left, top, width = 9, 14, 170, 40, 520
    group = bar * len(cols) + gap
    height = top + group * len(rows) + 40
    x = lambda t: left + (math.log10(t) - lo) / (hi - lo) * width
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 190}" '
         f'height="{height}" font-family="sans-serif" font-size="11">',
         f'<text x="{left}" y="20" font-size="13">{title}</text>']
    for p in range(lo, hi + 1):
        s.append(f'<line x1="{x(10 ** p):.1f}" y1="{top - 5}" x2="{x(10 ** p):.1f}" '
                 f'y2="{height - 35}" stroke="#ddd"/>')
        s.append(f'<text x="{x(10 ** p):.1f}" y="{height - 22}" text-anchor="middle">'
                 f'{10 ** p:g} ms</text>')
    for g, (w, v) in enumerate(rows.items()):
        y0 = top + g * group
        s.append(f'<text x="{left - 6}" y="{y0 + group / 2}" text-anchor="end">{w}</text>')
        for i, c in enumerate(cols):
            if c in v and v[c] > 0:
                s.append(f'<rect x="{left}" y="{y0 + i * bar}" width="{x(v[c]) - left:.1f}" '
                         f'height="{bar - 1}" fill="{COLOURS[COLS.index(c)]}"/>')
    for i, c in enumerate(cols):
        y = top + i * 16
        s.append(f'<rect x="{left + width + 20}" y="{y}" width="10" height="10" '
                 f'fill="{COLOURS[COLS.index(c)]}"/>')
        s.append(f'<text x="{left + width + 36}" y="{y + 9}">{c}</text>')
    s.append(f'<text x="{left + width / 2}" y="{height - 6}" text-anchor="middle">'
             'median wall-clock time, log scale (shorter is faster)</text></svg>')
    return "\n".join(s)


def main():
    cpu, ref, title, out = sys.argv[1:5]
    rows = load(cpu, ref)
    print(table(rows))
    with open(out, "w") as f:
        f.write(svg(rows, title) + "\n")


if __name__ == "__main__":
    main()
