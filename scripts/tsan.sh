#!/usr/bin/env bash
# tsan.sh [BUILD_DIR] — the ThreadSanitizer build (CGJIT_TSAN=ON, malloc instead of cgjit's
# private jemalloc) and the multi-thread stress program in it. Criterion cannot start under
# ThreadSanitizer, so the Criterion suites are not run here; stress_threads is a plain program
# that steps from many threads at once (tests/tracer/stress_threads.c): threads on streams of
# their own and on a shared one, eight threads on the legacy stream flushing one another, a
# thread that synchronizes everything, and a reporter reading the API's figures meanwhile.
# A race shows only where the threads happen to meet, so the program runs TSAN_RUNS times
# (default 5), once without markers under each of CGJIT_STEP=sync and auto, and once more under
# CGJIT_VERIFY. Exit status: the first failing run's (ThreadSanitizer reports make it fail:
# halt_on_error), else 0.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-tsan}
runs=${TSAN_RUNS:-5}
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCGJIT_TSAN=ON -DCGJIT_GPU_TESTS=OFF -DCGJIT_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target stress_threads fakecuda
for ((i = 1; i <= runs; i++)); do
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" "$build/tests/stress_threads"
done
# Without markers (CGJIT_STEP=sync, then auto): eager steps' calls take the shortest path
# beside the others (sync); steps found as cycles on every thread at once (auto).
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" "$build/tests/stress_threads" implicit
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" "$build/tests/stress_threads" auto
# Once more with every replayed graph checked (CGJIT_VERIFY): its copies run beside the threads.
CGJIT_VERIFY=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" "$build/tests/stress_threads"
