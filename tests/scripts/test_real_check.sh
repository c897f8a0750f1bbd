#!/usr/bin/env bash
# test_real_check.sh REAL_CHECK_SH BUILD_DIR — scripts/real-check.sh's verdicts on programs made
# up for it (no GPU): one whose output never changes (identical), one whose eager runs differ by
# a float atomic's last digit and whose cgjit runs stay within that (within eager spread), and
# one whose cgjit runs stray further than its eager runs (DIFFERS, the check fails); and
# REAL_CHECK_BUDGET leaving programs "not run" (INCOMPLETE).
set -euo pipefail
script=${1:?usage: test_real_check.sh REAL_CHECK_SH BUILD_DIR}
[ -d "${2:?usage: test_real_check.sh REAL_CHECK_SH BUILD_DIR}" ]
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The verdicts are what is tested, not cgjit: an empty libcgjit.so, which the loader ignores
# (a sanitizer build's library cannot be preloaded into the shell's programs).
build=$tmp/build
mkdir -p "$build"
: >"$build/libcgjit.so"
# Each program prints two losses per run (eager1, eager2, sync, auto), from its list of pairs.
prog() {
  printf '%s\tn=$(cat %s.n 2>/dev/null || echo 0); echo $((n + 1)) > %s.n; v=(%s); p=${v[$n]}; echo "step 1 loss ${p%%%%,*}"; echo "step 2 loss ${p#*,}"; echo done\n' \
    "$1" "$1" "$1" "$2"
}
{
  prog steady "7.61,7.5 7.61,7.5 7.61,7.5 7.61,7.5"
  prog atomics "7.61,7.5 7.63,7.5 7.62,7.5 7.61,7.5"
  # a last digit apart on another line than the eager runs are (7.73 - 7.72 > 7.62 - 7.61 in binary)
  prog digits "7.73,7.62 7.73,7.61 7.72,7.61 7.73,7.62"
} >"$tmp/ok.txt"
prog strays "7.61,7.5 7.62,7.5 7.70,7.5 7.61,7.5" >"$tmp/bad.txt"

run() { # LIST OUTDIR: the check's exit status, its output in OUTDIR.log
  local status=0
  REAL_CHECK_EXTRA="$tmp/$1" REAL_CHECK_ONLY="steady atomics digits strays" REAL_CHECK_TIMEOUT=60 \
    bash "$script" "$build" "$tmp/$2" >"$tmp/$2.log" 2>&1 || status=$?
  echo "$status"
}
status=$(run ok.txt ok)
cat "$tmp/ok.log"
[ "$status" -eq 0 ] || { echo "FAIL: exit status $status on programs within their spread"; exit 1; }
[ "$(grep -c '^  steady  *\(sync\|auto\)  *identical' "$tmp/ok.log")" -eq 2 ] || { echo "FAIL: steady not identical"; exit 1; }
grep -q '^  atomics  *sync  *within eager spread.*numbers within 0.01 of eager (eager runs: 0.02)' "$tmp/ok.log" ||
  { echo "FAIL: atomics under sync not within the eager spread"; exit 1; }
grep -q '^  atomics  *auto  *identical' "$tmp/ok.log" || { echo "FAIL: atomics under auto (equal to eager1) not identical"; exit 1; }
grep -q '^  digits  *sync  *within eager spread.*numbers within 0.01 of eager (eager runs: 0.01)' "$tmp/ok.log" ||
  { echo "FAIL: digits under sync (one last digit apart) not within the eager spread"; exit 1; }
status=$(run bad.txt bad)
cat "$tmp/bad.log"
[ "$status" -eq 1 ] || { echo "FAIL: exit status $status where a run strays past the eager spread"; exit 1; }
grep -q '^  strays  *sync  *DIFFERS at line 1' "$tmp/bad.log" || { echo "FAIL: strays not DIFFERS at line 1"; exit 1; }
# REAL_CHECK_BUDGET: a program that takes 2 s a run; with 5 s of budget the first runs, the
# others are rows "not run", and the check says INCOMPLETE (exit 3), not PASS.
{
  printf 'slow1\tsleep 2; echo same\n'
  printf 'slow2\tsleep 2; echo same\n'
  printf 'slow3\tsleep 2; echo same\n'
} >"$tmp/slow.txt"
status=0
REAL_CHECK_EXTRA="$tmp/slow.txt" REAL_CHECK_CONFIGS=sync REAL_CHECK_BUDGET=5 REAL_CHECK_TIMEOUT=60 \
  bash "$script" "$build" "$tmp/slow" >"$tmp/slow.log" 2>&1 || status=$?
cat "$tmp/slow.log"
[ "$status" -eq 3 ] || { echo "FAIL: exit status $status where programs were left for the budget"; exit 1; }
grep -q '^  slow1  *sync  *identical' "$tmp/slow.log" || { echo "FAIL: the first program did not run"; exit 1; }
[ "$(grep -c '^  slow[23]  *sync  *not run  .*REAL_CHECK_BUDGET (5 s) spent' "$tmp/slow.log")" -eq 2 ] ||
  { echo "FAIL: the programs past the budget are not rows 'not run'"; exit 1; }
grep -q '^INCOMPLETE: 2 program(s) not run' "$tmp/slow.log" || { echo "FAIL: no INCOMPLETE line"; exit 1; }
# REAL_CHECK_ONLY's order is the order of the runs: the budget goes to slow3, then nothing is left.
status=0
REAL_CHECK_EXTRA="$tmp/slow.txt" REAL_CHECK_ONLY="slow3 slow1" REAL_CHECK_CONFIGS=sync REAL_CHECK_BUDGET=5 \
  REAL_CHECK_TIMEOUT=60 bash "$script" "$build" "$tmp/order" >"$tmp/order.log" 2>&1 || status=$?
cat "$tmp/order.log"
[ "$status" -eq 3 ] || { echo "FAIL: exit status $status with REAL_CHECK_ONLY in another order"; exit 1; }
grep -q '^  slow3  *sync  *identical' "$tmp/order.log" || { echo "FAIL: REAL_CHECK_ONLY's first program did not run first"; exit 1; }
grep -q '^  slow1  *sync  *not run' "$tmp/order.log" || { echo "FAIL: REAL_CHECK_ONLY's second program ran"; exit 1; }
! grep -q '^  slow2 ' "$tmp/order.log" || { echo "FAIL: a program REAL_CHECK_ONLY leaves out has a row"; exit 1; }
status=0
REAL_CHECK_BUDGET=soon bash "$script" "$build" "$tmp/bad-budget" >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status for REAL_CHECK_BUDGET=soon"; exit 1; }
echo "PASS: identical, within eager spread and DIFFERS told apart; a budget leaves rows not run, in REAL_CHECK_ONLY's order"
