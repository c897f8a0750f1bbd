#!/usr/bin/env bash
# test.sh — install what is needed, build, and run every test: the host tests against the fake
# driver, the GPU tests (they skip themselves, with the reason, where no GPU is present), then
# the host tests again in an AddressSanitizer/UndefinedBehaviorSanitizer build, and each libFuzzer
# harness for FUZZ_SECONDS (default 30; 0 leaves them out) where clang is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
scripts/deps.sh cross || true # optional: the aarch64 cross-compile test skips without it
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCGJIT_SANITIZE=ON -DCGJIT_GPU_TESTS=OFF \
  -DCGJIT_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure
fuzz_seconds=${FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" = 0 ]; then
  echo "test.sh: fuzzers left out (FUZZ_SECONDS=0)"
elif command -v clang >/dev/null 2>&1; then
  scripts/fuzz.sh "$fuzz_seconds"
else
  echo "test.sh: fuzzers skipped: no clang (scripts/deps.sh test installs it where apt can)"
fi
