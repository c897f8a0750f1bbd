#!/usr/bin/env bash
# fuzz.sh [SECONDS] [TARGET...] — build the libFuzzer harnesses of tests/fuzz (clang,
# -DCGJIT_FUZZ=ON, into build-fuzz) and run each for SECONDS (default 30) on a copy of its seed
# corpus, tests/fuzz/corpus/NAME for fuzz_NAME; the repository's corpus is never written.
#
# Targets: every build-fuzz/tests/fuzz/fuzz_* executable, or the TARGETs named (fuzz_spec or
# spec alike). Each runs alone, `-max_total_time=SECONDS`, with the sanitizers the build
# compiles in (ASan, UBSan). An input that takes more than FUZZ_CPU_SECONDS (default 10) of CPU
# time is a finding too (tests/fuzz/fuzz_cpu.c: a crash-* file whose log says so): CPU time, which
# a loaded machine does not stretch. libFuzzer's -timeout, which counts wall-clock time, is only
# a guard against an input that hangs without spending CPU (FUZZ_HANG_SECONDS, default 300).
# Files: build-fuzz/fuzz-out/NAME/{corpus/,log,crash-*,leak-*,timeout-*,oom-*}: the corpus as
# grown, libFuzzer's output, and the inputs that failed (run `build-fuzz/tests/fuzz/fuzz_NAME
# FILE` to replay one).
#
# Prints one line per target: executions (libFuzzer's final stats), corpus size, findings (the
# inputs it saved), then PASS or FAIL. Exit status: 0 when no target found anything; 1 when one
# did or ended abnormally; 2 on bad usage or a failed build.
set -u
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
seconds=30
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then seconds=$1; shift; fi
if [ "$seconds" -lt 1 ]; then echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2; fi
export FUZZ_CPU_SECONDS=${FUZZ_CPU_SECONDS:-10}
hang=${FUZZ_HANG_SECONDS:-300}
for v in "$FUZZ_CPU_SECONDS" "$hang"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "fuzz.sh: FUZZ_CPU_SECONDS and FUZZ_HANG_SECONDS are whole seconds" >&2; exit 2; }
done
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
build=$root/build-fuzz
cmake -S . -B "$build" -DCMAKE_C_COMPILER="${CC_FUZZ:-clang}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCGJIT_FUZZ=ON -DCGJIT_BENCH=OFF -DCGJIT_GPU_TESTS=OFF >/dev/null || exit 2
cmake --build "$build" --target fuzzers -j"$(nproc)" >/dev/null || { echo "fuzz.sh: build failed" >&2; exit 2; }

targets=()
for t in "$@"; do targets+=("$build/tests/fuzz/fuzz_${t#fuzz_}"); done
[ ${#targets[@]} -gt 0 ] || targets=("$build"/tests/fuzz/fuzz_*)
status=0
printf '%-16s %12s %8s %9s  %s\n' target executions corpus findings verdict
for exe in "${targets[@]}"; do
  name=$(basename "$exe")
  name=${name#fuzz_}
  if [ ! -x "$exe" ]; then echo "fuzz.sh: no fuzzer fuzz_$name in $build/tests/fuzz" >&2; status=1; continue; fi
  out=$build/fuzz-out/$name
  rm -rf "$out" && mkdir -p "$out/corpus"
  [ -d "tests/fuzz/corpus/$name" ] && cp -R "tests/fuzz/corpus/$name/." "$out/corpus/"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=print_stacktrace=1 \
    "$exe" -max_total_time="$seconds" -timeout="$hang" -print_final_stats=1 \
    -artifact_prefix="$out/" "$out/corpus" >"$out/log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log" | tail -n 1)
  findings=$(find "$out" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  corpus=$(find "$out/corpus" -type f | wc -l)
  verdict=PASS
  if [ "$rc" -ne 0 ] || [ "$findings" -gt 0 ]; then verdict="FAIL (exit $rc; see $out/log)"; status=1; fi
  printf 'fuzz_%-11s %12s %8s %9s  %s\n' "$name" "${execs:-?}" "$corpus" "$findings" "$verdict"
done
exit $status
