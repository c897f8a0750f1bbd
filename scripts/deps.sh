#!/usr/bin/env bash
# deps.sh [bench|test|cross] — make sure what building cgjit needs is installed (Debian/Ubuntu):
# gcc and cmake always, Criterion for the tests, jemalloc's PIC archive for cgjit's own host
# memory (without it cgjit falls back to malloc), gnuplot for the bench's plots
# (scripts/plot-bench.py: bench.sh draws none without it, and its test reports itself skipped).
# Missing packages are installed with apt; if that is impossible (no network, no root), the
# script goes on as long as nothing *required* is missing. The CUDA toolkit is expected at /usr/local/cuda (override with CUDA_HOME).
# `cross` installs only the aarch64 cross compiler (gcc-aarch64-linux-gnu) for
# scripts/cross-check.sh; it is optional there: a warning, not a failure, when apt cannot
# install it (cross-check.sh then reports itself skipped), and no CUDA toolkit check.
set -euo pipefail
mode=${1:-test}
case "$mode" in
bench | test) ;;
cross) ;;
*)
  echo "usage: deps.sh [bench|test|cross]" >&2
  exit 2
  ;;
esac
required=(build-essential cmake)
[ "$mode" = test ] && required+=(libcriterion-dev)
optional=(pkg-config libjemalloc-dev gnuplot-nox)
[ "$mode" = test ] && optional+=(clang clang-format) # the libFuzzer harnesses (scripts/fuzz.sh), the format check
if [ "$mode" = cross ]; then
  required=()
  optional=(gcc-aarch64-linux-gnu)
fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in ${required[@]+"${required[@]}"} "${optional[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deps: installing ${missing[*]}"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"; } ||
    echo "deps: warning: apt could not install ${missing[*]}" >&2
fi
for p in ${required[@]+"${required[@]}"}; do
  if ! installed "$p"; then
    # build-essential/cmake may come from elsewhere: what matters is the commands.
    case "$p" in
    build-essential) command -v gcc >/dev/null && continue ;;
    cmake) command -v cmake >/dev/null && continue ;;
    esac
    echo "deps: $p is required and could not be installed" >&2
    exit 1
  fi
done
if [ "$mode" = cross ]; then
  # The cross check needs only the CUDA headers, which it looks for itself.
  command -v aarch64-linux-gnu-gcc >/dev/null ||
    echo "deps: warning: aarch64-linux-gnu-gcc is not available" >&2
  exit 0
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "deps: no CUDA toolkit at $cuda (set CUDA_HOME)" >&2
  exit 1
fi
