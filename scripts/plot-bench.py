#!/usr/bin/env python3
"""plot-bench.py — PNG plots of a cgjit-bench JSON file (`cgjit-bench --json FILE`), drawn by gnuplot.

usage: scripts/plot-bench.py BENCH.json [OUTDIR]

Writes into OUTDIR (default: the JSON file's folder):
  bench-workloads.png  per workload (chain and temps per N, mlp, cnn, gpt2, the elementwise ones),
                       in each cgjit mode the bench ran (r-o, def, max): median µs per step
                       eager, replayed by cgjit, as a hand-built CUDA graph (floor), the GPU-busy
                       time (CUPTI) and PyTorch's eager, compile and reduce-overhead times where the
                       file has them (cgjit-bench --compare); log scale
  bench-chain.png      the chain sweep in mode reduce-overhead: µs per kernel against N (run the bench with
                       --workload chain --sizes 1,2,5,10,20,50,100,200,500,1000 for a full curve)
A series with no figure in the file is left out of the plot; a missing figure leaves a gap.
A top-level "note" in the file (cgjit-bench writes none) is printed under the title: say there
where figures came from when they are not a bench run's own.

Runs where the bench ran or anywhere else: only python3 and gnuplot are needed. Exit status 0
plots written; 1 gnuplot failed; 2 bad arguments or not a bench JSON file; 77 gnuplot is not
installed (one line says so; `scripts/deps.sh bench` installs it).
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
GP_DIR = os.path.join(HERE, "plots")
EXIT_NO_GNUPLOT = 77

# (JSON key, legend title, colour): the order of the bars and lines.
SERIES = [
    ("eager_us", "eager", "#d62728"),
    ("replay_us", "cgjit replay", "#1f77b4"),
    ("floor_us", "hand-built graph (floor)", "#2ca02c"),
    ("gpu_busy_us", "GPU busy (CUPTI)", "#7f7f7f"),
    ("torch_eager_us", "torch eager", "#ff7f0e"),
    ("torch_compile_us", "torch.compile", "#9467bd"),
    ("torch_reduce_overhead_us", "torch reduce-overhead", "#8c564b"),
]
CHAIN_SERIES = SERIES[:4]
MODELS = ("mlp", "cnn", "gpt2")


def fail(msg, status=2):
    print(f"plot-bench: {msg}", file=sys.stderr)
    sys.exit(status)


def number(row, key):
    """The row's figure for key, or None where it is missing, null or not a positive number."""
    v = row.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        return None
    return float(v)


MODE_TAGS = {"reduce-overhead": "r-o", "default": "def", "max-autotune": "max"}


def tagged(label, r):
    """A row's label with its cgjit mode where the bench ran several (cgjit-bench --modes)."""
    mode = r.get("mode")
    return f"{label} {MODE_TAGS.get(mode, mode)}" if mode else label


def workload_rows(bench):
    """(label, row) per workload run: chain and temps per N, then the models and the elementwise
    workloads, each in every mode the bench ran."""
    rows = [(tagged(f"chain N={r['n']}", r), r) for r in bench.get("results") or []]
    rows += [(tagged(f"temps N={r['n']}", r), r) for r in (bench.get("temps") or {}).get("results") or []]
    for m in MODELS:
        rows += [(tagged(m, r), r) for r in (bench.get(m) or {}).get("results") or []]
    rows += [(tagged(r.get("workload", "elementwise"), r), r)
             for r in (bench.get("elementwise") or {}).get("results") or []]
    return rows


def table(rows, series, first):
    """The data file's text and the series kept (those with at least one figure). first(label,
    row) gives the first column; each figure is divided by the row's divisor (1 or N)."""
    kept = [s for s in series if any(number(r, s[0]) is not None for _, r, _ in rows)]
    lines = ['"label" ' + " ".join(f'"{t}"' for _, t, _ in kept)]
    for label, r, div in rows:
        cells = []
        for key, _, _ in kept:
            v = number(r, key)
            cells.append("?" if v is None else f"{v / div:.6g}")
        lines.append(f"{first(label, r)} " + " ".join(cells))
    return "\n".join(lines) + "\n", kept


def terminal():
    """pngcairo where this gnuplot has it (antialiased), else libgd's png."""
    probe = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"], capture_output=True, text=True)
    return "pngcairo" if probe.returncode == 0 and not probe.stderr.strip() else "png"


def gnuplot(script, data, out, kept, title, note, term, width, nrows):
    def q(s):  # a gnuplot string literal (in double quotes gnuplot reads \n as a line break)
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    note = "\n".join(textwrap.wrap(note, width))
    settings = "; ".join([
        f"data={q(data)}", f"out={q(out)}", f"term={q(term)}", f"title={q(title)}", f"note={q(note)}",
        f"nseries={len(kept)}", f"colors={q(' '.join(c for _, _, c in kept))}", f"nrows={nrows}",
    ])
    run = subprocess.run(["gnuplot", "-e", settings, script], capture_output=True, text=True)
    if run.returncode != 0 or not os.path.exists(out) or os.path.getsize(out) == 0:
        fail(f"gnuplot failed on {os.path.basename(script)}: {run.stderr.strip()}", 1)


def main(argv):
    if len(argv) not in (2, 3) or argv[1] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1] if len(argv) > 1 and argv[1] in ("-h", "--help") else
              "usage: scripts/plot-bench.py BENCH.json [OUTDIR]", file=sys.stderr)
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    path = argv[1]
    try:
        with open(path) as f:
            bench = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {path}: {e}")
    if not isinstance(bench, dict) or "results" not in bench:
        fail(f"{path} is not a cgjit-bench JSON file (no \"results\")")
    if shutil.which("gnuplot") is None:
        print("plot-bench: gnuplot not found: no plots drawn (scripts/deps.sh bench installs it)")
        return EXIT_NO_GNUPLOT
    outdir = argv[2] if len(argv) == 3 else os.path.dirname(os.path.abspath(path))
    os.makedirs(outdir, exist_ok=True)
    gpu = bench.get("gpu") or "unknown GPU"
    note = bench.get("note") or ""
    term = terminal()
    written = []
    with tempfile.TemporaryDirectory(prefix="plot-bench.") as tmp:
        def draw(name, rows, series, label, title, width):
            text, kept = table(rows, series, label)
            if not rows or not kept:
                return
            data, out = os.path.join(tmp, name + ".dat"), os.path.join(outdir, f"bench-{name}.png")
            with open(data, "w") as f:
                f.write(text)
            gnuplot(os.path.join(GP_DIR, name + ".gp"), data, out, kept, title, note, term, width, len(rows))
            written.append(out)

        draw("workloads", [(label, r, 1.0) for label, r in workload_rows(bench)], SERIES,
             lambda label, r: f'"{label}"', f"cgjit-bench on {gpu}: median µs per step", 130)
        chain_mode = "reduce-overhead" if any(r.get("mode") for r in bench.get("results") or []) else None
        draw("chain", [(str(r["n"]), r, float(r["n"])) for r in bench.get("results") or []
                       if number(r, "n") and r.get("mode") == chain_mode],
             CHAIN_SERIES, lambda label, r: label, f"cgjit-bench chain on {gpu}: µs per kernel against N", 100)
    if not written:
        fail(f"{path} holds no figures to plot")
    for out in written:
        print(f"plot-bench: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
