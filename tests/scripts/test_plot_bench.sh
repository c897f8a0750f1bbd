#!/usr/bin/env bash
# test_plot_bench.sh OUTDIR — scripts/plot-bench.py on a small bench JSON (bench_sample.json:
# every workload kind, a missing floor, missing GPU-busy and torch figures, models not built or
# not run): both PNGs are written and are PNG files; a file that is no bench JSON is refused
# (status 2). Exit 77 (skipped, with the reason) where gnuplot or python3 is not installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
plot="$here/../../scripts/plot-bench.py"
out=${1:?usage: test_plot_bench.sh OUTDIR}
for tool in python3 gnuplot; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (scripts/deps.sh test installs it)"
    exit 77
  fi
done
rm -rf "$out" && mkdir -p "$out"
python3 "$plot" "$here/bench_sample.json" "$out"
for png in bench-workloads.png bench-chain.png; do
  [ -s "$out/$png" ] || { echo "FAIL: $out/$png was not written"; exit 1; }
  magic=$(head -c 8 "$out/$png" | od -An -tx1 | tr -d ' \n')
  [ "$magic" = 89504e470d0a1a0a ] || { echo "FAIL: $out/$png is not a PNG file ($magic)"; exit 1; }
done
# A bench run in three modes (docs/bench-h200-modes.json: 30 workload rows) gets a plot wide
# enough for its labels (at least 44 pixels a row): at a fixed 1200 they overlapped.
python3 "$plot" "$here/../../docs/bench-h200-modes.json" "$out/modes" >/dev/null
width=$((16#$(head -c 20 "$out/modes/bench-workloads.png" | tail -c 4 | od -An -tx1 | tr -d ' \n')))
[ "$width" -ge $((30 * 44)) ] || { echo "FAIL: the three-mode plot is $width pixels wide for 30 rows"; exit 1; }
echo '{"gpu": "x"}' >"$out/not-bench.json"
status=0
python3 "$plot" "$out/not-bench.json" "$out" 2>"$out/refused.log" || status=$?
[ "$status" -eq 2 ] || { echo "FAIL: a file without results: status $status, expected 2"; exit 1; }
echo "PASS: plot-bench drew $out/bench-workloads.png and $out/bench-chain.png"
