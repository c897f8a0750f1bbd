#!/usr/bin/env bash
# test_install.sh BUILD_DIR VERSION LIBDIR — install a built cgjit into a temporary prefix and
# use it as its users would:
#  - the layout: libcgjit.so -> libcgjit.so.MAJOR -> libcgjit.so.VERSION (soname libcgjit.so.MAJOR),
#    cgjit.h, cgjit-run, cgjit-plan, the man page, the pkg-config file, the CMake package, the
#    license and the changelog;
#  - libcgjit needs no CUDA library to load (it finds the driver at run time), so a program
#    linked with it runs on a machine with no driver and no GPU;
#  - the installation is moved before it is used: nothing in it may name the prefix it was
#    installed to (cgjit-run finds the library from its own folder, the pkg-config file from
#    ${pcfiledir}, the CMake package from its own folder);
#  - a consumer built with `pkg-config --cflags --libs cgjit` and one built with
#    find_package(cgjit CONFIG REQUIRED) + cgjit::cgjit link, run, and find cgj_version() equal
#    to the header's CGJ_VERSION_STRING; find_package refuses another minor version.
# LIBDIR is CMAKE_INSTALL_LIBDIR (lib, lib64, lib/x86_64-linux-gnu). Environment: CMAKE (default
# cmake), CC (default cc), INSTALL_KEEP=1 (keep the temporary folder and say where). Exit status: 0 passed, 1 failed, 77 pkg-config is not installed (the
# rest passed; scripts/deps.sh installs it).
set -euo pipefail
[ $# -eq 3 ] || {
  echo "usage: test_install.sh BUILD_DIR VERSION LIBDIR" >&2
  exit 2
}
build=$1 version=$2 libdir=$3
cmake=${CMAKE:-cmake}
cc=${CC:-cc}
major=${version%%.*}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cgjit-install.XXXXXX")
if [ -n "${INSTALL_KEEP:-}" ]; then
  echo "test_install: working in $work"
else
  trap 'rm -rf "$work"' EXIT
fi

fail() {
  echo "test_install: FAIL: $*" >&2
  exit 1
}
# run LOG CMD...: CMD's output into LOG, shown when it fails.
run() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$*"
  fi
}

# ---- install and check the layout ----
run "$work/install.log" "$cmake" --install "$build" --prefix "$work/prefix"
p=$work/prefix
for f in include/cgjit.h bin/cgjit-run bin/cgjit-plan share/man/man1/cgjit-run.1 \
  "$libdir/libcgjit.so.$version" "$libdir/pkgconfig/cgjit.pc" "$libdir/cmake/cgjit/cgjitConfig.cmake" \
  "$libdir/cmake/cgjit/cgjitConfigVersion.cmake" "$libdir/cmake/cgjit/cgjitTargets.cmake" \
  share/doc/cgjit/LICENSE share/doc/cgjit/CHANGELOG.md; do
  [ -f "$p/$f" ] || fail "$f was not installed"
done
[ "$(readlink "$p/$libdir/libcgjit.so")" = "libcgjit.so.$major" ] || fail "libcgjit.so is not a link to libcgjit.so.$major"
[ "$(readlink "$p/$libdir/libcgjit.so.$major")" = "libcgjit.so.$version" ] ||
  fail "libcgjit.so.$major is not a link to libcgjit.so.$version"
dyn=$(readelf -d "$p/$libdir/libcgjit.so.$version")
grep -q "Library soname: \[libcgjit.so.$major\]" <<<"$dyn" || fail "soname is not libcgjit.so.$major: $dyn"
if grep -E 'NEEDED.*\[lib(cuda|cudart|cublas|cublasLt|cudnn|nvrtc)[.]' <<<"$dyn"; then
  fail "libcgjit needs a CUDA library to load"
fi
head -n 1 "$p/share/man/man1/cgjit-run.1" | grep -q '^\.TH CGJIT\\-RUN 1 ' || fail "cgjit-run.1 is no man page"
grep -q "^#define CGJ_VERSION_MAJOR $major\$" "$p/include/cgjit.h" || fail "cgjit.h's version is not $version"

# ---- move it: everything below uses the moved copy ----
mv "$p" "$work/moved"
p=$work/moved

# ---- the tools ----
[ "$("$p/bin/cgjit-run" --version)" = "cgjit-run $version" ] || fail "cgjit-run --version"
[ "$("$p/bin/cgjit-plan" --version)" = "cgjit-plan $version" ] || fail "cgjit-plan --version"
"$p/bin/cgjit-run" --man | cmp -s - "$p/share/man/man1/cgjit-run.1" || fail "cgjit-run.1 is not cgjit-run --man"
if command -v groff >/dev/null; then # the page formats without a warning
  warn=$(groff -man -Tutf8 -ww -z "$p/share/man/man1/cgjit-run.1" 2>&1) || true
  [ -z "$warn" ] || fail "groff on cgjit-run.1: $warn"
fi
want="LD_PRELOAD=$(cd "$p/$libdir" && pwd -P)/libcgjit.so"
got=$(env -u LD_PRELOAD -u CGJIT_LIB "$p/bin/cgjit-run" --print-env)
[ "$got" = "$want" ] || fail "installed cgjit-run preloads '$got', not '$want'"
# a program that never uses CUDA runs under the installed library as without it
out=$(env -u CGJIT_LIB "$p/bin/cgjit-run" -- sh -c 'echo ran; exit 3') && rc=0 || rc=$?
[ "$rc" = 3 ] && [ "$out" = ran ] || fail "cgjit-run -- sh: status $rc, output '$out'"
# the runtime alone (no libcgjit.so link, as a split package installs it): the soname's file
rm "$p/$libdir/libcgjit.so"
got=$(env -u LD_PRELOAD -u CGJIT_LIB "$p/bin/cgjit-run" --print-env)
[ "$got" = "${want}.$major" ] || fail "without the libcgjit.so link cgjit-run preloads '$got'"
ln -s "libcgjit.so.$major" "$p/$libdir/libcgjit.so"

# ---- a consumer through CMake's package ----
run "$work/cmake.log" "$cmake" -S "$here/consumer" -B "$work/cm" -DCMAKE_PREFIX_PATH="$p" \
  -DCMAKE_C_COMPILER="$cc" -DCGJ_WANT_VERSION="${version%.*}"
grep -q "cgjit $version from $p/$libdir/cmake/cgjit" "$work/cmake.log" || fail "find_package found another cgjit: $(cat "$work/cmake.log")"
run "$work/cmake-build.log" "$cmake" --build "$work/cm"
run "$work/cmake-run.log" env -u LD_PRELOAD "$work/cm/consumer"
grep -q "^cgjit $version " "$work/cmake-run.log" || fail "the CMake consumer says: $(cat "$work/cmake-run.log")"
# SameMinorVersion: before 1.0 another minor version is another ABI
next_minor="$major.$(($(cut -d. -f2 <<<"$version") + 1))"
if "$cmake" -S "$here/consumer" -B "$work/cm-next" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_C_COMPILER="$cc" \
  -DCGJ_WANT_VERSION="$next_minor" >"$work/cmake-next.log" 2>&1; then
  fail "find_package(cgjit $next_minor) accepted cgjit $version"
fi

# ---- a consumer through pkg-config ----
if ! command -v pkg-config >/dev/null; then
  echo "test_install: SKIPPED the pkg-config consumer: pkg-config is not installed (the rest passed)"
  exit 77
fi
export PKG_CONFIG_PATH="$p/$libdir/pkgconfig"
[ "$(pkg-config --modversion cgjit)" = "$version" ] || fail "pkg-config --modversion cgjit"
flags=$(pkg-config --cflags --libs cgjit)
# shellcheck disable=SC2086 # the flags are words
run "$work/pc-build.log" "$cc" -std=c11 -Wall -Wextra -Werror -o "$work/consumer-pc" "$here/consumer.c" $flags \
  -Wl,-rpath,"$(pkg-config --variable=libdir cgjit)"
run "$work/pc-run.log" env -u LD_PRELOAD "$work/consumer-pc"
grep -q "^cgjit $version " "$work/pc-run.log" || fail "the pkg-config consumer says: $(cat "$work/pc-run.log")"
# the header is C++ too (extern "C")
if command -v c++ >/dev/null; then
  # shellcheck disable=SC2086
  run "$work/cxx-build.log" c++ -Wall -Wextra -Werror -x c++ -o "$work/consumer-cxx" "$here/consumer.c" $flags \
    -Wl,-rpath,"$(pkg-config --variable=libdir cgjit)"
  run "$work/cxx-run.log" env -u LD_PRELOAD "$work/consumer-cxx"
fi
echo "test_install: passed ($(cat "$work/pc-run.log"); cmake package, pkg-config$(command -v c++ >/dev/null && echo ', C++'))"
