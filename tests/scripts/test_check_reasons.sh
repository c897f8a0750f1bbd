#!/usr/bin/env bash
# test_check_reasons.sh CHECK_LAYERS_PY — check-layers.py finds a reason row nothing uses: a tree
# of headers only (no objects to look at) whose reason table has three rows, one used by name,
# one through a macro that pastes it, one nowhere.
set -euo pipefail
script=${1:?usage: test_check_reasons.sh CHECK_LAYERS_PY}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/ir" "$tmp/src/tracer" "$tmp/build"
cat >"$tmp/src/ir/reason.h" <<'H'
#define ROWS(X) \
    X(DIFF_KERNEL, "kernel differs", "") \
    X(OFF_COST, "replay cost more", "") \
    X(LIB_NEVER, "never used", "")
H
cat >"$tmp/src/tracer/use.h" <<'H'
#define DIFF(code) set(CGJ_REASON_DIFF_##code)
static inline void f(void) { DIFF(KERNEL); set(CGJ_REASON_OFF_COST); }
H
status=0
out=$(python3 "$script" "$tmp/src" "$tmp/build") || status=$?
echo "$out"
[ "$status" -eq 1 ] || { echo "FAIL: exit status $status, expected 1"; exit 1; }
grep -q 'reason row LIB_NEVER (ir/reason.h) is used nowhere' <<<"$out" || { echo "FAIL: LIB_NEVER not named"; exit 1; }
! grep -q 'DIFF_KERNEL\|OFF_COST' <<<"$out" || { echo "FAIL: a used row was named"; exit 1; }
echo "PASS: the unused reason row is found, the used ones are not"
