#!/usr/bin/env bash
# tsan.sh [BUILD_DIR] — the ThreadSanitizer build (CGJIT_TSAN=ON, malloc instead of cgjit's
# private jemalloc) and the multi-thread stress program in it. Criterion cannot start under
# ThreadSanitizer, so the Criterion suites are not run here; stress_threads is a plain program
# that steps from many threads at once (tests/tracer/stress_threads.c). Exit status: the
# program's (ThreadSanitizer reports make it fail: halt_on_error).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-tsan}
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCGJIT_TSAN=ON -DCGJIT_GPU_TESTS=OFF -DCGJIT_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target stress_threads fakecuda
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" "$build/tests/stress_threads"
