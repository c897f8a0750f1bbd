#!/usr/bin/env bash
# bench.sh — the main job: install what is needed, build, and run cgjit-bench (eager vs cgjit
# replay vs a hand-built CUDA graph) on the GPU this machine has. Extra arguments go to the
# bench (e.g. --json results.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh bench
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
# A build folder of its own, without the tests: the bench needs no Criterion.
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target cgjit-bench
exec build-bench/bench/cgjit-bench "$@"
