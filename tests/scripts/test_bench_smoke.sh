#!/usr/bin/env bash
# test_bench_smoke.sh BENCH OUTDIR — cgjit-bench at its smallest (chain, N=1, one round of one
# step). Without a GPU (CI): exactly one line, `cgjit-bench: no CUDA GPU found: <why>`, and exit
# status 77. With one: status 0, a JSON file with the GPU-busy keys, and, where gnuplot is
# installed, its plots.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=${1:?usage: test_bench_smoke.sh BENCH OUTDIR}
out=${2:?usage: test_bench_smoke.sh BENCH OUTDIR}
rm -rf "$out" && mkdir -p "$out"
status=0
"$bench" --workload chain --sizes 1 --rounds 1 --steps 1 --json "$out/bench.json" >"$out/bench.log" 2>&1 ||
  status=$?
cat "$out/bench.log"
if [ "$status" -eq 77 ]; then
  lines=$(wc -l <"$out/bench.log")
  grep -q '^cgjit-bench: no CUDA GPU found: .' "$out/bench.log" ||
    { echo "FAIL: status 77 without the line 'cgjit-bench: no CUDA GPU found: <why>'"; exit 1; }
  [ "$lines" -eq 1 ] || { echo "FAIL: $lines lines of output where there is no GPU, expected 1"; exit 1; }
  [ ! -e "$out/bench.json" ] || { echo "FAIL: a JSON file written without a GPU"; exit 1; }
  echo "PASS: no GPU, said on one line, status 77"
  exit 0
fi
[ "$status" -eq 0 ] || { echo "FAIL: cgjit-bench exited with status $status"; exit 1; }
python3 - "$out/bench.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
row = b["results"][0]
assert "gpu_busy_us" in row and "replay_over_gpu_busy" in row, row
assert isinstance(b["gpu_busy"]["available"], bool), b["gpu_busy"]
assert b["pass"] is True
PY
if command -v gnuplot >/dev/null; then python3 "$here/../../scripts/plot-bench.py" "$out/bench.json"; fi
echo "PASS: cgjit-bench ran on the GPU and wrote $out/bench.json"
