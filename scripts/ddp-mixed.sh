#!/usr/bin/env bash
# ddp-mixed.sh BUILD_DIR [OUTDIR] — ranks that take different decisions still agree with eager.
#
# Runs tests/apps/ddp_trainer_static as two processes, one rank each (DDP_RANK, the way another
# launcher starts them), on a machine with two GPUs: both eager; rank 0 under cgjit and rank 1
# eager; the reverse; both under cgjit. Every run's output (rank 0's losses, each rank's weight
# checksum) must be byte-identical to the eager run's, and no run may hang (each is bounded).
# DDP_STEPS (default 1000) sets the steps. Exit status 0 when all agree.
set -u
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [OUTDIR]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=${2:-$build/ddp-mixed}
mkdir -p "$out" || exit 2
app=$build/tests/apps/ddp_trainer_static
lib=$build/libcgjit.so
steps=${DDP_STEPS:-1000}
export NCCL_NVLS_ENABLE=0 # keep NVLink multicast off (shared machines)

run() { # TAG PRELOAD0 PRELOAD1
  local id="$out/$1.id"
  rm -f "$id"
  env DDP_STEPS="$steps" DDP_RANK=1 DDP_RANKS=2 DDP_ID_FILE="$id" LD_PRELOAD="$3" CGJIT_REPORT=1 \
    timeout -k 5 300 "$app" > "$out/$1.1.out" 2> "$out/$1.1.err" &
  local pid=$!
  env DDP_STEPS="$steps" DDP_RANK=0 DDP_RANKS=2 DDP_ID_FILE="$id" LD_PRELOAD="$2" CGJIT_REPORT=1 \
    timeout -k 5 300 "$app" > "$out/$1.0.out" 2> "$out/$1.0.err"
  local rc0=$? rc1=0
  wait "$pid" || rc1=$?
  echo "$1: exit $rc0/$rc1; rank 0 $(grep -h 'median_us' "$out/$1.0.err"); $(grep -h summary "$out/$1".*.err | tr -s ' ' | tr '\n' ';')"
  [ "$rc0" = 0 ] && [ "$rc1" = 0 ]
}

failed=0
run eager "" "" || failed=1
for t in "mixed $lib" "mixed_reversed - $lib" "both $lib $lib"; do
  set -- $t
  tag=$1 p0=${2:-} p1=${3:-}
  [ "$p0" = "-" ] && p0=""
  run "$tag" "$p0" "$p1" || failed=1
  if cmp -s "$out/eager.0.out" "$out/$tag.0.out" && cmp -s "$out/eager.1.out" "$out/$tag.1.out"; then
    echo "$tag: identical to eager"
  else
    echo "$tag: DIFFERS from eager"
    failed=1
  fi
done
[ "$failed" = 0 ] && echo "ddp-mixed: PASS" || echo "ddp-mixed: FAIL"
exit "$failed"
