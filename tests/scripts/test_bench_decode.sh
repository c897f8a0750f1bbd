#!/usr/bin/env bash
# test_bench_decode.sh BENCH OUTDIR — cgjit-bench-decode at its smallest (one round of a few
# steps, each replayed call also timed on its own: --call-times). Without a GPU: the line
# "cgjit-bench-decode: skipped: no CUDA GPU" and status 77 (ctest: skipped). With one: status 0,
# PASS, and a JSON file saying the three variants (eager, replayed, the program's own graphs)
# ended with the same bits, that the step replayed, and the replayed steps' split host time.
set -euo pipefail
bench=${1:?usage: test_bench_decode.sh BENCH OUTDIR}
out=${2:?usage: test_bench_decode.sh BENCH OUTDIR}
rm -rf "$out" && mkdir -p "$out"
status=0
"$bench" --rounds 2 --steps 5 --call-times --json "$out/decode.json" >"$out/decode.log" 2>&1 || status=$?
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
# The replayed steps' host time, split, and the steps cgjit ran eagerly counted apart.
assert 0 <= d["replay_eager_steps"] <= 10, d
assert d["replay_loop_us_per_step"] > 0 and d["replay_host_ns_per_call_with_probes"] > 0, d
# The window less its segment launches: the absorbed calls alone, never more than the whole.
assert 0 < d["replay_calls_alone_ns_per_call"] <= d["replay_host_ns_per_call"], d
PY
grep -q "replayed launch calls timed apart" "$out/decode.log" || { echo "FAIL: --call-times printed no spread"; exit 1; }
echo "PASS: cgjit-bench-decode ran on the GPU"
