#!/usr/bin/env bash
# test_real_check.sh REAL_CHECK_SH BUILD_DIR — scripts/real-check.sh's verdicts on programs made
# up for it (no GPU): one whose output never changes (identical), one whose eager runs differ by
# a float atomic's last digit and whose cgjit runs stay within that (within eager spread), and
# one whose cgjit runs stray further than its eager runs (DIFFERS, the check fails);
# REAL_CHECK_BUDGET leaving programs "not run" (INCOMPLETE); and REAL_CHECK_ROUNDS (medians over
# alternating runs, every run checked); REAL_CHECK_GPUS (jobs on GPUs of their own sharing the
# programs, the data-parallel ones after them).
#
# Only these programs run (REAL_CHECK_CORPUS=0): the corpus of tests/real is never started here,
# so no budget of the test is spent on anything else, however slow the machine or its python3.
# The budget's verdicts hold on any machine: each of the programs it is tested on sleeps 2 s a
# run, so the first takes 6 s or more, past the 5 s of budget, and nothing else takes any of it.
set -euo pipefail
script=${1:?usage: test_real_check.sh REAL_CHECK_SH BUILD_DIR}
[ -d "${2:?usage: test_real_check.sh REAL_CHECK_SH BUILD_DIR}" ]
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export REAL_CHECK_CORPUS=0
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
# The table's rows, tab-separated, in OUTDIR/table.tsv (scripts/compare-checks.py reads them).
head -n 1 "$tmp/ok/table.tsv" | grep -qx $'program\tconfig\tverdict\tspeed\treplayed\tverify\tnote' &&
  grep -q $'^atomics\tsync\twithin eager spread\t' "$tmp/ok/table.tsv" &&
  [ "$(wc -l <"$tmp/ok/table.tsv")" -eq 7 ] || { cat "$tmp/ok/table.tsv"; echo "FAIL: table.tsv is not the table's rows"; exit 1; }
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
# The budget went to slow1 alone: no other run began (REAL_CHECK_CORPUS=0).
others=$(grep '^== ' "$tmp/slow.log" | grep -v '^== slow1\.' || true)
[ -z "$others" ] || { echo "FAIL: runs other than slow1's under the budget: $others"; exit 1; }
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
# REAL_CHECK_ROUNDS=3 under sync: runs eager1, eager2, sync, then sync.r2 before its eager run
# (even round), then eager before sync.r3. Each run prints a line and its time, from a list; the
# speed is the median of the eager times (100 300 110 90: 105) over the median of sync's (50 500
# 52: 52), 2.02x, where the first runs alone would say 4.00x, and the eager runs are (300 - 90) /
# 105 = 200% apart. A program whose third cgjit run prints something else fails with that round
# named.
paced() { # NAME "LINE per run" "TIME per run"
  printf '%s\tn=$(cat %s.n 2>/dev/null || echo 0); echo $((n + 1)) > %s.n; o=(%s); t=(%s); echo "value ${o[$n]}"; echo "%s: median_us=${t[$n]}" >&2\n' \
    "$1" "$1" "$1" "$2" "$3" "$1"
}
{
  paced paced "7 7 7 7 7 7 7" "100 300 50 500 110 90 52"
  paced late "7 7 7 7 7 7 8" "100 100 100 100 100 100 100"
} >"$tmp/rounds.txt"
status=0
REAL_CHECK_EXTRA="$tmp/rounds.txt" REAL_CHECK_ONLY="paced late" REAL_CHECK_CONFIGS=sync REAL_CHECK_ROUNDS=3 REAL_CHECK_TIMEOUT=60 \
  bash "$script" "$build" "$tmp/rounds" >"$tmp/rounds.log" 2>&1 || status=$?
cat "$tmp/rounds.log"
[ "$status" -eq 1 ] || { echo "FAIL: exit status $status where a later round differs"; exit 1; }
grep -q '^  paced  *sync  *identical  *2.02x .*speed of 4 eager and 3 cgjit runs, the eager runs 200% apart' "$tmp/rounds.log" ||
  { echo "FAIL: paced's speed is not the medians' over the rounds"; exit 1; }
grep -q '^  late  *sync  *round 3: DIFFERS at line 1' "$tmp/rounds.log" || { echo "FAIL: late's third round not DIFFERS"; exit 1; }
if [ ! -f "$tmp/rounds/paced.sync.r2.out" ] || [ ! -f "$tmp/rounds/paced.sync.eager.r3.out" ]; then
  echo "FAIL: the rounds' runs are not in OUTDIR"
  exit 1
fi
# REAL_CHECK_MAX_ROUNDS=5 with 3 rounds: "slow" (every eager run 100 us, its cgjit runs 110) is
# 0.91x after 3 rounds and stays below 0.98x, so rounds 4 and 5 are added; "quick" (cgjit 50) is
# 2.00x after 3 and runs no more.
{
  paced slow "7 7 7 7 7 7 7 7 7 7 7" "100 100 110 110 100 100 110 90 100 100 90"
  paced quick "7 7 7 7 7 7 7 7 7 7 7" "100 100 50 50 100 100 50 50 100 100 50"
} >"$tmp/more.txt"
REAL_CHECK_EXTRA="$tmp/more.txt" REAL_CHECK_ONLY="slow quick" REAL_CHECK_CONFIGS=sync REAL_CHECK_ROUNDS=3 \
  REAL_CHECK_MAX_ROUNDS=5 REAL_CHECK_TIMEOUT=60 bash "$script" "$build" "$tmp/more" >"$tmp/more.log" 2>&1 ||
  { cat "$tmp/more.log"; echo "FAIL: the added rounds failed"; exit 1; }
grep -q '^  slow  *sync  *identical  *0.91x .*speed of 6 eager and 5 cgjit runs' "$tmp/more.log" ||
  { cat "$tmp/more.log"; echo "FAIL: slow did not get rounds 4 and 5"; exit 1; }
grep -q '^  quick  *sync  *identical  *2.00x .*speed of 4 eager and 3 cgjit runs' "$tmp/more.log" ||
  { cat "$tmp/more.log"; echo "FAIL: quick got rounds it did not need"; exit 1; }
[ -f "$tmp/more/slow.sync.r5.out" ] && [ ! -f "$tmp/more/quick.sync.r4.out" ] ||
  { echo "FAIL: the added rounds' runs are not as expected in OUTDIR"; exit 1; }
status=0
REAL_CHECK_MAX_ROUNDS=many bash "$script" "$build" "$tmp/bad-max" >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status for REAL_CHECK_MAX_ROUNDS=many"; exit 1; }
# One round: the two eager runs' median (their mean, 200) over the one sync run's 50: 4.00x.
paced once "7 7 7" "100 300 50" >"$tmp/once.txt"
REAL_CHECK_EXTRA="$tmp/once.txt" REAL_CHECK_ONLY=once REAL_CHECK_CONFIGS=sync REAL_CHECK_TIMEOUT=60 \
  bash "$script" "$build" "$tmp/once" >"$tmp/once.log" 2>&1 || { cat "$tmp/once.log"; echo "FAIL: one round failed"; exit 1; }
grep -q '^  once  *sync  *identical  *4.00x ' "$tmp/once.log" || { cat "$tmp/once.log"; echo "FAIL: one round's speed is not the eager runs' mean over the run's"; exit 1; }
# A configuration's parts reach the program as cgjit's variables; a part it does not know is
# refused before anything runs.
printf 'vars\techo "$CGJIT_STEP $CGJIT_GOVERN $CGJIT_CHUNK_US" >> %s/vars.seen; echo same\n' "$tmp" >"$tmp/vars.txt"
REAL_CHECK_EXTRA="$tmp/vars.txt" REAL_CHECK_ONLY=vars REAL_CHECK_CONFIGS=sync-ungov-chunk400 REAL_CHECK_TIMEOUT=60 \
  bash "$script" "$build" "$tmp/vars" >"$tmp/vars.log" 2>&1 || { cat "$tmp/vars.log"; echo "FAIL: sync-ungov-chunk400 failed"; exit 1; }
grep -qx 'sync 0 400' "$tmp/vars.seen" || { cat "$tmp/vars.seen"; echo "FAIL: sync-ungov-chunk400 did not set CGJIT_GOVERN=0 CGJIT_CHUNK_US=400"; exit 1; }
status=0
REAL_CHECK_EXTRA="$tmp/vars.txt" REAL_CHECK_ONLY=vars REAL_CHECK_CONFIGS=sync-chunkx bash "$script" "$build" "$tmp/bad-chunk" >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status for the configuration sync-chunkx"; exit 1; }
status=0
REAL_CHECK_CORPUS=no bash "$script" "$build" "$tmp/bad-corpus" >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status for REAL_CHECK_CORPUS=no"; exit 1; }
status=0
REAL_CHECK_ROUNDS=0 bash "$script" "$build" "$tmp/bad-rounds" >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status for REAL_CHECK_ROUNDS=0"; exit 1; }
# REAL_CHECK_GPUS=2: two jobs, each on a GPU of its own (CUDA_VISIBLE_DEVICES), take the
# programs between them; each program's runs all see one device, every program runs once (its
# eager1 once in all the jobs' logs), and the table has every row. A data-parallel program (its
# command starts torch.distributed.run) runs after the jobs, with every device visible.
gpuprog() { # NAME [WORD]: a program that notes the devices it was given
  printf '%s\t%secho "${CUDA_VISIBLE_DEVICES-all}" >> %s/%s.dev; echo same; echo "%s: median_us=100" >&2\n' \
    "$1" "${2:+: $2; }" "$tmp" "$1" "$1"
}
{ for p in g1 g2 g3 g4 g5; do gpuprog "$p"; done; gpuprog gdist torch.distributed.run; } >"$tmp/gpus.txt"
status=0
CUDA_VISIBLE_DEVICES= REAL_CHECK_GPUS=2 REAL_CHECK_EXTRA="$tmp/gpus.txt" REAL_CHECK_CONFIGS="sync auto" REAL_CHECK_TIMEOUT=60 \
  bash "$script" "$build" "$tmp/gpus" >"$tmp/gpus.log" 2>&1 || status=$?
cat "$tmp/gpus.log"
[ "$status" -eq 0 ] || { echo "FAIL: exit status $status with REAL_CHECK_GPUS=2"; exit 1; }
grep -q '^real-check: 2 jobs done, one per GPU' "$tmp/gpus.log" || { echo "FAIL: no jobs with REAL_CHECK_GPUS=2"; exit 1; }
for p in g1 g2 g3 g4 g5; do
  [ "$(grep -c "^  $p  *\(sync\|auto\)  *identical" "$tmp/gpus.log")" -eq 2 ] || { echo "FAIL: $p has not its two rows"; exit 1; }
  [ "$(cat "$tmp/gpus"/gpu.*.log | grep -c "^== $p.eager1$")" -eq 1 ] || { echo "FAIL: $p did not run once in the jobs"; exit 1; }
  [ "$(sort -u "$tmp/$p.dev" | wc -l)" -eq 1 ] && grep -qx '[01]' "$tmp/$p.dev" ||
    { cat "$tmp/$p.dev"; echo "FAIL: $p's runs were not given one device, 0 or 1"; exit 1; }
done
[ "$(grep -c '^  gdist  *\(sync\|auto\)  *identical' "$tmp/gpus.log")" -eq 2 ] && [ "$(sort -u "$tmp/gdist.dev")" = "" ] ||
  { echo "FAIL: the data-parallel program did not run after the jobs on every device"; exit 1; }
! grep -q '^== gdist' "$tmp/gpus"/gpu.*.log || { echo "FAIL: a job ran the data-parallel program"; exit 1; }
# Each job keeps REAL_CHECK_BUDGET: with 5 s, each runs one of the 2 s programs (three runs), the
# third is left to no one and is a row "not run" (INCOMPLETE).
status=0
REAL_CHECK_GPUS=2 REAL_CHECK_EXTRA="$tmp/slow.txt" REAL_CHECK_CONFIGS=sync REAL_CHECK_BUDGET=5 REAL_CHECK_TIMEOUT=60 \
  bash "$script" "$build" "$tmp/gpus-budget" >"$tmp/gpus-budget.log" 2>&1 || status=$?
cat "$tmp/gpus-budget.log"
[ "$status" -eq 3 ] || { echo "FAIL: exit status $status where the jobs left a program for the budget"; exit 1; }
[ "$(grep -c '^  slow[123]  *sync  *identical' "$tmp/gpus-budget.log")" -eq 2 ] &&
  [ "$(grep -c '^  slow[123]  *sync  *not run  .*no job began it' "$tmp/gpus-budget.log")" -eq 1 ] ||
  { echo "FAIL: not two programs run and one left by the jobs"; exit 1; }
status=0
REAL_CHECK_GPUS=two bash "$script" "$build" "$tmp/bad-gpus" >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status for REAL_CHECK_GPUS=two"; exit 1; }
echo "PASS: identical, within eager spread and DIFFERS told apart; a budget leaves rows not run, in REAL_CHECK_ONLY's order; rounds give medians and are checked too; REAL_CHECK_GPUS's jobs share the programs"
