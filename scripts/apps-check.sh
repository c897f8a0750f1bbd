#!/usr/bin/env bash
# apps-check.sh BUILD_DIR [OUTDIR] — run every sample program of tests/apps (BUILD_DIR/tests/apps)
# without cgjit and with LD_PRELOAD=BUILD_DIR/libcgjit.so, and check that stdout is byte for byte
# the same and that cgjit replayed something.
#
# For each program: one run without preload (stdout -> NAME.eager.out, stderr -> NAME.eager.err),
# and one with `LD_PRELOAD=libcgjit.so CGJIT_REPORT=1 CGJIT_STEP=POLICY` for each step policy,
# sync and auto (NAME.POLICY.out, NAME.POLICY.err). Each run's stdout is compared with the eager
# one with cmp; the exit report on stderr says whether an anchor reached REPLAY (and how many
# were BLACKLISTED). Programs: NAME_static and NAME_shared (CUDA C++), vector_add_drv (C with
# -lcuda), torch_* (PyTorch scripts, run where python3 has torch), no_cuda (no CUDA at all). Programs print their per-iteration time
# to stderr as "APP: median_us=X" (no_sync_loop: "mean_us"), read here for both runs.
# tiny_kernels is also run APPS_CHECK_PAIRS times (default 5) alternately without preload and
# with the preload and CGJIT_STEP=off, to measure what the preload alone costs (median of each).
#
# Files go to OUTDIR (default BUILD_DIR/apps-check). The summary table comes last. Exit status:
# 0 when every output is identical and every run exited 0 (replay and the speed targets are
# reported, not enforced); 1 otherwise; 2 on bad usage. Each run is bounded by `timeout 120`.
set -u

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [OUTDIR]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=${2:-$build/apps-check}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
lib=$build/libcgjit.so
apps=$build/tests/apps
pairs=${APPS_CHECK_PAIRS:-5}
limit=120
if [ ! -f "$lib" ]; then
  echo "apps-check: $lib not found (build first)" >&2
  exit 2
fi
if [ ! -d "$apps" ]; then
  echo "apps-check: $apps not found (configure with -DCGJIT_GPU_TESTS=ON and build)" >&2
  exit 2
fi
if ! command -v timeout >/dev/null 2>&1; then
  echo "apps-check: timeout(1) is needed" >&2
  exit 2
fi

# run_plain EXE STEM: run without cgjit; sets rc.
run_plain() {
  timeout -k 10 "$limit" "$1" >"$out/$2.out" 2>"$out/$2.err"
  rc=$?
}

# run_cgjit EXE STEM POLICY: run under the preload with the report; sets rc.
run_cgjit() {
  timeout -k 10 "$limit" env LD_PRELOAD="$lib" CGJIT_REPORT=1 CGJIT_STEP="$3" "$1" \
    >"$out/$2.out" 2>"$out/$2.err"
  rc=$?
}

# us APP FILE: the per-iteration microseconds the program printed to stderr, or "" if none.
us() {
  sed -n "s/^$1: [a-z]*_us=\([0-9][0-9.]*\).*/\1/p" "$2" 2>/dev/null | tail -n 1
}

# rc_note RC: "" for 0, else a short note.
rc_note() {
  case "$1" in
    0) echo "" ;;
    124 | 137) echo "timed out" ;;
    *) echo "exit $1" ;;
  esac
}

# median of the numbers given as arguments ("" if none).
median() {
  if [ $# -eq 0 ]; then
    echo ""
    return
  fi
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
    else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratio A B: A / B with two decimals, "" if either is missing or B is 0.
ratio() {
  if [ -z "$1" ] || [ -z "$2" ]; then
    echo ""
    return
  fi
  awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f\n", a / b }'
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
[ -n "$gpu" ] || gpu="unknown (nvidia-smi gave no name)"

failed=0
rows=""
extra=""
details=""
n=0
for exe in "$apps"/*; do
  if [ ! -f "$exe" ] || [ ! -x "$exe" ]; then continue; fi
  base=$(basename "$exe")
  case "$base" in
    *.fatbin) continue ;;
    *_static) app=${base%_static} flavour=static ;;
    *_shared) app=${base%_shared} flavour=shared ;;
    no_cuda) app=$base flavour=host ;;
    torch_*) app=$base flavour=torch ;;
    *) app=$base flavour=driver ;;
  esac
  n=$((n + 1))
  run_plain "$exe" "$base.eager"
  rc_e=$rc
  t_e=$(us "$app" "$out/$base.eager.err")
  for policy in sync auto; do
  echo "== $base (CGJIT_STEP=$policy)"
  run_cgjit "$exe" "$base.$policy" "$policy"
  rc_c=$rc

  note=""
  [ "$rc_e" -ne 0 ] && note="without: $(rc_note "$rc_e")"
  [ "$rc_c" -ne 0 ] && note="${note:+$note; }with: $(rc_note "$rc_c")"
  if [ "$rc_e" -ne 0 ] || [ "$rc_c" -ne 0 ]; then failed=1; fi

  cmp -s "$out/$base.eager.out" "$out/$base.$policy.out"
  rc_cmp=$?
  if [ "$rc_cmp" -eq 0 ] && [ -s "$out/$base.eager.out" ]; then
    same=yes
  else
    same=no
    failed=1
    if [ ! -s "$out/$base.eager.out" ]; then note="${note:+$note; }no output"; fi
    first=$(cmp "$out/$base.eager.out" "$out/$base.$policy.out" 2>&1 | head -n 1)
    details="$details  $base ($policy): outputs differ: $first
"
  fi

  err=$out/$base.$policy.err
  n_replay=$(grep -a -c -w 'REPLAY' "$err")
  n_black=$(grep -a -c -w 'BLACKLISTED' "$err")
  if [ "$flavour" = host ]; then
    replayed="n/a"
  elif [ "$n_replay" -gt 0 ]; then
    replayed=yes
  else
    replayed=no
  fi
  [ "$n_black" -gt 0 ] && note="${note:+$note; }$n_black blacklisted"

  t_c=$(us "$app" "$err")
  speedup=$(ratio "$t_e" "$t_c")

  # The report's anchor lines and reasons, and any stderr of a failed run, for the details.
  anchors=$(grep -a -E "anchor '|^ +(blacklisted|last event): " "$err" | head -n 8)
  [ -n "$anchors" ] && details="$details  $base ($policy):
$anchors
"
  if [ "$rc_e" -ne 0 ]; then
    details="$details  $base (without cgjit) stderr tail:
$(tail -n 5 "$out/$base.eager.err")
"
  fi
  if [ "$rc_c" -ne 0 ]; then
    details="$details  $base (with cgjit, $policy) stderr tail:
$(grep -a -v -E '^  [a-z_]+ +[0-9]+  ' "$err" | tail -n 8)
"
  fi

  rows="$rows$(printf '  %-20s %-7s %-5s %-9s %-8s %10s %10s %8s  %s' "$app" "$flavour" "$policy" \
    "$same" "$replayed" "${t_e:--}" "${t_c:--}" "${speedup:--}" "$note")
"
  note=""
  [ "$rc_e" -ne 0 ] && note="without: $(rc_note "$rc_e")"
  done

  # tiny_kernels: the targets (>= 3x with cgjit; CGJIT_STEP=off costs <= 2%).
  if [ "$app" = tiny_kernels ] && [ "$policy" = sync ]; then
    plain_list=()
    off_list=()
    off_same=yes
    for i in $(seq 1 "$pairs"); do
      run_plain "$exe" "$base.pair$i.eager"
      rc_p=$rc
      t=$(us "$app" "$out/$base.pair$i.eager.err")
      [ "$rc_p" -eq 0 ] && [ -n "$t" ] && plain_list+=("$t")
      run_cgjit "$exe" "$base.pair$i.off" off
      rc_o=$rc
      t=$(us "$app" "$out/$base.pair$i.off.err")
      [ "$rc_o" -eq 0 ] && [ -n "$t" ] && off_list+=("$t")
      if [ "$rc_p" -ne 0 ] || [ "$rc_o" -ne 0 ]; then
        failed=1
        off_same="no (run failed: $(rc_note "$rc_p")/$(rc_note "$rc_o"))"
      fi
      if ! cmp -s "$out/$base.eager.out" "$out/$base.pair$i.off.out"; then
        failed=1
        off_same=no
      fi
    done
    m_plain=$(median "${plain_list[@]+"${plain_list[@]}"}")
    m_off=$(median "${off_list[@]+"${off_list[@]}"}")
    overhead=""
    if [ -n "$m_plain" ] && [ -n "$m_off" ]; then
      overhead=$(awk -v a="$m_off" -v b="$m_plain" 'BEGIN { if (b > 0) printf "%+.1f\n", (a / b - 1) * 100 }')
    fi
    target_speed="not met"
    if [ -n "$speedup" ] && awk -v s="$speedup" 'BEGIN { exit !(s >= 3) }'; then target_speed=met; fi
    target_off="not met"
    if [ -n "$overhead" ] && awk -v o="$overhead" 'BEGIN { exit !(o <= 2) }'; then target_off=met; fi
    extra="$extra  tiny_kernels $flavour: speedup with cgjit ${speedup:-?}x (target >= 3x: $target_speed); CGJIT_STEP=off: median of $pairs runs ${m_off:-?} us vs ${m_plain:-?} us without preload, overhead ${overhead:-?}% (target <= 2%: $target_off); output identical: $off_same
"
  fi
done

if [ "$n" -eq 0 ]; then
  echo "apps-check: no programs in $apps" >&2
  exit 2
fi

echo
echo "details (report anchors, differences, failures):"
printf '%s' "${details:-  none
}"
echo
echo "apps-check on $gpu; outputs in $out"
printf '  %-20s %-7s %-5s %-9s %-8s %10s %10s %8s  %s\n' app flavour step identical replayed \
  "us_without" "us_with" speedup note
printf '%s' "$rows"
printf '%s' "$extra"
if [ "$failed" -eq 0 ]; then
  echo "PASS: $n programs, every output identical with and without cgjit"
else
  echo "FAIL: some output differs or some run failed (see above)"
fi
exit "$failed"
