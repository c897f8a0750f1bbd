#!/usr/bin/env bash
# preload-cost.sh BUILD_DIR [RUNS] [FLAVOUR] — what LD_PRELOAD=libcgjit.so with CGJIT_STEP=off
# costs: runs tests/apps/tiny_kernels_FLAVOUR (static or shared; default static) RUNS times
# (default 21) alternately without and with the preload, and prints the median of each and the
# difference. Alternating runs, many of them, because the eager launch rate of one run of the
# same binary varies by about ±10% from the next.
set -u
build=$(cd "${1:?usage: $0 BUILD_DIR [RUNS] [FLAVOUR]}" && pwd)
n=${2:-21}
flavour=${3:-static}
app=$build/tests/apps/tiny_kernels_$flavour
[ -x "$app" ] || { echo "$app: not built" >&2; exit 2; }
tmp=$(mktemp -d)
for _ in $(seq "$n"); do
  "$app" 2>&1 >/dev/null | sed -n 's/.*median_us=//p' >>"$tmp/without"
  LD_PRELOAD=$build/libcgjit.so CGJIT_STEP=off "$app" 2>&1 >/dev/null | sed -n 's/.*median_us=//p' >>"$tmp/off"
done
median() { sort -g "$1" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
w=$(median "$tmp/without")
o=$(median "$tmp/off")
rm -rf "$tmp"
awk -v w="$w" -v o="$o" -v n="$n" -v f="$flavour" 'BEGIN {
  printf "tiny_kernels_%s: without %.1f us, preloaded with CGJIT_STEP=off %.1f us: %+.2f%% (medians of %d alternating runs)\n", f, w, o, (o - w) / w * 100, n }'
