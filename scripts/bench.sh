#!/usr/bin/env bash
# bench.sh — the main job: install what is needed, build, and run cgjit-bench (eager vs cgjit
# replay vs a hand-built CUDA graph) on the GPU this machine has. Extra arguments go to the
# bench (e.g. --json results.json).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target cgjit-bench
exec build/bench/cgjit-bench "$@"
