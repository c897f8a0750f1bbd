#!/usr/bin/env bash
# tsan.sh [BUILD_DIR] — the ThreadSanitizer build (CGJIT_TSAN=ON, malloc instead of cgjit's
# private jemalloc) and the multi-thread stress program in it. Criterion cannot start under
# ThreadSanitizer, so the Criterion suites are not run here; stress_threads is a plain program
# that steps from many threads at once (tests/tracer/stress_threads.c): threads on streams of
# their own and on a shared one, eight threads on the legacy stream flushing one another, a
# thread that synchronizes everything, and a reporter reading the API's figures meanwhile.
# It runs in nine configurations: with markers, without them under CGJIT_STEP=sync (`implicit`:
# eager steps' calls take the shortest path beside the others) and CGJIT_STEP=auto (`auto`: steps
# found as cycles on every thread at once), and each of the three again under CGJIT_VERIFY (every
# replayed graph checked: its windows of copies beside the other threads' eager work). A race
# shows only where the threads happen to meet, so each configuration runs TSAN_RUNS times
# (default 5). Then the three once more with the governor on (CGJIT_GOVERN=1, which the program
# otherwise turns off): it switches the process between active and dormant while the threads
# step; and once more with chunks launched by cgjit's launch thread (CGJIT_LAUNCH_ASYNC=1).
# Exit status: the first failing run's (ThreadSanitizer reports make it fail:
# halt_on_error), else 0; a line per configuration says how many runs were clean.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-tsan}
runs=${TSAN_RUNS:-5}
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCGJIT_TSAN=ON -DCGJIT_GPU_TESTS=OFF -DCGJIT_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target stress_threads fakecuda
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
for verify in 0 1; do
  for mode in markers implicit auto; do
    arg=$mode
    [ "$mode" = markers ] && arg=
    for ((i = 1; i <= runs; i++)); do
      CGJIT_VERIFY=$verify "$build/tests/stress_threads" $arg
    done
    echo "tsan.sh: stress_threads $mode, CGJIT_VERIFY=$verify: $runs of $runs runs clean"
  done
done
for mode in markers implicit auto; do
  arg=$mode
  [ "$mode" = markers ] && arg=
  for ((i = 1; i <= runs; i++)); do
    CGJIT_GOVERN=1 "$build/tests/stress_threads" $arg
  done
  echo "tsan.sh: stress_threads $mode, CGJIT_GOVERN=1: $runs of $runs runs clean"
done
# And with chunks launched by cgjit's launch thread (CGJIT_LAUNCH_ASYNC=1), a chunk ending
# wherever 1 us of host time passed between calls: the launch thread launches while the threads
# step, flush one another and synchronize.
for mode in markers implicit auto; do
  arg=$mode
  [ "$mode" = markers ] && arg=
  for ((i = 1; i <= runs; i++)); do
    CGJIT_LAUNCH_ASYNC=1 CGJIT_CHUNK_US=1 "$build/tests/stress_threads" $arg
  done
  echo "tsan.sh: stress_threads $mode, CGJIT_LAUNCH_ASYNC=1: $runs of $runs runs clean"
done
