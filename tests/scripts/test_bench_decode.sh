#!/usr/bin/env bash
# test_bench_decode.sh BENCH OUTDIR — cgjit-bench-decode at its smallest (one round of a few
# steps). Without a GPU: the line "cgjit-bench-decode: skipped: no CUDA GPU" and status 77
# (ctest: skipped). With one: status 0, PASS, and a JSON file saying the three variants (eager,
# replayed, the program's own graphs) ended with the same bits and that the step replayed.
set -euo pipefail
bench=${1:?usage: test_bench_decode.sh BENCH OUTDIR}
out=${2:?usage: test_bench_decode.sh BENCH OUTDIR}
rm -rf "$out" && mkdir -p "$out"
status=0
"$bench" --rounds 2 --steps 5 --json "$out/decode.json" >"$out/decode.log" 2>&1 || status=$?
cat "$out/decode.log"
if [ "$status" -eq 77 ]; then
  grep -q '^cgjit-bench-decode: skipped: no CUDA GPU$' "$out/decode.log" ||
    { echo "FAIL: status 77 without the line saying why"; exit 1; }
  [ ! -e "$out/decode.json" ] || { echo "FAIL: a JSON file written without a GPU"; exit 1; }
  exit 77
fi
[ "$status" -eq 0 ] || { echo "FAIL: cgjit-bench-decode exited with status $status"; exit 1; }
python3 - "$out/decode.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["identical"] is True, d
assert d["replays"] >= 8, d
assert d["launches"] == 180 and d["graphs_us"] > 0, d
PY
echo "PASS: cgjit-bench-decode ran on the GPU"
