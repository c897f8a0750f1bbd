#!/usr/bin/env bash
# ddp-mixed.sh BUILD_DIR [OUTDIR] — ranks that take different decisions still agree with eager.
#
# Runs tests/apps/ddp_trainer_static as two processes, one rank each (DDP_RANK, the way another
# launcher starts them), on a machine with two GPUs: both eager; rank 0 under cgjit and rank 1
# eager; the reverse; both under cgjit. Every run's output (rank 0's losses, each rank's weight
# checksum) must be byte-identical to the eager run's, and no run may hang.
#
# A hang is the worst failure a collective can have, so each run is watched: past DDP_TIMEOUT
# seconds (default 300) the script writes what each live rank is doing (every thread's stack,
# through cuda-gdb or gdb where one is installed, into OUTDIR/TAG.RANK.stacks) and cgjit's report
# as it stands (CGJIT_REPORT_EVERY_S keeps OUTDIR/TAG.RANK.report current while a rank runs), then
# kills the run. DDP_STEPS (default 1000) sets the steps. Exit status 0 when all agree.
set -u
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [OUTDIR]  (env: DDP_STEPS DDP_TIMEOUT)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=${2:-$build/ddp-mixed}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
app=$build/tests/apps/ddp_trainer_static
lib=$build/libcgjit.so
steps=${DDP_STEPS:-1000}
limit=${DDP_TIMEOUT:-300}
case "$limit" in '' | *[!0-9]* | 0) echo "ddp-mixed: DDP_TIMEOUT must be a positive integer" >&2; exit 2 ;; esac
for f in "$app" "$lib"; do
  [ -e "$f" ] || { echo "ddp-mixed: $f not found (build first)" >&2; exit 2; }
done
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -lt 2 ]; then
  echo "ddp-mixed: skipped: needs two GPUs, nvidia-smi lists ${gpus:-0}"
  exit 0
fi
# Keep NVLink multicast off: on a shared machine it can take the GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

debugger=""
for d in cuda-gdb gdb; do
  if command -v "$d" >/dev/null 2>&1; then debugger=$d; break; fi
done

# stacks PID FILE: every thread's stack of a live process, into FILE.
stacks() {
  if [ -z "$debugger" ]; then
    echo "no debugger installed; /proc/$1/task/*/wchan:" >"$2"
    for t in /proc/"$1"/task/*; do echo "$(basename "$t") $(cat "$t/comm" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)"; done >>"$2"
    return
  fi
  timeout -k 5 90 "$debugger" -q -batch -p "$1" -ex "thread apply all bt 30" >"$2" 2>&1
}

run() { # TAG PRELOAD0 PRELOAD1
  local tag=$1 id="$out/$1.id" r pids=() pre rc0=0 rc1=0 waited=0 hung=0
  rm -f "$id" "$out/$tag".*.report "$out/$tag".*.stacks
  for r in 1 0; do
    if [ "$r" = 0 ]; then pre=$2; else pre=$3; fi
    env DDP_STEPS="$steps" DDP_RANK=$r DDP_RANKS=2 DDP_ID_FILE="$id" LD_PRELOAD="$pre" \
      CGJIT_REPORT="text:$out/$tag.$r.report" CGJIT_REPORT_EVERY_S=5 \
      "$app" >"$out/$tag.$r.out" 2>"$out/$tag.$r.err" &
    pids[r]=$!
  done
  while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
    if [ "$waited" -ge "$limit" ]; then
      hung=1
      for r in 0 1; do
        if kill -0 "${pids[r]}" 2>/dev/null; then
          echo "$tag: rank $r still running after ${limit}s: stacks in $out/$tag.$r.stacks"
          stacks "${pids[r]}" "$out/$tag.$r.stacks"
        fi
      done
      kill -9 "${pids[0]}" "${pids[1]}" 2>/dev/null
      break
    fi
    sleep 1
    waited=$((waited + 1))
  done
  wait "${pids[0]}" || rc0=$?
  wait "${pids[1]}" || rc1=$?
  echo "$tag: exit $rc0/$rc1 after ${waited}s; rank 0 $(grep -h 'median_us' "$out/$tag.0.err")"
  for r in 0 1; do
    [ -s "$out/$tag.$r.report" ] && echo "  rank $r:$(grep -h -m 1 'summary:' "$out/$tag.$r.report" | tr -s ' ')"
  done
  [ "$hung" = 0 ] && [ "$rc0" = 0 ] && [ "$rc1" = 0 ]
}

failed=0
if ! run eager "" ""; then
  echo "ddp-mixed: FAIL: the eager run failed; nothing to compare with"
  exit 1
fi
for t in "mixed $lib -" "mixed_reversed - $lib" "both $lib $lib"; do
  set -- $t
  tag=$1 p0=$2 p1=$3
  [ "$p0" = "-" ] && p0=""
  [ "$p1" = "-" ] && p1=""
  if ! run "$tag" "$p0" "$p1"; then
    echo "$tag: FAILED (see above)"
    failed=1
  elif cmp -s "$out/eager.0.out" "$out/$tag.0.out" && cmp -s "$out/eager.1.out" "$out/$tag.1.out"; then
    echo "$tag: identical to eager"
  else
    echo "$tag: DIFFERS from eager"
    failed=1
  fi
done
[ "$failed" = 0 ] && echo "ddp-mixed: PASS" || echo "ddp-mixed: FAIL"
exit "$failed"
