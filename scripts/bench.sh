#!/usr/bin/env bash
# bench.sh — the main job: install what is needed, build, and run cgjit-bench (eager vs cgjit
# replay vs a hand-built CUDA graph vs the GPU-busy floor) on the GPU this machine has, then
# draw its plots. Extra arguments go to the bench (e.g. --workload chain --sizes 1,10,100,1000).
# The results are kept as JSON (the bench's --json FILE where given, else build-bench/bench.json)
# and drawn beside it as bench-workloads.png and bench-chain.png by scripts/plot-bench.py where
# gnuplot is installed (elsewhere, run that script on the JSON later). Exit status: the bench's;
# 77 where there is no CUDA GPU (the bench says why on one line).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh bench
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
# A build folder of its own, without the tests: the bench needs no Criterion.
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target cgjit-bench

args=("$@")
json=""
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  if [ "${args[i]}" = --json ]; then json=${args[i + 1]}; fi
done
if [ -z "$json" ]; then
  json=build-bench/bench.json
  args+=(--json "$json")
fi
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
status=0
build-bench/bench/cgjit-bench ${args[@]+"${args[@]}"} || status=$?
# Plot only what this run wrote (not a JSON left by an earlier one, nor after --help).
if [ "$json" -nt "$stamp" ]; then
  if command -v gnuplot >/dev/null && command -v python3 >/dev/null; then
    python3 scripts/plot-bench.py "$json" || echo "bench.sh: plotting $json failed" >&2
  else
    echo "bench.sh: no plots: gnuplot or python3 is missing (scripts/plot-bench.py $json draws them elsewhere)"
  fi
fi
exit "$status"
