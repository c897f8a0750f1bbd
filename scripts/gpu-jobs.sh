# gpu-jobs.sh — sourced by apps-check.sh and real-check.sh: jobs at once, each on a GPU and a
# share of the host's cores of its own (APPS_CHECK_GPUS, REAL_CHECK_GPUS).

# gpu_jobs_count VALUE: N for a positive integer N; for "all", the GPUs CUDA_VISIBLE_DEVICES
# names, or else those nvidia-smi lists (1 where it lists none). Fails on anything else.
gpu_jobs_count() {
  local n=$1
  if [ "$n" = all ]; then
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
      n=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
    else
      n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    fi
    [ "$n" -gt 0 ] || n=1
  fi
  case "$n" in '' | *[!0-9]* | 0) return 1 ;; esac
  echo "$n"
}

# gpu_job K N LOG CMD...: CMD in the background as job K of N (from 0), its output in LOG, on
# the K-th GPU CUDA_VISIBLE_DEVICES names (or GPU K where it names none) and, where taskset is
# found, on the K-th N-th of the host's cores.
gpu_job() {
  local k=$1 n=$2 log=$3 cores per visible pin=()
  shift 3
  IFS=, read -r -a visible <<<"${CUDA_VISIBLE_DEVICES:-}"
  cores=$(nproc 2>/dev/null || echo 0)
  per=$((cores / n))
  command -v taskset >/dev/null 2>&1 && [ "$per" -gt 0 ] && pin=(taskset -c "$((k * per))-$((k * per + per - 1))")
  CUDA_VISIBLE_DEVICES=${visible[$k]:-$k} "${pin[@]}" "$@" >"$log" 2>&1 &
}
