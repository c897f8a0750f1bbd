#!/bin/bash
# host-cost.sh — cgjit's own host cost per absorbed launch, without a GPU: tests/host_cost_app
# (a step shaped like cgjit-bench-decode's, on the fake driver) run 5 times, the median of its
# launch loop's wall time per absorbed launch, and each call's own time after 300 ns of host
# work (--host-ns: the latency the bench's step sees); then, where valgrind is installed, the
# instructions per absorbed call spent in libcgjit (callgrind, 300 steps, replay only), the
# largest functions first. What the bench on a GPU measures besides (the driver's graph
# launches, the GPU) is not here: this is the part cgjit's code decides.
#
# Then what a run that leaves its trace costs beyond the same run eagerly, and a call in an
# eager implicit step against an untraced one (step_cost_app, the same fake driver).
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
path_costs() {
  local sc=$build/tests/step_cost_app out off on
  [ -x "$sc" ] || return 0
  out=$("$sc" exits 400) || { echo "$out" >&2; exit 1; }
  echo "host-cost: a run that left its trace: $(echo "$out" | sed -n 's/^ *a run that left the trace: //p')"
  off=$(CGJIT_STEP=off "$sc" eager 2000 | sed -n 's/^ *\([0-9.]*\) ns per call.*/\1/p')
  on=$(CGJIT_STEP=sync "$sc" eager 2000 | sed -n 's/^ *\([0-9.]*\) ns per call.*/\1/p')
  echo "host-cost: a call in an eager implicit step: $on ns under CGJIT_STEP=sync, $off ns untraced (CGJIT_STEP=off)"
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
