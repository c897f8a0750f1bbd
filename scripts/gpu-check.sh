#!/usr/bin/env bash
# gpu-check.sh BUILD_DIR — run the test suite and the bench on a GPU machine, from a build folder
# made elsewhere and copied here (so at another absolute path; nothing in it depends on that).
#
# Runs every Criterion test executable BUILD_DIR/tests/test_*, the NVTX check through CUPTI
# (tests/gpu/nvtx-cupti-check.sh), the bench and the sample programs, keeping their output under
# ${OUT:-BUILD_DIR/gpu-check}: tests-<name>.log, nvtx-cupti.log (its files in nvtx-cupti/),
# bench.log and bench.json. Prints a short summary last: the GPU, each test executable's Criterion
# synthesis (and skipped tests), the totals, the NVTX check's verdict and the bench table. Exit
# status 0 only if every test passed, the NVTX check passed or was skipped (no CUPTI found), and
# the bench passed.
#
# BUILD_DIR/devlibs holds the shared libraries the GPU machine's image lacks (Criterion and its
# closure, jemalloc), copied there by /work/shared/tools/device-libs.sh or the like.
# GPU_CHECK_TIMEOUT (seconds, default 300) bounds each program. GPU_CHECK_APPS=0 leaves the sample
# programs out (run scripts/apps-check.sh on its own: the whole check may not fit one session
# of a lent machine). GPU_CHECK_REAL="NAME ..." also runs those programs of scripts/real-check.sh
# (REAL_CHECK_CONFIGS and REAL_CHECK_EXTRA as set), e.g. GPU_CHECK_REAL=llmc_bf16_300 with
# REAL_CHECK_CONFIGS="sync-verify auto-verify".
set -u

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=${OUT:-$build/gpu-check}
mkdir -p "$out" || exit 2
limit=${GPU_CHECK_TIMEOUT:-300}
# The build folder first: a stale copy of libcgjit among the copied libraries must not win.
export LD_LIBRARY_PATH="$build:$build/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Copies of the build's own libraries (libcgjit, the fake cuBLAS) in devlibs would be found before
# the originals, away from what they find relative to themselves: only the originals are used.
for f in "$build"/devlibs/*; do
  [ -e "$f" ] || continue
  if find "$build" -path "$build/devlibs" -prune -o -name "$(basename "$f")" -print | grep -q .; then
    rm -f "$f"
  fi
done

# Run a program under the time limit where timeout(1) exists.
bounded() {
  if command -v timeout >/dev/null 2>&1; then
    timeout -k 10 "$limit" "$@"
  else
    "$@"
  fi
}

# The number after "KEY: " in a synthesis line, 0 if absent.
field() {
  printf '%s\n' "$2" | sed -n "s/.*$1: *\([0-9][0-9]*\).*/\1/p" | head -n 1 | grep . || echo 0
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$gpu" ] || gpu="unknown (nvidia-smi gave no name)"

failed=0
lines=""
t_tested=0 t_passing=0 t_failing=0 t_crashing=0 t_skipped=0 nexe=0
for exe in "$build"/tests/test_*; do
  if [ ! -f "$exe" ] || [ ! -x "$exe" ]; then continue; fi
  name=$(basename "$exe")
  log="$out/tests-$name.log"
  nexe=$((nexe + 1))
  # --verbose lists skipped tests ([SKIP] lines), which the synthesis line does not count.
  bounded "$exe" --verbose >"$log" 2>&1
  rc=$?
  synth=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -a 'Synthesis:' | tail -n 1 | sed 's/^.*Synthesis: *//; s/ *$//')
  skipped=$(grep -a -c '^\[SKIP\]' "$log")
  note=""
  if [ -z "$synth" ]; then
    note=" (no synthesis line)"
    failed=1
  fi
  if [ "$rc" -ne 0 ]; then
    note="$note (exit status $rc$([ "$rc" -eq 124 ] && echo ', timed out'))"
    failed=1
  fi
  if [ "$skipped" -gt 0 ]; then synth="$synth | Skipped: $skipped"; fi
  lines="$lines$(printf '  %-24s %s%s' "$name" "${synth:-?}" "$note")
"
  # The failing and crashing tests by name (Criterion: "[FAIL] suite::test: ...").
  bad=$(grep -a -E '^\[(FAIL|CRASH)\]' "$log" | sed 's/^\[[A-Z]*\] *\([^:]*::[^:]*\).*/\1/' | sort -u | head -n 12 | tr '\n' ' ')
  if [ -n "$bad" ]; then
    lines="$lines    failed: $bad
"
  fi
  t_tested=$((t_tested + $(field Tested "$synth")))
  t_passing=$((t_passing + $(field Passing "$synth")))
  t_failing=$((t_failing + $(field Failing "$synth")))
  t_crashing=$((t_crashing + $(field Crashing "$synth")))
  t_skipped=$((t_skipped + skipped))
done
if [ "$t_failing" -ne 0 ] || [ "$t_crashing" -ne 0 ]; then failed=1; fi
if [ "$nexe" -eq 0 ]; then
  lines="  no test executables in $build/tests
"
  failed=1
fi

# cgjit's NVTX ranges as CUPTI receives them (tests/gpu/nvtx-cupti-check.sh): 0 pass, 77 skipped
# (no CUPTI library or probe: not a failure), else a failure.
here=$(cd "$(dirname "$0")" && pwd)
nvtx_check="$here/../tests/gpu/nvtx-cupti-check.sh"
nvtx_rc=127
if [ -f "$nvtx_check" ]; then
  NVTX_CUPTI_OUT="$out/nvtx-cupti" NVTX_CUPTI_TIMEOUT="$limit" bash "$nvtx_check" "$build" >"$out/nvtx-cupti.log" 2>&1
  nvtx_rc=$?
else
  echo "nvtx-cupti-check: FAIL: $nvtx_check not found" >"$out/nvtx-cupti.log"
fi

bench="$build/bench/cgjit-bench"
bench_rc=127
if [ -x "$bench" ]; then
  bounded "$bench" --json "$out/bench.json" >"$out/bench.log" 2>&1
  bench_rc=$?
else
  echo "$bench: not found" >"$out/bench.log"
fi

# The unmodified sample programs, with and without the preload (scripts/apps-check.sh).
apps_rc=127
if [ "${GPU_CHECK_APPS:-1}" = 0 ]; then
  echo "apps-check skipped (GPU_CHECK_APPS=0)" >"$out/apps.log"
  apps_rc=0
elif [ -d "$build/tests/apps" ] && [ -x "$here/apps-check.sh" ]; then
  bash "$here/apps-check.sh" "$build" "$out/apps" >"$out/apps.log" 2>&1
  apps_rc=$?
else
  echo "no sample programs in $build/tests/apps" >"$out/apps.log"
fi

# Programs written by others (scripts/real-check.sh), where GPU_CHECK_REAL names them:
# GPU_CHECK_REAL="NAME ..." is passed as REAL_CHECK_ONLY, with REAL_CHECK_CONFIGS and
# REAL_CHECK_EXTRA as set (a correctness check after a change, in the same call).
real_rc=0
if [ -n "${GPU_CHECK_REAL:-}" ]; then
  REAL_CHECK_ONLY=$GPU_CHECK_REAL bash "$here/real-check.sh" "$build" "$out/real" >"$out/real.log" 2>&1
  real_rc=$?
fi

echo
echo "==== gpu-check summary ($build) ===="
echo "GPU: $gpu"
echo "tests:"
printf '%s' "$lines"
echo "  total: Tested: $t_tested | Passing: $t_passing | Failing: $t_failing | Crashing: $t_crashing | Skipped: $t_skipped"
echo "NVTX through CUPTI (exit status $nvtx_rc, $out/nvtx-cupti.log):"
grep -a '^nvtx-cupti-check: [A-Z]*:' "$out/nvtx-cupti.log" | tail -n 1 | sed 's/^/  /'
grep -a -q '^nvtx-cupti-check: [A-Z]*:' "$out/nvtx-cupti.log" || tail -n 3 "$out/nvtx-cupti.log" | sed 's/^/  /'
if [ "$nvtx_rc" -ne 0 ] && [ "$nvtx_rc" -ne 77 ]; then failed=1; fi
echo "bench (exit status $bench_rc, $out/bench.log):"
# The bench's lines: its own, the workloads' descriptions and table headers, the warm-up lines,
# the table rows (chain and temps: N then the cgjit mode; the models and the elementwise
# workloads: the name then the mode), the notes on chains left unfused, the fusion summary.
modes='(reduce-overhead|default|max-autotune)'
grep -a -E "^(cgjit-bench:|workload |bench: |warm-up |fusion: | +N |\s*[0-9]+ +$modes |\s*(mlp|cnn|gpt2|ew16M|ew10) +$modes |note: .* left unfused)" \
  "$out/bench.log" | sed 's/^/  /'
grep -a -q -E '^cgjit-bench:' "$out/bench.log" || tail -n 5 "$out/bench.log" | sed 's/^/  /'
if [ "$bench_rc" -ne 0 ]; then failed=1; fi
echo "sample programs under preload (exit status $apps_rc, $out/apps.log):"
sed -n '/^apps-check on/,$p' "$out/apps.log" | sed 's/^/  /'
if [ "$apps_rc" -ne 0 ]; then failed=1; fi
if [ -n "${GPU_CHECK_REAL:-}" ]; then
  echo "programs written by others (exit status $real_rc, $out/real.log):"
  sed -n '/^  program  *config/,$p' "$out/real.log" | sed 's/^/  /'
  if [ "$real_rc" -ne 0 ]; then failed=1; fi
fi
if [ "$failed" -eq 0 ]; then
  echo "gpu-check: PASS"
else
  echo "gpu-check: FAIL"
fi
exit "$failed"
