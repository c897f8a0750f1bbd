#!/usr/bin/env bash
# test_compare_checks.sh COMPARE_CHECKS_PY — scripts/compare-checks.py on two made-up tables of
# real-check (table.tsv): a gain kept, a gain lost (under 98% of it), a speed under 0.98x, a
# verdict that is no longer identical, rows gone and new; the lowest of a program's several
# speeds counts. Then two tables that differ in nothing found: exit 0. A table without a speed
# column: exit 2.
set -euo pipefail
script=${1:?usage: test_compare_checks.sh COMPARE_CHECKS_PY}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tab() { printf 'program\tconfig\tverdict\tspeed\treplayed\tverify\tnote\n'; printf '%s\n' "$@" | tr '|' '\t'; }
tab "kept|sync|identical|1.20x|98.0%||" "lost|sync|identical|1.50x|90.0%||" "slow|auto|identical|1.00x|n/a||" \
  "broke|sync|identical|1.00x|||" "gone|sync|identical|1.10x|||" "multi|sync|identical|1.10x/1.30x|||" >"$tmp/before.tsv"
mkdir -p "$tmp/now"
tab "kept|sync|identical|1.198x|97.0%||" "lost|sync|identical|1.30x|90.0%||" "slow|auto|identical|0.95x|n/a||" \
  "broke|sync|DIFFERS at line 3|1.00x|||" "new|sync|identical|1.00x|||" "multi|sync|identical|1.30x/1.09x|||" >"$tmp/now/table.tsv"
status=0
python3 "$script" "$tmp/before.tsv" "$tmp/now" >"$tmp/out.txt" 2>&1 || status=$?
cat "$tmp/out.txt"
[ "$status" -eq 1 ] || { echo "FAIL: exit status $status with findings"; exit 1; }
grep -q '^| kept | sync | 1.20x | 1.20x | 99% | identical | 97.0% |$' "$tmp/out.txt" || { echo "FAIL: kept's row"; exit 1; }
grep -q '^lost: lost sync: 1.50x before, 1.30x now (60% of its gain)$' "$tmp/out.txt" || { echo "FAIL: lost not found"; exit 1; }
! grep -q '^lost: kept ' "$tmp/out.txt" || { echo "FAIL: 98% of a gain is no loss"; exit 1; }
grep -q '^below: slow auto: 0.95x' "$tmp/out.txt" || { echo "FAIL: slow not below"; exit 1; }
grep -q '^differs: broke sync: DIFFERS at line 3$' "$tmp/out.txt" || { echo "FAIL: broke not found"; exit 1; }
grep -q '^gone: gone sync' "$tmp/out.txt" && grep -q '^new: new sync' "$tmp/out.txt" || { echo "FAIL: gone/new"; exit 1; }
grep -q '^lost: multi sync: 1.10x before, 1.09x now' "$tmp/out.txt" || { echo "FAIL: the lowest of several speeds"; exit 1; }
grep -q '^compare-checks: 6 rows now, 6 before, 6 finding(s)$' "$tmp/out.txt" || { echo "FAIL: the summary line"; exit 1; }
python3 "$script" "$tmp/now" "$tmp/now" >/dev/null 2>&1 && { echo "FAIL: a table against itself has findings to show (broke, slow)"; exit 1; }
tab "a|sync|identical|1.10x|||" >"$tmp/same.tsv"
python3 "$script" "$tmp/same.tsv" "$tmp/same.tsv" >"$tmp/same.txt" || { cat "$tmp/same.txt"; echo "FAIL: exit status with no finding"; exit 1; }
printf 'program\tconfig\n' >"$tmp/bad.tsv"
status=0
python3 "$script" "$tmp/bad.tsv" "$tmp/same.tsv" >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || { echo "FAIL: exit status $status for a table without a speed"; exit 1; }
echo "PASS: compare-checks finds gains lost, speeds below the floor, verdicts that differ, rows gone and new"
