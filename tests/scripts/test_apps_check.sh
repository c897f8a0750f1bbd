#!/usr/bin/env bash
# test_apps_check.sh OUTDIR — scripts/apps-check.sh on stand-in programs (shell scripts that
# print an output, a time and a cgjit-like report; libcgjit.so is an empty shared library):
#  - steady: faster with the preload: PASS after APPS_CHECK_PAIRS rounds, no more;
#  - drifting: its first rounds put it below 0.98, later ones do not: rounds are added until the
#    medians say otherwise, and the check passes, saying how many rounds it took;
#  - slow: 10% slower in every round: rounds go up to APPS_CHECK_MAX_PAIRS, and the check fails;
#  - short: a second anchor turned off as too short for a graph (its steps run eagerly by design)
#    is no missing replay: PASS; offcost: a second anchor off for another reason is: FAIL;
#  - built: an anchor that ran eagerly while cgjit's builder thread built it: those runs are no
#    missing replay: PASS;
#  - sleepy1, sleepy2: a budget that fits one of them: the other is a row "not run" (INCOMPLETE);
#  - APPS_CHECK_JOBS=2 on steady, slow and offcost: a row each from the jobs' runs, none run
#    again, the speedup reported only (slow passes), offcost's share still a failure;
#  - APPS_CHECK_GPUS=2 on steady and slow: a GPU each, the speedup still a verdict (slow fails).
# Exit 77 (skipped, with the reason) where no C compiler is found for the stand-in library.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check="$here/../../scripts/apps-check.sh"
out=${1:?usage: test_apps_check.sh OUTDIR}
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null; then
  echo "SKIP: no C compiler ($cc) for the stand-in libcgjit.so"
  exit 77
fi
rm -rf "$out" && mkdir -p "$out/build/tests/apps" "$out/state"
echo 'int cgj_stand_in;' >"$out/lib.c"
"$cc" -shared -fPIC -o "$out/build/libcgjit.so" "$out/lib.c"

# stand_in NAME EAGER_US... / PRELOAD_US...: the n-th run of each kind prints the n-th time of
# its list (the last one once the list runs out).
stand_in() {
  local name=$1 eager=$2 with=$3 extra=${4:-}
  cat >"$out/build/tests/apps/${name}_static" <<EOS
#!/usr/bin/env bash
kind=eager; list="$eager"
if [ -n "\${LD_PRELOAD:-}" ]; then kind=cgjit; list="$with"; fi
f="$out/state/$name.\$kind"; n=\$(cat "\$f" 2>/dev/null || echo 0); echo \$((n + 1)) >"\$f"
set -- \$list; shift \$(( n < \$# ? n : \$# - 1 ))
echo "result 42"
echo "$name: median_us=\$1" >&2
if [ "\$kind" = cgjit ]; then
  echo "cgjit report" >&2
  echo "  anchor 'step': REPLAY, 100 runs, 97 replayed, 0 side exits, 1 variant(s)" >&2
  printf '%b' "$extra" >&2
fi
EOS
  chmod +x "$out/build/tests/apps/${name}_static"
}
stand_in steady "100" "80"
stand_in drifting "100 100 150" "110"
stand_in slow "100" "110"
stand_in short "100" "80" "  anchor 'copy': OFF, 300 runs, 8 replayed, 0 side exits, 1 variant(s)\\n    last event: the step has no graph worth launching: replayed, it would make the same calls\\n"
stand_in offcost "100" "80" "  anchor 'copy': OFF, 300 runs, 8 replayed, 0 side exits, 1 variant(s)\\n    last event: replay 5.0 us per step against 4.0 us eager\\n"
stand_in built "100" "80" "  anchor 'late': REPLAY, 40 runs, 30 replayed, 0 side exits, 1 variant(s)\\n    eager on purpose: 1 warm-up run(s), 0 probe(s), 0 run(s) while replay was off, 0 run(s) while another thread ran the step, 7 run(s) while cgjit's builder thread built it\\n"

run() { # NAME: run the check on one program; sets status and log
  status=0
  APPS_CHECK_ONLY=$1 APPS_CHECK_PAIRS=2 APPS_CHECK_MAX_PAIRS=6 bash "$check" "$out/build" "$out/$1" \
    >"$out/$1.log" 2>&1 || status=$?
  log=$(cat "$out/$1.log")
}
run_with() { # NAME VAR=VALUE...: the check with those variables, into $out/NAME; sets status and log
  local name=$1
  shift
  status=0
  env "$@" bash "$check" "$out/build" "$out/$name" >"$out/$name.log" 2>&1 || status=$?
  log=$(cat "$out/$name.log")
}
fail() { echo "FAIL: $*"; echo "$log" | tail -n 12; exit 1; }
rounds() { find "$out/$1" -name "$1_static.eager.*.out" | wc -l; }
rounds_in() { find "$out/$1" -name "$2_static.eager.*.out" | wc -l; } # OUTDIR NAME

run steady
[ "$status" -eq 0 ] || fail "steady: status $status, expected 0"
[ "$(rounds steady)" -eq 2 ] || fail "steady ran $(rounds steady) rounds, expected 2"

run drifting
[ "$status" -eq 0 ] || fail "drifting: status $status, expected 0"
r=$(rounds drifting)
[ "$r" -gt 2 ] && [ "$r" -lt 6 ] || fail "drifting ran $r rounds, expected more than 2 and fewer than 6"
echo "$log" | grep -q "$r rounds" || fail "drifting: the table does not say it took $r rounds"

run slow
[ "$status" -eq 1 ] || fail "slow: status $status, expected 1"
[ "$(rounds slow)" -eq 6 ] || fail "slow ran $(rounds slow) rounds, expected 6 (APPS_CHECK_MAX_PAIRS)"
echo "$log" | grep -q "slower than eager" || fail "slow: the table does not say it is slower"
run short
[ "$status" -eq 0 ] || fail "short: status $status, expected 0 (an anchor too short for a graph counted as unreplayed?)"
run offcost
[ "$status" -eq 1 ] || fail "offcost: status $status, expected 1"
echo "$log" | grep -q "replay share below 95%" || fail "offcost: the table does not say the share is below 95%"

run built
[ "$status" -eq 0 ] || fail "built: status $status, expected 0 (the runs while the step was built counted as unreplayed?)"

# APPS_CHECK_BUDGET: stand-ins that take 1 s a run (6 runs a program); with 3 s of budget the
# first runs, the next is a row "not run", and the check says INCOMPLETE (exit 3).
stand_in sleepy1 "100" "80"
stand_in sleepy2 "100" "80"
for f in sleepy1 sleepy2; do sed -i '2i sleep 1' "$out/build/tests/apps/${f}_static"; done
run_with sleepy APPS_CHECK_ONLY="sleepy1 sleepy2" APPS_CHECK_PAIRS=2 APPS_CHECK_MAX_PAIRS=2 APPS_CHECK_BUDGET=3
[ "$status" -eq 3 ] || fail "budget: status $status, expected 3"
echo "$log" | grep -q '^  sleepy1 .* yes' || fail "budget: the first program did not run"
echo "$log" | grep -q '^  sleepy2  *static  *-  *not run  *APPS_CHECK_BUDGET (3 s) spent' || fail "budget: no row 'not run'"
echo "$log" | grep -q '^INCOMPLETE: 1 of 2 programs not run' || fail "budget: no INCOMPLETE line"

# APPS_CHECK_JOBS=2: the programs dealt into two jobs, each with a log of its own; the table
# has a row for every program, made from the jobs' runs (no program runs again), and the
# speedup is reported only: the slow program passes, the one that replays too little does not.
rm -rf "$out/state"/*
run_with jobs APPS_CHECK_ONLY="steady slow offcost" APPS_CHECK_PAIRS=2 APPS_CHECK_JOBS=2
[ "$status" -eq 1 ] || fail "jobs: status $status, expected 1 (offcost)"
[ -s "$out/jobs/job.1.log" ] && [ -s "$out/jobs/job.2.log" ] || fail "jobs: no log of each job"
for p in steady slow offcost; do
  echo "$log" | grep -q "^  $p  *static  *sync  *yes" || fail "jobs: no row for $p"
  [ "$(rounds_in jobs $p)" -eq 2 ] || fail "jobs: $p ran $(rounds_in jobs $p) eager rounds, expected 2"
done
[ "$(cat "$out/state/steady.eager")" -eq 2 ] || fail "jobs: steady ran eagerly $(cat "$out/state/steady.eager") times, expected 2"
echo "$log" | grep -q "speedup reported only" || fail "jobs: the speedup is not said to be reported only"
# The table's rows, tab-separated, in OUTDIR/table.tsv: the jobs' table made again by the check
# that ran them, one row per program and policy.
[ "$(head -n 1 "$out/jobs/table.tsv" | cut -f 1,8)" = $'app\tspeedup' ] || fail "jobs: table.tsv has no header"
for p in steady slow offcost; do
  [ "$(grep -c "^$p"$'\tstatic\t' "$out/jobs/table.tsv")" -eq 2 ] || fail "jobs: $p has not two rows in table.tsv"
done
echo "$log" | grep -q "replay share below 95%" || fail "jobs: offcost's share is not flagged"

# Jobs under a budget: a program its job did not begin is a row "not run" of the table.
stand_in sleepy3 "100" "80"
sed -i '2i sleep 1' "$out/build/tests/apps/sleepy3_static"
run_with jobs_budget APPS_CHECK_ONLY="sleepy1 sleepy2 sleepy3" APPS_CHECK_PAIRS=2 APPS_CHECK_JOBS=2 APPS_CHECK_BUDGET=3
[ "$status" -eq 3 ] || fail "jobs and budget: status $status, expected 3"
echo "$log" | grep -q '^  sleepy3  *static  *-  *not run  *its job did not begin it' || fail "jobs and budget: no row 'not run'"

# APPS_CHECK_GPUS=2: two jobs, each on a GPU of its own (every run of a program sees one
# device, 0 or 1), and the speedup stays a verdict: slow fails.
rm -rf "$out/state"/*
for p in steady slow; do sed -i "2i echo \"\${CUDA_VISIBLE_DEVICES-all}\" >>$out/state/$p.dev" "$out/build/tests/apps/${p}_static"; done
CUDA_VISIBLE_DEVICES= run_with gpus APPS_CHECK_ONLY="steady slow" APPS_CHECK_PAIRS=2 APPS_CHECK_MAX_PAIRS=2 APPS_CHECK_GPUS=2
[ "$status" -eq 1 ] || fail "gpus: status $status, expected 1 (slow)"
[ -s "$out/gpus/job.1.log" ] && [ -s "$out/gpus/job.2.log" ] || fail "gpus: no log of each job"
echo "$log" | grep -q "in 2 jobs at once, one per GPU" || fail "gpus: the table does not say it ran on two GPUs"
! echo "$log" | grep -q "speedup reported only" || fail "gpus: the speedup is reported only"
for p in steady slow; do
  [ "$(sort -u "$out/state/$p.dev" | wc -l)" -eq 1 ] && grep -qx '[01]' "$out/state/$p.dev" || fail "gpus: $p's runs were not given one device"
done
[ "$(cat "$out/state/steady.dev" "$out/state/slow.dev" | sort -u | wc -l)" -eq 2 ] || fail "gpus: both programs ran on one device"
status=0
APPS_CHECK_GPUS=two bash "$check" "$out/build" "$out/bad-gpus" >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "gpus: status $status for APPS_CHECK_GPUS=two"

echo "PASS: apps-check adds rounds to a verdict near the line (drifting: $r rounds), fails a slow program," \
  "leaves programs past APPS_CHECK_BUDGET not run, and checks programs in jobs side by side or one per GPU"
