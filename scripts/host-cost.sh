#!/bin/bash
# host-cost.sh — cgjit's own host cost per absorbed launch, without a GPU: tests/host_cost_app
# (a step shaped like cgjit-bench-decode's, on the fake driver) run 5 times, the median of its
# launch loop's wall time per absorbed launch, and each call's own time after 300 ns of host
# work (--host-ns: the latency the bench's step sees); then, where valgrind is installed, the
# instructions per absorbed call spent in libcgjit (callgrind, 300 steps, replay only), the
# largest functions first. What the bench on a GPU measures besides (the driver's graph
# launches, the GPU) is not here: this is the part cgjit's code decides.
#
# Then what a run that leaves its trace costs beyond the same run eagerly, a call in an eager
# implicit step against an untraced one, a call while the governor holds cgjit dormant against
# one cgjit is not in at all, the first and second runs of steps made once (step_cost_app,
# the same fake driver), in time and, where valgrind is installed, in instructions over the same
# steps untraced, and the first launch of a process's first step of its kind begun at a kernel;
# and, where valgrind is installed, libcgjit's instructions per library call in a replayed step
# (lib_cost_app, the fake cuBLAS). Before those, the absorbed launch in chunks of 20 ops, each
# chunk launched on the program's thread or by cgjit's launch thread (CGJIT_LAUNCH_ASYNC=1).
#
# Usage: scripts/host-cost.sh [BUILD] [STEPS]   (defaults: build, 2000)
# Exit status: 0; 1 where the app failed (outputs not eager's, too few steps replayed); 2 on bad
# usage or a build without the app.
set -euo pipefail
build=${1:-build}
steps=${2:-2000}
app=$build/tests/host_cost_app
if [ ! -x "$app" ]; then
  echo "host-cost: no $app (build the project first: cmake --build $build)" >&2
  exit 2
fi
case $steps in '' | *[!0-9]*) echo "host-cost: STEPS must be a number" >&2; exit 2 ;; esac

# The paths of a step that does not replay to its end (tests/runtime/step_cost_app.c): a run that
# leaves its trace, and a call in an eager implicit step (CGJIT_STEP=sync) against one that
# cgjit does not trace (CGJIT_STEP=off).
# first_ns VAR=VALUE...: the median over 15 processes of step_cost_app first's ns.
first_ns() {
  local _
  for _ in $(seq 15); do env "$@" "$build/tests/step_cost_app" first | sed -n 's/.*: \([0-9]*\) ns.*/\1/p'; done |
    sort -n | sed -n 8p
}

path_costs() {
  local sc=$build/tests/step_cost_app out off on
  [ -x "$sc" ] || return 0
  out=$("$sc" exits 400) || { echo "$out" >&2; exit 1; }
  echo "host-cost: a run that left its trace: $(echo "$out" | sed -n 's/^ *a run that left the trace: //p')"
  off=$(CGJIT_STEP=off "$sc" eager 2000 | sed -n 's/^ *\([0-9.]*\) ns per call.*/\1/p')
  on=$(CGJIT_STEP=sync "$sc" eager 2000 | sed -n 's/^ *\([0-9.]*\) ns per call.*/\1/p')
  echo "host-cost: a call in an eager implicit step: $on ns under CGJIT_STEP=sync, $off ns untraced (CGJIT_STEP=off)"
  # What a dormant window of the governor costs a call: CGJIT_GOVERN=2 holds cgjit dormant (every
  # call straight through, the heartbeat test still made) against no cgjit in the calls at all
  # (CGJIT_DISABLE=1: the driver's own functions are handed out). Medians of 5 runs each.
  local dor=() dis=()
  for _ in 1 2 3 4 5; do
    dor+=("$(CGJIT_GOVERN=2 CGJIT_STEP=sync "$sc" eager 2000 | sed -n 's/^ *\([0-9.]*\) ns per call.*/\1/p')")
    dis+=("$(CGJIT_DISABLE=1 "$sc" eager 2000 | sed -n 's/^ *\([0-9.]*\) ns per call.*/\1/p')")
  done
  local md mx
  md=$(printf '%s\n' "${dor[@]}" | sort -g | sed -n 3p)
  mx=$(printf '%s\n' "${dis[@]}" | sort -g | sed -n 3p)
  echo "host-cost: a call while dormant (CGJIT_GOVERN=2): $md ns, without cgjit in the call (CGJIT_DISABLE=1): $mx ns;" \
    "$(awk -v a="$md" -v b="$mx" 'BEGIN { printf "%.1f", a - b }') ns over (medians of 5)"
  # A step made once (a program's timed section): its first run, a warm-up run, and its second,
  # under the user's defaults (the fake app's own defaults record from the first run and build
  # in place), against the same steps untraced.
  local fon foff
  fon=$(CGJIT_WARMUP_RUNS=1 CGJIT_BUILD_BACKGROUND=1 CGJIT_STEP=sync "$sc" fresh 400 | sed -n 's/^ *\(.*\) (medians)$/\1/p')
  foff=$(CGJIT_STEP=off "$sc" fresh 400 | sed -n 's/^ *\([0-9.]*\) us per first run.*/\1/p')
  echo "host-cost: a step of 4 calls made for the first time: $fon under CGJIT_STEP=sync; $foff us untraced"
  # The first step of its kind in a process, begun at a kernel (MersenneTwister's timed loop): a
  # path of cgjit's the process never ran. Medians over 15 processes.
  local first_on first_off
  first_on=$(first_ns CGJIT_WARMUP_RUNS=1 CGJIT_STEP=sync) first_off=$(first_ns CGJIT_STEP=off)
  echo "host-cost: the first launch of a process's first step of its kind, begun at a kernel: $first_on ns under CGJIT_STEP=sync, $first_off ns untraced (medians of 15 processes)"
}

runs=()
for i in 1 2 3 4 5; do
  out=$("$app" "$steps") || { echo "$out" >&2; exit 1; }
  [ "$i" = 1 ] && echo "$out" | head -1
  runs+=("$(echo "$out" | sed -n 's/.*launch loop: \([0-9.]*\) ns.*/\1/p')")
done
median=$(printf '%s\n' "${runs[@]}" | sort -g | sed -n 3p)
echo "host-cost: launch loop ${median} ns per absorbed launch (median of 5 runs: ${runs[*]})"
# The same calls one at a time, after 300 ns of host work each (the bench's step): the latency
# of a call the CPU cannot overlap with the one before.
lat=()
for i in 1 2 3 4 5; do
  out=$("$app" "$steps" --host-ns 300) || { echo "$out" >&2; exit 1; }
  lat+=("$(echo "$out" | sed -n 's/.*host work: \([0-9.-]*\) ns.*/\1/p')")
done
median=$(printf '%s\n' "${lat[@]}" | sort -g | sed -n 3p)
echo "host-cost: one call after 300 ns of host work ${median} ns per absorbed launch (median of 5 runs: ${lat[*]})"
# The same loop in chunks of 20 ops (nine graph launches a step), launched on the program's
# thread and by cgjit's launch thread (CGJIT_LAUNCH_ASYNC=1): what a chunk's launch costs the
# program's thread, and what handing it over does. The fake driver runs a graph's kernels as it
# is launched, so this launch is cheap next to a GPU's and its kernels are counted in it.
# chunked ASYNC: the median of 5 runs' launch loop ns per absorbed launch.
chunked() {
  local _
  for _ in 1 2 3 4 5; do
    CGJIT_LAUNCH_ASYNC=$1 CGJIT_CHUNK_OPS=20 "$app" "$steps" | sed -n 's/.*launch loop: \([0-9.]*\) ns.*/\1/p'
  done | sort -g | sed -n 3p
}
echo "host-cost: in chunks of 20 ops, $(chunked 0) ns per absorbed launch with each chunk launched on the program's thread," \
  "$(chunked 1) ns with chunks handed to cgjit's launch thread (CGJIT_LAUNCH_ASYNC=1; medians of 5)"
path_costs

if ! command -v valgrind >/dev/null 2>&1; then
  echo "host-cost: no valgrind here: instructions per call not counted"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cg_steps=300
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$app" "$cg_steps" --no-eager >"$tmp/app.out" 2>"$tmp/vg.err" ||
  { cat "$tmp/app.out" "$tmp/vg.err" >&2; exit 1; }
replays=$(sed -n 's/.*launches (20 parameters), \([0-9]*\) replayed.*/\1/p' "$tmp/app.out")
calls=$((replays * 182)) # 180 launches, the token copy and the read-back
callgrind_annotate "$tmp/cg.out" 2>/dev/null | grep 'libcgjit' |
  awk -v calls="$calls" '{ n = $1; gsub(",", "", n); total += n; if (shown < 8) {
        line[shown++] = sprintf("  %8.1f  %s", n / calls, $(NF - 1)) } }
       END { printf "host-cost: %.0f instructions per absorbed call in libcgjit (callgrind, %d calls), largest first:\n", total / calls, calls;
             for (i = 0; i < shown; i++) print line[i] }'

# Instructions a call costs while the governor holds cgjit dormant, over no cgjit in the call
# (CGJIT_DISABLE=1): step_cost_app's eager loop at 2000 and at 4000 iterations, so that start-up
# cancels, over the calls the 2000 more iterations make.
sc=$build/tests/step_cost_app
[ -x "$sc" ] || exit 0
# collected MODE N [VAR=VALUE...]: instructions step_cost_app MODE N executes in all.
collected() {
  local mode=$1 n=$2
  shift 2
  env "$@" valgrind --tool=callgrind --callgrind-out-file="$tmp/x.out" "$sc" "$mode" "$n" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
d1=$(collected eager 2000 CGJIT_GOVERN=2 CGJIT_STEP=sync) x1=$(collected eager 2000 CGJIT_DISABLE=1)
d2=$(collected eager 4000 CGJIT_GOVERN=2 CGJIT_STEP=sync) x2=$(collected eager 4000 CGJIT_DISABLE=1)
awk -v d1="$d1" -v d2="$d2" -v x1="$x1" -v x2="$x2" 'BEGIN {
  calls = 0; for (it = 2000; it < 4000; it++) calls += 21 + (it * 7919) % 13
  printf "host-cost: a call while dormant: %.1f instructions over no cgjit in the call (callgrind, %d calls)\n",
    ((d2 - d1) - (x2 - x1)) / calls, calls }'

# Instructions a step made for the first time costs cgjit (its first run, a warm-up run, and
# its second) over the same calls untraced: step_cost_app's fresh steps at 200 and at 400, so
# that start-up cancels, over the 200 more steps.
on="CGJIT_WARMUP_RUNS=1 CGJIT_BUILD_BACKGROUND=1 CGJIT_STEP=sync"
s1=$(collected fresh 200 $on) o1=$(collected fresh 200 CGJIT_STEP=off)
s2=$(collected fresh 400 $on) o2=$(collected fresh 400 CGJIT_STEP=off)
awk -v s1="$s1" -v s2="$s2" -v o1="$o1" -v o2="$o2" 'BEGIN {
  printf "host-cost: a step of 4 calls made for the first time: %.0f instructions for its first and second runs over untraced (callgrind, 200 steps)\n",
    ((s2 - s1) - (o2 - o1)) / 200 }'

# Instructions libcgjit spends per library call in a replayed step (lib_cost_app: 16
# cublasSgemm_v2 on the fake cuBLAS, each with the launch the library makes and a kernel of the
# program's after it, the step's begin, end and graph launch shared among them): its steps at
# 200 and at 400, so that start-up cancels, over the 200 more steps' library calls. What cgjit
# adds to the library's own host work, which runs on every call.
lc=$build/tests/lib_cost_app
[ -x "$lc" ] || exit 0
# in_cgjit N: instructions spent in libcgjit by lib_cost_app N.
in_cgjit() {
  valgrind --tool=callgrind --callgrind-out-file="$tmp/l.out" "$lc" "$1" >/dev/null 2>&1
  callgrind_annotate "$tmp/l.out" 2>/dev/null | grep 'libcgjit' | awk '{ n = $1; gsub(",", "", n); t += n } END { print t }'
}
l1=$(in_cgjit 200) l2=$(in_cgjit 400)
awk -v l1="$l1" -v l2="$l2" 'BEGIN {
  printf "host-cost: a library call in a replayed step: %.0f instructions in libcgjit, with its launch and a kernel of the program'"'"'s (callgrind, 200 steps of 16)\n",
    (l2 - l1) / (200 * 16) }'
