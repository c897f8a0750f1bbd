#!/usr/bin/env bash
# test_test_sh.sh SOURCE_DIR OUTDIR — scripts/test.sh runs every phase whatever became of the
# ones before, ends with one table of the phases (status and tests passed, failed, skipped, as
# ctest counted them), and exits 1 where a phase failed, 0 where none did.
#
# test.sh runs from a copy in OUTDIR/repo, a stand-in project: a CMakeLists.txt of no language
# (real cmake and ctest) whose build fails where the file fail-build exists, with a test that
# passes, one that fails where fail-test exists, one that skips (77) and a GPU test (label gpu)
# that skips; deps.sh and fuzz.sh are stand-ins that print what the real ones print, and clang
# is a stand-in on PATH. Exit 77 (skipped) where cmake or ctest is missing.
set -euo pipefail
src=${1:?usage: test_test_sh.sh SOURCE_DIR OUTDIR}
out=${2:?usage: test_test_sh.sh SOURCE_DIR OUTDIR}
for c in cmake ctest; do
  command -v "$c" >/dev/null || { echo "SKIP: no $c"; exit 77; }
done
repo=$out/repo
rm -rf "$out" && mkdir -p "$repo/scripts" "$out/bin"
cp "$src/scripts/test.sh" "$repo/scripts/"
cat >"$repo/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(stand_in NONE)
enable_testing()
add_custom_target(built ALL COMMAND sh -c "test ! -e '${PROJECT_SOURCE_DIR}/fail-build'")
add_test(NAME passes COMMAND sh -c "exit 0")
add_test(NAME fails_when_asked COMMAND sh -c "test ! -e '${PROJECT_SOURCE_DIR}/fail-test'")
add_test(NAME skips COMMAND sh -c "echo 'SKIP: not here'; exit 77")
set_tests_properties(skips PROPERTIES SKIP_RETURN_CODE 77)
if(NOT CGJIT_SANITIZE) # as cgjit's: no GPU test in the sanitized build
  add_test(NAME gpu_suite COMMAND sh -c "echo 'SKIP: no CUDA GPU: none here'; exit 77")
  set_tests_properties(gpu_suite PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu)
endif()
EOF
cat >"$repo/scripts/deps.sh" <<'EOF'
#!/usr/bin/env bash
echo "deps: $*"
EOF
cat >"$repo/scripts/fuzz.sh" <<'EOF'
#!/usr/bin/env bash
printf '%-16s %12s %8s %9s  %s\n' target executions corpus findings verdict
printf 'fuzz_%-11s %12s %8s %9s  %s\n' one 100 3 0 PASS two 100 3 0 PASS
printf 'fuzz_%-11s %12s %8s %9s  %s\n' three 100 3 1 "FAIL (exit 1; see log)"
exit 1
EOF
printf '#!/bin/sh\nexit 0\n' >"$out/bin/clang"
chmod +x "$repo/scripts/deps.sh" "$repo/scripts/fuzz.sh" "$out/bin/clang"

# test_sh [PHASE...]: run the copy of test.sh; sets status and log (its output, with the phases'
# summary rows last).
test_sh() {
  status=0
  PATH="$out/bin:$PATH" bash "$repo/scripts/test.sh" "$@" >"$out/log" 2>&1 || status=$?
  log=$(cat "$out/log")
}
fail() {
  echo "FAIL: $*"
  echo "test.sh said:"
  echo "$log"
  exit 1
}
# row PHASE STATUS PASSED FAILED SKIPPED: the summary has that row.
row() {
  grep -q -E "^  $1 +$2 +$3 +$4 +$5( |\$)" "$out/log" || fail "no summary row '$*'"
}

# The build fails and a test fails: every phase runs all the same, each in the table (a phase
# added later, with nothing to work on in the stand-in, may skip or fail: not checked here).
touch "$repo/fail-build" "$repo/fail-test"
test_sh
[ "$status" -eq 1 ] || fail "status $status where phases failed, expected 1"
for p in deps build host gpu asan-build asan fuzz; do
  grep -q "^=== test.sh: $p\$" "$out/log" || fail "phase $p did not run after the build failed"
done
[ "$(grep -c '^test.sh: summary' "$out/log")" -eq 1 ] || fail "not one summary table"
row deps passed - - -
row build failed - - -
row host failed 1 1 1
row gpu skipped 0 0 1
row asan-build failed - - -
row asan failed 1 1 1
row fuzz failed 2 1 0
last=$(tail -n 1 "$out/log")
[[ "$last" == "FAIL: "* ]] || fail "the last line is not FAIL: PHASE..."
for p in build host asan-build asan fuzz; do
  [[ "$last " == *" $p "* ]] || fail "the last line does not name the failed phase $p"
done
[[ "$last " != *" deps "* && "$last " != *" gpu "* ]] || fail "the last line names a phase that did not fail"

# Nothing fails (the fuzz stand-in passes): status 0, and the GPU phase skipped, saying why.
# (These phases by name: a phase added later may have nothing to work on in the stand-in.)
rm -f "$repo/fail-build" "$repo/fail-test"
sed -i 's/^printf .fuzz_.* three .*//; s/^exit 1$/exit 0/' "$repo/scripts/fuzz.sh"
test_sh deps build host gpu asan-build asan fuzz
[ "$status" -eq 0 ] || fail "status $status where no phase failed"
row build passed - - -
row host passed 2 0 1
row gpu skipped 0 0 1
row asan passed 2 0 1
row fuzz passed 2 0 0
grep -q '^  gpu .*no CUDA GPU' "$out/log" || fail "the GPU phase does not say why it skipped"
[ "$(tail -n 1 "$out/log")" = PASS ] || fail "the last line is not PASS"

# Phases named: only those run; FUZZ_SECONDS=0 leaves the fuzzers out (skipped, not failed).
FUZZ_SECONDS=0 test_sh host fuzz
[ "$status" -eq 0 ] || fail "status $status for host and fuzz"
! grep -q '^=== test.sh: build$' "$out/log" || fail "a phase not named ran"
row host passed 2 0 1
row fuzz skipped - - -
test_sh nothing
[ "$status" -eq 2 ] || fail "status $status for an unknown phase, expected 2"
echo "PASS: every phase ran after a failure, one table with ctest's counts, status 1 on a failure, 0 without"
