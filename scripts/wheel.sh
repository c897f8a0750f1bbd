#!/usr/bin/env bash
# wheel.sh [BUILD_DIR] [OUT_DIR] — build the cgjit wheel: the Python module (python/cgjit), with
# BUILD_DIR's libcgjit.so and cgjit-run copied into cgjit/_lib/, into OUT_DIR (default: dist/).
#
# BUILD_DIR (default: build-wheel) is configured (RelWithDebInfo, -DCGJIT_GLIBC_COMPAT=2.28, no
# tests, no bench) and its library and launcher built where it holds no library yet. The library and the launcher must need nothing outside
# glibc and libgcc_s (CUDA's libraries are dlopened at run time, never bundled): the script checks
# their NEEDED entries. The wheel is tagged py3-none-manylinux_2_M_x86_64, M the newest glibc 2.M
# the two files need, 28 at the least. A build with -DCGJIT_GLIBC_COMPAT=2.28 needs no more than
# 2.28 on any build machine: its wheel is manylinux_2_28, and a symbol version above 2.28 in it
# fails the script (listed) rather than changing the tag. Another build (an existing one without
# the option) is tagged with the glibc its files need, 2.34 on a glibc 2.34 or later machine.
# auditwheel checks the wheel where installed. setuptools and wheel come from PyPI into a virtual
# environment of the script's own. The wheel's path is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-wheel}
out=${2:-dist}
[ "$(uname -m)" = x86_64 ] || { echo "wheel.sh: the wheel is for x86_64; this is $(uname -m)" >&2; exit 2; }

if [ ! -e "$build/libcgjit.so" ] || [ ! -x "$build/cgjit-run" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCGJIT_GLIBC_COMPAT=2.28 \
    -DCGJIT_BENCH=OFF -DCGJIT_GPU_TESTS=OFF -DBUILD_TESTING=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target cgjit cgjit-run
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage
mkdir -p "$stage/cgjit/_lib"
cp python/pyproject.toml python/setup.py python/README.md "$stage/"
cp python/cgjit/*.py python/cgjit/py.typed "$stage/cgjit/"
cp -L "$build/libcgjit.so" "$stage/cgjit/_lib/libcgjit.so"
cp -L "$build/cgjit-run" "$stage/cgjit/_lib/cgjit-run"
if command -v strip >/dev/null; then strip --strip-debug "$stage"/cgjit/_lib/*; fi
chmod 755 "$stage/cgjit/_lib/cgjit-run"

# Nothing outside glibc and libgcc_s, and the newest glibc symbol version needed (the version
# references, readelf -V's .gnu.version_r).
allowed=" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1 ld-linux-x86-64.so.2 "
compat=$(sed -n 's/^CGJIT_GLIBC_COMPAT:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
glibc_minor=28
over=""
for f in "$stage"/cgjit/_lib/*; do
  for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ $allowed == *" $n "* ]] || { echo "wheel.sh: $(basename "$f") needs $n, which a manylinux wheel may not assume" >&2; exit 1; }
  done
  for v in $(readelf -V -W "$f" | sed -n '/version_r/,$p' | grep -o 'GLIBC_2\.[0-9][0-9.]*' | sort -u); do
    m=${v#GLIBC_2.}
    m=${m%%.*}
    if [ "$m" -gt 28 ]; then over="$over $(basename "$f"):$v"; fi
    if [ "$m" -gt "$glibc_minor" ]; then glibc_minor=$m; fi
  done
done
if [ "$compat" = 2.28 ] && [ -n "$over" ]; then
  # A compat build claims manylinux_2_28: a newer version is a binding base/glibc_compat.h lacks.
  echo "wheel.sh: $build is built with -DCGJIT_GLIBC_COMPAT=2.28, yet needs glibc symbol versions above 2.28:$over" >&2
  for f in "$stage"/cgjit/_lib/*; do
    objdump -T "$f" | grep -E '\(GLIBC_2\.(29|[3-9][0-9])' | awk -v f="$(basename "$f")" '{print "  " f ": " $NF " " $(NF-1)}' >&2 || true
  done
  exit 1
fi
if [ "$compat" = 2.28 ]; then
  # glibc 2.28 keeps the pthread, semaphore and dl functions a compat build binds in these two.
  for f in "$stage"/cgjit/_lib/*; do
    needed=$(readelf -d "$f")
    for n in libpthread.so.0 libdl.so.2; do
      grep -q "(NEEDED).*\[$n\]" <<<"$needed" ||
        { echo "wheel.sh: $(basename "$f") of a -DCGJIT_GLIBC_COMPAT=2.28 build does not list $n as NEEDED" >&2; exit 1; }
    done
  done
fi
plat=manylinux_2_${glibc_minor}_x86_64
[ "$glibc_minor" = 28 ] || echo "wheel.sh: libcgjit needs glibc 2.$glibc_minor (built on $(ldd --version | head -n 1 | grep -o '[0-9.]*$'), without -DCGJIT_GLIBC_COMPAT=2.28): tagged $plat"

python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "setuptools>=70.1" wheel
mkdir -p "$out"
rm -f "$out"/cgjit-*-"$plat".whl
CGJIT_WHEEL_PLAT=$plat "$tmp/venv/bin/pip" wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
  -w "$out" "$stage"
whl=$(ls "$out"/cgjit-*-py3-none-"$plat".whl)
if command -v auditwheel >/dev/null; then auditwheel show "$whl"; fi
echo "$(cd "$(dirname "$whl")" && pwd)/$(basename "$whl")"
