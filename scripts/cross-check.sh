#!/usr/bin/env bash
# cross-check.sh — does cgjit's host code build on aarch64 (GH200)? Compiles every C source of
# the library (base/ ir/ graphs/ allocator/ fusion/ tracer/ runtime/) and of tools/ with
# aarch64-linux-gnu-gcc, -Werror and the include paths of the CMake build; links the library
# objects into libcgjit.so (with --no-undefined and cgjit.map) and the two tools into their
# executables; and fails if an x86-only builtin (__builtin_ia32*, _mm_*, x86 intrinsic headers,
# __x86_64__) appears outside base/ (base/spin.h is the one place allowed to pick per
# architecture). jemalloc is left out (no CGJ_HAVE_JEMALLOC): cgjit then uses malloc.
#
# Exit status: 0 all passed, 1 something failed, 77 no cross compiler (skipped: the caller,
# e.g. CTest's SKIP_RETURN_CODE, may treat it so). The last line is a one-line summary.
# Environment: CROSS_CC (default aarch64-linux-gnu-gcc), CUDA_HOME (default /usr/local/cuda),
# CUDNN_INCLUDE_DIR (where cudnn.h is, if not found by itself), CROSS_NO_INSTALL=1 (do not try
# scripts/deps.sh cross when the compiler is missing), CROSS_KEEP=DIR (build there and keep it).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cc=${CROSS_CC:-aarch64-linux-gnu-gcc}

if ! command -v "$cc" >/dev/null 2>&1 && [ "${CROSS_NO_INSTALL:-0}" != 1 ]; then
  echo "cross-check: $cc not found; trying scripts/deps.sh cross" >&2
  bash "$root/scripts/deps.sh" cross >&2 || true
fi
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "cross-check: SKIPPED: $cc is not installed and could not be installed" \
    "(apt-get install gcc-aarch64-linux-gnu)"
  exit 77
fi

# CUDA headers: the toolkit's include/ or, where that lacks them, a targets/*/include (they
# are the same on every architecture, so the x86_64 ones do for an aarch64 compile).
cuda=${CUDA_HOME:-/usr/local/cuda}
cuda_inc=""
for d in "$cuda/include" "$cuda"/targets/sbsa-linux/include "$cuda"/targets/aarch64-linux/include \
  "$cuda"/targets/*/include; do
  if [ -f "$d/cuda.h" ] && [ -f "$d/cublas_v2.h" ]; then
    cuda_inc=$d
    break
  fi
done
if [ -z "$cuda_inc" ]; then
  echo "cross-check: FAIL: no cuda.h/cublas_v2.h under $cuda (set CUDA_HOME)"
  exit 1
fi

work=${CROSS_KEEP:-}
if [ -n "$work" ]; then
  rm -rf "$work" && mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/cgjit-cross.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi

# cuDNN headers, as CMake finds them (system paths or next to the toolkit). They are linked
# into a folder of their own so that -I never puts a host system folder (/usr/include) before
# the cross compiler's C library headers.
cudnn_dir=""
for d in ${CUDNN_INCLUDE_DIR:-} "$cuda_inc" "$cuda/include" "$cuda"/targets/*/include \
  /usr/include /usr/include/*-linux-gnu /usr/local/include; do
  if [ -f "$d/cudnn.h" ]; then
    cudnn_dir=$d
    break
  fi
done
cudnn_inc=()
if [ -n "$cudnn_dir" ]; then
  mkdir -p "$work/cudnn-include"
  for h in "$cudnn_dir"/cudnn*.h; do ln -sf "$(readlink -f "$h")" "$work/cudnn-include/"; done
  cudnn_inc=(-I"$work/cudnn-include")
else
  echo "cross-check: note: cudnn.h not found: runtime/libs_dnn.c is skipped" \
    "(set CUDNN_INCLUDE_DIR)" >&2
fi

version=$(sed -n 's/^project(cgjit VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
cflags=(-std=gnu11 -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror -fPIC
  -fvisibility=hidden -I"$root" -I"$root/include" -I"$cuda_inc")
fails=0
nfiles=0
skipped=""
compile() { # compile SRC OBJ [EXTRA FLAGS...]
  local src=$1 obj=$2
  shift 2
  nfiles=$((nfiles + 1))
  mkdir -p "$(dirname "$obj")"
  if ! "$cc" "${cflags[@]}" "$@" -c "$root/$src" -o "$obj" 2>"$obj.log"; then
    echo "cross-check: FAIL compile $src:" >&2
    sed "s|$root/||g" "$obj.log" >&2
    fails=$((fails + 1))
    # Without -Werror, so that the link below still checks the whole library.
    local f
    local relaxed=()
    for f in "${cflags[@]}"; do [ "$f" = -Werror ] || relaxed+=("$f"); done
    "$cc" "${relaxed[@]}" "$@" -c "$root/$src" -o "$obj" 2>/dev/null || return 1
  fi
}

# Library objects: as cgj_module() builds them (PIC, hidden, initial-exec TLS). A file that
# fails only through -Werror is compiled again without it, so that the links still run.
lib_objs=()
for dir in base ir graphs allocator fusion tracer runtime; do
  for src in "$root/$dir"/*.c; do
    [ -e "$src" ] || continue
    rel=${src#"$root"/}
    extra=(-ftls-model=initial-exec)
    case "$rel" in
    runtime/libs_dnn.c)
      if [ -z "$cudnn_dir" ]; then
        skipped+=" $rel"
        continue
      fi
      ;;
    esac
    case "$rel" in runtime/libs*.c) extra+=("${cudnn_inc[@]}") ;; esac
    # fusion/conv.c folds convolutions where cuDNN's header is found, as the CMake build does
    if [ "$rel" = fusion/conv.c ] && [ -n "$cudnn_dir" ]; then extra+=("${cudnn_inc[@]}" -DCGJ_HAVE_CUDNN); fi
    obj="$work/obj/${rel%.c}.o"
    compile "$rel" "$obj" "${extra[@]}" && lib_objs+=("$obj")
  done
done
# The patch kernel's image, generated as graphs/CMakeLists.txt does; empty here (no tool
# directory): what is checked is that the library links with it.
sh "$root/scripts/devpatch-image.sh" "$work/no-toolkit" "$root/graphs/devpatch.cu" "$work/devpatch_image.c" \
  "$work/devpatch" 2>/dev/null
"$cc" "${cflags[@]}" -c "$work/devpatch_image.c" -o "$work/obj/devpatch_image.o" && lib_objs+=("$work/obj/devpatch_image.o")
nfiles=$((nfiles + 1))
tool_objs=()
for src in "$root"/tools/*.c; do
  [ -e "$src" ] || continue
  rel=${src#"$root"/}
  obj="$work/obj/${rel%.c}.o"
  compile "$rel" "$obj" -DCGJ_VERSION="\"$version\"" && tool_objs+=("$obj")
done

links=0
link() { # link WHAT OUTPUT ARGS...
  local what=$1 out=$2
  shift 2
  links=$((links + 1))
  if ! "$cc" "$@" -o "$out" 2>"$out.log"; then
    echo "cross-check: FAIL link $what:" >&2
    sed "s|$work/obj/||g" "$out.log" >&2
    fails=$((fails + 1))
  fi
}
nlib=0
for dir in base ir graphs allocator fusion tracer runtime; do
  for src in "$root/$dir"/*.c; do [ -e "$src" ] && nlib=$((nlib + 1)); done
done
nlib=$((nlib + 1 - $(wc -w <<<"$skipped"))) # + the patch kernel's image
if [ "${#lib_objs[@]}" -ne "$nlib" ]; then
  echo "cross-check: libcgjit.so not linked: some library sources did not compile at all" >&2
else
  link libcgjit.so "$work/libcgjit.so" -shared -Wl,--no-undefined \
    -Wl,--version-script="$root/cgjit.map" "${lib_objs[@]}" -ldl -lpthread -lm
  base_objs=("$work"/obj/base/*.o) alloc_objs=("$work"/obj/allocator/*.o)
  [ -f "$work/obj/tools/cgjit_plan.o" ] &&
    link cgjit-plan "$work/cgjit-plan" "$work/obj/tools/cgjit_plan.o" "${base_objs[@]}" \
      "${alloc_objs[@]}" -ldl -lpthread
  [ -f "$work/obj/tools/cgjit_run.o" ] &&
    link cgjit-run "$work/cgjit-run" "$work/obj/tools/cgjit_run.o" "$work/obj/base/config.o" \
      "$work/obj/base/json.o" # as tools/CMakeLists.txt links it
  if [ -f "$work/libcgjit.so" ] && ! file -b "$work/libcgjit.so" 2>/dev/null | grep -q aarch64; then
    command -v file >/dev/null && {
      echo "cross-check: FAIL: libcgjit.so is not an aarch64 object" >&2
      fails=$((fails + 1))
    }
  fi
fi

# x86-only code outside base/: base/spin.h chooses per architecture; nothing else may.
x86=$(cd "$root" && grep -rnE \
  '__builtin_ia32|(^|[^A-Za-z0-9_])_mm_|__x86_64__|[a-z]*mmintrin\.h|x86intrin\.h' \
  --include='*.c' --include='*.h' ir graphs allocator fusion tracer runtime tools include 2>/dev/null)
if [ -n "$x86" ]; then
  echo "cross-check: FAIL: x86-specific code outside base/:" >&2
  echo "$x86" >&2
  fails=$((fails + 1))
fi

note=""
[ -n "$skipped" ] && note=" (skipped:$skipped: no cudnn.h)"
if [ "$fails" -eq 0 ]; then
  echo "cross-check: PASS: $nfiles C files compiled and $links links for aarch64 with $cc," \
    "no x86-only code outside base/$note"
  exit 0
fi
echo "cross-check: FAIL: $fails problem(s) in $nfiles C files / $links links for aarch64$note"
exit 1
