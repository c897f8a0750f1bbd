#!/usr/bin/env bash
# test.sh [PHASE...] — install what is needed, build, and run every test, in phases:
#   deps        scripts/deps.sh test (and the optional aarch64 cross compiler)
#   build       the RelWithDebInfo build, in build/
#   host        the host tests of that build, against the fake driver (ctest -LE gpu)
#   python      the wheel (scripts/wheel.sh from build/), installed into a fresh virtual environment,
#               and the Python module's tests (tests/python) run on it against the fake driver
#   gpu         the GPU tests (ctest -L gpu); each skips itself, saying why, where no GPU is present
#   asan-build  an AddressSanitizer/UndefinedBehaviorSanitizer build, in build-asan/
#   asan        the host tests again in that build
#   fuzz        each libFuzzer harness for FUZZ_SECONDS (default 30; 0 leaves them out), where clang
#               is installed (scripts/fuzz.sh)
#   format      the C and CUDA sources against .clang-format (scripts/format-check.sh; skipped where
#               no clang-format 14 or later is installed)
# PHASE... runs only those, in the order given. Every phase runs, whatever became of the ones
# before it; at the end one table gives each phase's status (passed, failed or skipped) and its
# counts (ctest's tests or fuzz.sh's targets: passed, failed, skipped). Exit status: 0 where no
# phase failed, 1 where one did, 2 on bad usage.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
phases=(deps build host python gpu asan-build asan fuzz format)
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
jobs=$(nproc)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# A phase is a function phase_NAME (a - in NAME is a _ there). It returns 0 (passed), 77
# (skipped) or anything else (failed), and may set counts ("passed failed skipped") and note.

phase_deps() {
  scripts/deps.sh test || return
  scripts/deps.sh cross || true # optional: the aarch64 cross-compile test skips without it
}

phase_build() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build -j"$jobs"
}

# ctest_phase DIR [CTEST_ARGS...]: ctest on DIR, its output shown and counted; 3 where DIR has
# no such test.
ctest_phase() {
  local dir=$1 rc=0 total failed skipped
  shift
  ctest --test-dir "$dir" --output-on-failure "$@" 2>&1 | tee "$logs/ctest.log" || rc=$?
  # "N% tests passed, F tests failed out of T", then the tests that did not run, "N - NAME
  # (Skipped)": after ctest's last summary line (a test's own output comes before it).
  sed 's/\x1b\[[0-9;]*m//g' "$logs/ctest.log" >"$logs/plain.log"
  total=$(sed -n 's/.* \([0-9][0-9]*\) tests* failed out of \([0-9][0-9]*\).*/\1 \2/p' "$logs/plain.log" | tail -n 1)
  skipped=$(awk '/tests* failed out of/ { tail = ""; next } { tail = tail $0 "\n" } END { printf "%s", tail }' \
    "$logs/plain.log" | grep -c -E '^[[:space:]]*[0-9]+ - .* \((Skipped|Disabled)\)$')
  if [ -z "$total" ]; then
    if grep -q 'No tests were found' "$logs/ctest.log"; then
      counts="0 0 0" note="no tests found"
      return 3
    fi
    note="no ctest summary"
    return $((rc ? rc : 1))
  fi
  failed=${total% *} total=${total#* }
  counts="$((total - failed - skipped)) $failed $skipped"
  [ "$rc" -eq 0 ] || return "$rc"
  [ "$total" -gt 0 ] && [ "$skipped" -eq "$total" ] && return 77
  return 0
}

phase_host() { ctest_phase build -LE gpu; }

phase_python() {
  local tmp rc=0 whl tests failed skipped
  [ -f python/pyproject.toml ] || { note="no python/ package in this tree"; return 77; }
  tmp=$(mktemp -d)
  whl=$(scripts/wheel.sh build "$tmp/dist" | tail -n 1) && python3 -m venv "$tmp/env" &&
    "$tmp/env/bin/pip" install -q --disable-pip-version-check "$whl" || rc=$?
  if [ "$rc" = 0 ]; then
    # The installed wheel's module, library and cgjit-run: nothing of the source tree's.
    (cd "$tmp" && env -u PYTHONPATH -u CGJIT_LIB -u CGJIT_TEST_LIB -u CGJIT_TEST_RUN PATH="$tmp/env/bin:$PATH" \
      CGJIT_TEST_DRIVER="$OLDPWD/build/tests/fakecuda/libcuda.so.1" "$tmp/env/bin/python" \
      "$OLDPWD/tests/python/test_cgjit.py") 2>&1 | tee "$logs/python.log" || rc=$?
    # unittest's counts: "Ran N tests", a "FAIL: " or "ERROR: " line per test that did not pass,
    # "... skipped" per test skipped.
    tests=$(sed -n 's/^Ran \([0-9]*\) tests*.*/\1/p' "$logs/python.log")
    failed=$(grep -cE '^(FAIL|ERROR): ' "$logs/python.log")
    skipped=$(grep -cE ' \.\.\. skipped' "$logs/python.log")
    counts="$((${tests:-0} - failed - skipped)) $failed $skipped"
    note="$(basename "$whl")"
  fi
  rm -rf "$tmp"
  return "$rc"
}

phase_gpu() {
  local rc=0
  ctest_phase build -L gpu || rc=$?
  case $rc in
    0) [[ $counts == *" 0" ]] || note="the skipped ones say why above"; return 0 ;;
    77) note="no CUDA GPU: each test says why above" && return 77 ;;
    3) note="none in this build (CGJIT_GPU_TESTS and CGJIT_BENCH off)" && return 77 ;;
    *) return "$rc" ;;
  esac
}

phase_asan_build() {
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCGJIT_SANITIZE=ON -DCGJIT_GPU_TESTS=OFF \
    -DCGJIT_BENCH=OFF >/dev/null && cmake --build build-asan -j"$jobs"
}

phase_asan() { ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 ctest_phase build-asan; }

phase_fuzz() {
  local seconds=${FUZZ_SECONDS:-30} rc=0
  if [ "$seconds" = 0 ]; then
    note="left out (FUZZ_SECONDS=0)"
    return 77
  fi
  if ! command -v clang >/dev/null 2>&1; then
    note="no clang (scripts/deps.sh test installs it where apt can)"
    return 77
  fi
  scripts/fuzz.sh "$seconds" 2>&1 | tee "$logs/fuzz.log" || rc=$?
  counts="$(grep -c '^fuzz_.*  PASS$' "$logs/fuzz.log") $(grep -c '^fuzz_.*  FAIL' "$logs/fuzz.log") 0"
  return "$rc"
}

phase_format() {
  local rc=0
  if [ ! -x scripts/format-check.sh ]; then
    note="no scripts/format-check.sh"
    return 77
  fi
  scripts/format-check.sh 2>&1 | tee "$logs/format.log" || rc=$?
  [ "$rc" = 77 ] && note="no clang-format 14 or later"
  [ "$rc" = 1 ] && note="$(grep -c . "$logs/format.log") line(s): scripts/format-check.sh --fix rewrites them"
  return "$rc"
}

selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${phases[@]}")
for p in "${selected[@]}"; do
  if [[ " ${phases[*]} " != *" $p "* ]]; then
    echo "usage: $0 [PHASE...]  (phases: ${phases[*]})" >&2
    exit 2
  fi
done

rows="" failed_phases=""
for p in "${selected[@]}"; do
  echo "=== test.sh: $p"
  counts="- - -" note="" rc=0
  "phase_${p//-/_}" || rc=$?
  case "$rc" in
    0) status=passed ;;
    77) status=skipped ;;
    *) status=failed failed_phases="$failed_phases $p" note="${note:+$note; }exit $rc" ;;
  esac
  read -r n_pass n_fail n_skip <<<"$counts"
  rows="$rows$(printf '  %-11s %-8s %7s %7s %8s  %s' "$p" "$status" "$n_pass" "$n_fail" "$n_skip" "$note")
"
  echo "=== test.sh: $p $status"
done

echo
echo "test.sh: summary (tests for ctest's phases, targets for fuzz)"
printf '  %-11s %-8s %7s %7s %8s  %s\n' phase status passed failed skipped note
printf '%s' "$rows"
if [ -n "$failed_phases" ]; then
  echo "FAIL:$failed_phases"
  exit 1
fi
echo "PASS"
