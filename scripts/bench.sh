#!/usr/bin/env bash
# bench.sh — the main job: install what is needed, build, and run cgjit-bench (eager vs cgjit
# replay vs a hand-built CUDA graph vs the GPU-busy floor) on the GPU this machine has, then
# draw its plots. Extra arguments go to the bench (e.g. --workload chain --sizes 1,10,100,1000).
# The results are kept as JSON (the bench's --json FILE where given, else build-bench/bench.json)
# and drawn beside it as bench-workloads.png and bench-chain.png by scripts/plot-bench.py where
# gnuplot is installed (elsewhere, run that script on the JSON later). Exit status: the bench's;
# 77 where there is no CUDA GPU, said on one line (`no CUDA GPU found: <why>`) before anything
# is installed or built: the driver (libcuda.so.1) is asked, as the bench asks it, by a small C
# program (or python3 where there is no C compiler yet).
set -euo pipefail
cd "$(dirname "$0")/.."

# gpu_check: 0 where the CUDA driver loads and counts a device, 77 where not (the line printed
# says why, as the bench would), 1 where this cannot be told here (no C compiler nor python3 that
# runs the question): the build goes on and the bench says it.
gpu_check() {
  local dir rc=1
  dir=$(mktemp -d)
  if command -v cc >/dev/null 2>&1; then
    cat >"$dir/gpu.c" <<'EOC'
#include <dlfcn.h>
#include <stdio.h>
typedef int (*init_fn)(unsigned);
typedef int (*count_fn)(int *);
typedef int (*text_fn)(int, const char **);
int main(void)
{
    void *d = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d) { printf("the CUDA driver cannot be loaded (%s)\n", dlerror()); return 77; }
    init_fn init = (init_fn)dlsym(d, "cuInit");
    count_fn count = (count_fn)dlsym(d, "cuDeviceGetCount");
    text_fn name = (text_fn)dlsym(d, "cuGetErrorName"), text = (text_fn)dlsym(d, "cuGetErrorString");
    if (!init || !count) { printf("the CUDA driver has no cuInit or cuDeviceGetCount\n"); return 77; }
    int e = init(0), n = 0;
    if (e == 0) e = count(&n);
    if (e != 0) {
        const char *s = NULL, *t = NULL;
        if (name) name(e, &s);
        if (text) text(e, &t);
        printf("cuInit: %s (%s)\n", s ? s : "?", t ? t : "?");
        return 77;
    }
    if (n < 1) { printf("the CUDA driver sees no device\n"); return 77; }
    return 0;
}
EOC
    if cc -o "$dir/gpu" "$dir/gpu.c" -ldl >/dev/null 2>&1; then
      rc=0
      timeout 120 "$dir/gpu" >"$dir/why" || rc=$?
    fi
  fi
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && command -v python3 >/dev/null 2>&1; then
    rc=0
    timeout 120 python3 - >"$dir/why" <<'EOP' || rc=$?
import ctypes, sys
try:
    d = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print("the CUDA driver cannot be loaded (%s)" % e)
    sys.exit(77)
n = ctypes.c_int(0)
e = d.cuInit(0)
if e == 0:
    e = d.cuDeviceGetCount(ctypes.byref(n))
if e != 0:
    s, t = ctypes.c_char_p(), ctypes.c_char_p()
    d.cuGetErrorName(e, ctypes.byref(s))
    d.cuGetErrorString(e, ctypes.byref(t))
    print("cuInit: %s (%s)" % ((s.value or b"?").decode(), (t.value or b"?").decode()))
    sys.exit(77)
if n.value < 1:
    print("the CUDA driver sees no device")
    sys.exit(77)
EOP
  fi
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || rc=1
  [ "$rc" -ne 77 ] || echo "bench.sh: no CUDA GPU found: $(head -n 1 "$dir/why")" >&2
  rm -rf "$dir"
  return "$rc"
}
gpu=0
gpu_check || gpu=$?
[ "$gpu" -ne 77 ] || exit 77
scripts/deps.sh bench
# Asked again where it could not be asked before (deps.sh installs the C compiler).
if [ "$gpu" -ne 0 ]; then gpu_check || [ $? -ne 77 ] || exit 77; fi
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH
# A build folder of its own, without the tests: the bench needs no Criterion.
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target cgjit-bench

args=("$@")
json=""
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  if [ "${args[i]}" = --json ]; then json=${args[i + 1]}; fi
done
if [ -z "$json" ]; then
  json=build-bench/bench.json
  args+=(--json "$json")
fi
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
status=0
build-bench/bench/cgjit-bench ${args[@]+"${args[@]}"} || status=$?
# Plot only what this run wrote (not a JSON left by an earlier one, nor after --help).
if [ "$json" -nt "$stamp" ]; then
  if command -v gnuplot >/dev/null && command -v python3 >/dev/null; then
    python3 scripts/plot-bench.py "$json" || echo "bench.sh: plotting $json failed" >&2
  else
    echo "bench.sh: no plots: gnuplot or python3 is missing (scripts/plot-bench.py $json draws them elsewhere)"
  fi
fi
exit "$status"
