#!/usr/bin/env bash
# no-replay-cost.sh BUILD_DIR [RUNS] [PROGRAM...] — what cgjit costs a whole process that
# replays nothing. Runs each program (default: tests/apps one_call_static, one CUDA call, and
# pageable_setup_static, host-heavy set-up with 768 MB of pageable copies) RUNS times (default
# 11), alternately without cgjit, with LD_PRELOAD=libcgjit.so and CGJIT_STEP=off (the wrappers
# only), and with the preload as a user runs it (CGJIT_STEP as set, sync by default), timing
# each process from start to exit. Prints the median wall time of each and the differences,
# against the targets: at most 5 ms for a program of one CUDA call, at most 1% + 5 ms otherwise.
# A PROGRAM is a path, run with no arguments. Exit status 0 (figures only), 2 on bad usage.
set -u
build=$(cd "${1:?usage: $0 BUILD_DIR [RUNS] [PROGRAM...]}" && pwd)
n=${2:-11}
shift $(( $# >= 2 ? 2 : 1 ))
progs=("$@")
[ ${#progs[@]} -gt 0 ] || progs=("$build/tests/apps/one_call_static" "$build/tests/apps/pageable_setup_static")
lib=$build/libcgjit.so
[ -f "$lib" ] || { echo "$lib: not built" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ms() { # run the command, print its wall time in ms
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000 )) | awk '{ printf "%.3f\n", $1 / 1000 }'
}
median() { sort -g "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for p in "${progs[@]}"; do
  [ -x "$p" ] || { echo "$p: not built" >&2; exit 2; }
  name=$(basename "$p")
  : >"$tmp/eager" ; : >"$tmp/off" ; : >"$tmp/on"
  for _ in $(seq "$n"); do
    ms "$p" >>"$tmp/eager"
    ms env LD_PRELOAD="$lib" CGJIT_STEP=off "$p" >>"$tmp/off"
    ms env LD_PRELOAD="$lib" "$p" >>"$tmp/on"
  done
  e=$(median "$tmp/eager") o=$(median "$tmp/off") c=$(median "$tmp/on")
  awk -v name="$name" -v e="$e" -v o="$o" -v c="$c" -v n="$n" 'BEGIN {
    one = name ~ /^one_call/
    limit = one ? 5 : e * 0.01 + 5
    printf "%s: eager %.1f ms, preloaded CGJIT_STEP=off %.1f ms (%+.1f ms), preloaded %.1f ms (%+.1f ms, %+.2f%%); target <= %+.1f ms: %s (medians of %d alternating runs)\n",
      name, e, o, o - e, c, c - e, (c - e) / e * 100, limit, (c - e <= limit ? "met" : "NOT met"), n }'
done
