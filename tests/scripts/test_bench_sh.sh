#!/usr/bin/env bash
# test_bench_sh.sh SOURCE_DIR OUTDIR — scripts/bench.sh asks the CUDA driver before it installs
# or builds anything. Where the driver cannot be loaded or counts no device, it says so on one
# line, `bench.sh: no CUDA GPU found: <why>`, and exits 77 without running deps.sh or cmake;
# where the driver counts a device, it goes on to install and build, as it always did.
#
# bench.sh runs from a copy of scripts/ in OUTDIR, beside stand-ins for deps.sh and cmake that
# only note that they ran (cmake then fails, which ends bench.sh). The drivers are stand-ins too,
# as libcuda.so.1 in a folder of LD_LIBRARY_PATH (searched before the system's): no driver (a
# file that is no library), a cuInit that says CUDA_ERROR_NO_DEVICE, a driver that counts no
# device, one that counts one; each asked by the C program and by python3 (where no C compiler
# works). Then this machine's own driver, whatever it is: 77 with the line and nothing begun, or
# the build begun. Exit 77 (skipped, with the reason) where no C compiler is found for the
# stand-in drivers.
set -euo pipefail
src=${1:?usage: test_bench_sh.sh SOURCE_DIR OUTDIR}
out=${2:?usage: test_bench_sh.sh SOURCE_DIR OUTDIR}
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null; then
  echo "SKIP: no C compiler ($cc) for the stand-in drivers"
  exit 77
fi
rm -rf "$out" && mkdir -p "$out/repo/scripts" "$out/bin" "$out/nocc"
cp "$src/scripts/bench.sh" "$out/repo/scripts/"
cat >"$out/repo/scripts/deps.sh" <<EOS
#!/usr/bin/env bash
echo "deps.sh \$*" >>"$out/ran"
EOS
cat >"$out/bin/cmake" <<EOS
#!/usr/bin/env bash
echo "cmake \$*" >>"$out/ran"
exit 1
EOS
printf '#!/bin/sh\nexit 1\n' >"$out/nocc/cc" # a C compiler that compiles nothing: python3 asks
chmod +x "$out/repo/scripts/deps.sh" "$out/bin/cmake" "$out/nocc/cc"

# driver NAME INIT_RC COUNT: a stand-in libcuda.so.1 in $out/NAME.
driver() {
  mkdir -p "$out/$1"
  cat >"$out/$1/driver.c" <<'EOC'
int cuInit(unsigned flags) { return flags ? 1 : INIT_RC; }
int cuDeviceGetCount(int *n) { *n = COUNT; return 0; }
int cuGetErrorName(int e, const char **s) { *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN"; return 0; }
int cuGetErrorString(int e, const char **s) { *s = e == 100 ? "no CUDA-capable device is detected" : "unknown error"; return 0; }
EOC
  "$cc" -shared -fPIC -DINIT_RC="$2" -DCOUNT="$3" -o "$out/$1/libcuda.so.1" "$out/$1/driver.c"
}
driver nodevice 100 0
driver zero 0 0
driver one 0 1
mkdir -p "$out/broken"
echo "not a library" >"$out/broken/libcuda.so.1"

# bench PATH_FRONT [LD_LIBRARY_PATH]: run the copy of bench.sh; sets status, log and ran.
bench() {
  rm -f "$out/ran"
  status=0
  PATH="$1:$PATH" LD_LIBRARY_PATH=${2-${LD_LIBRARY_PATH:-}} bash "$out/repo/scripts/bench.sh" \
    >"$out/log" 2>&1 || status=$?
  log=$(cat "$out/log")
  ran=$(cat "$out/ran" 2>/dev/null || true)
}
fail() {
  echo "FAIL: $*"
  echo "bench.sh said:"
  echo "$log"
  exit 1
}
# no_gpu WHAT WHY: bench.sh said no GPU, WHY (the start of its reason), on one line, with status
# 77, and began nothing.
no_gpu() {
  [ "$status" -eq 77 ] || fail "$1: status $status, expected 77"
  [ "${log#"bench.sh: no CUDA GPU found: $2"}" != "$log" ] || fail "$1: not 'bench.sh: no CUDA GPU found: $2...'"
  [ "$(echo "$log" | wc -l)" -eq 1 ] || fail "$1: more than one line"
  [ -z "$ran" ] || fail "$1: ran $ran before saying there is no GPU"
  [ ! -e "$out/repo/build-bench" ] || fail "$1: a build folder was made"
}
askers=(c)
command -v python3 >/dev/null && askers+=(python3)
for asker in "${askers[@]}"; do
  front=$out/bin
  [ "$asker" = c ] || front=$out/nocc:$out/bin
  bench "$front" "$out/broken"
  no_gpu "no driver ($asker)" "the CUDA driver cannot be loaded ($out/broken/libcuda.so.1: "
  bench "$front" "$out/nodevice"
  no_gpu "cuInit without a device ($asker)" "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
  bench "$front" "$out/zero"
  no_gpu "a driver that counts no device ($asker)" "the CUDA driver sees no device"
  bench "$front" "$out/one"
  [ "$status" -ne 77 ] || fail "a driver with a device ($asker): status 77"
  [[ "$ran" == "deps.sh bench"*"cmake "* ]] || fail "a driver with a device ($asker): deps.sh and cmake did not run (ran: $ran)"
done
# This machine's driver, as it is.
bench "$out/bin"
if [ "$status" -eq 77 ]; then
  [[ "$log" == "bench.sh: no CUDA GPU found: "?* ]] || fail "this machine: status 77 without the line"
  [ "$(echo "$log" | wc -l)" -eq 1 ] || fail "this machine: more than one line"
  [ -z "$ran" ] || fail "this machine: ran $ran before saying there is no GPU"
  echo "PASS: no GPU here, said at once: $log"
else
  [[ "$ran" == "deps.sh bench"*"cmake "* ]] || fail "this machine: neither 77 nor the build begun (ran: $ran)"
  echo "PASS: a GPU here: bench.sh went on to build"
fi
