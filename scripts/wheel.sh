#!/usr/bin/env bash
# wheel.sh [BUILD_DIR] [OUT_DIR] — build the cgjit wheel: the Python module (python/cgjit), with
# BUILD_DIR's libcgjit.so and cgjit-run copied into cgjit/_lib/, into OUT_DIR (default: dist/).
#
# BUILD_DIR (default: build) is configured and built (RelWithDebInfo) where it holds no library
# yet. The library and the launcher must need nothing outside glibc and libgcc_s (CUDA's
# libraries are dlopened at run time, never bundled): the script checks their NEEDED entries.
# The wheel is tagged py3-none-manylinux_2_M_x86_64, M the newest glibc 2.M the two files need,
# 28 at the least: a wheel built on a newer glibc than 2.28 says so in its tag (build in the
# manylinux_2_28 image for a wheel that installs on every glibc 2.28 system). auditwheel checks
# it where installed. setuptools and wheel come from PyPI into a virtual environment of the
# script's own. The wheel's path is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-dist}
[ "$(uname -m)" = x86_64 ] || { echo "wheel.sh: the wheel is for x86_64; this is $(uname -m)" >&2; exit 2; }

if [ ! -e "$build/libcgjit.so" ] || [ ! -x "$build/cgjit-run" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
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

# Nothing outside glibc and libgcc_s, and the newest glibc symbol version needed.
allowed=" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1 ld-linux-x86-64.so.2 "
glibc_minor=28
for f in "$stage"/cgjit/_lib/*; do
  for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ $allowed == *" $n "* ]] || { echo "wheel.sh: $(basename "$f") needs $n, which a manylinux wheel may not assume" >&2; exit 1; }
  done
  m=$(readelf -V -W "$f" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -n 1)
  [ -n "$m" ] && [ "$m" -gt "$glibc_minor" ] && glibc_minor=$m
done
plat=manylinux_2_${glibc_minor}_x86_64
[ "$glibc_minor" = 28 ] || echo "wheel.sh: libcgjit needs glibc 2.$glibc_minor (built on $(ldd --version | head -n 1 | grep -o '[0-9.]*$')): tagged $plat"

python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "setuptools>=70.1" wheel
mkdir -p "$out"
rm -f "$out"/cgjit-*-"$plat".whl
CGJIT_WHEEL_PLAT=$plat "$tmp/venv/bin/pip" wheel -q --disable-pip-version-check --no-deps --no-build-isolation \
  -w "$out" "$stage"
whl=$(ls "$out"/cgjit-*-py3-none-"$plat".whl)
if command -v auditwheel >/dev/null; then auditwheel show "$whl"; fi
echo "$(cd "$(dirname "$whl")" && pwd)/$(basename "$whl")"
