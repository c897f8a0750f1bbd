#!/usr/bin/env bash
# test_glibc_compat.sh COMPAT LIBCGJIT CGJIT_RUN — the library and the launcher of a build
# configured with -DCGJIT_GLIBC_COMPAT=COMPAT (2.28) load on that glibc: no glibc symbol version
# above it referenced (the versions each file needs, objdump -T's imports listed on failure), and
# libpthread.so.0 and libdl.so.2 NEEDED, where glibc 2.28 keeps the pthread, semaphore and dl
# functions the files bind. It builds nothing. Exit 77 (skipped, with the reason) in a build
# configured without the option (COMPAT is OFF or empty), or where readelf or objdump is missing.
set -euo pipefail
compat=${1-}
lib=${2:?usage: test_glibc_compat.sh COMPAT LIBCGJIT CGJIT_RUN}
run=${3:?usage: test_glibc_compat.sh COMPAT LIBCGJIT CGJIT_RUN}
case "$compat" in
"" | OFF | off | 0 | FALSE | false | NO | no)
  echo "SKIP: this build is not configured with -DCGJIT_GLIBC_COMPAT=2.28 (CGJIT_GLIBC_COMPAT=${compat:-unset})"
  exit 77
  ;;
esac
[[ $compat =~ ^2\.([0-9]+)$ ]] || { echo "FAIL: CGJIT_GLIBC_COMPAT=$compat is no glibc 2.N release"; exit 1; }
max=${BASH_REMATCH[1]}
for tool in readelf objdump; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (binutils)"
    exit 77
  fi
done

fail=0
for f in "$lib" "$run"; do
  [ -e "$f" ] || { echo "FAIL: $f does not exist (build the targets cgjit and cgjit-run)"; exit 1; }
  name=$(basename "$f")
  # Every GLIBC_2.N[.M] the file needs (its version references), N compared with the bound.
  needs=$(readelf -V -W "$f" | sed -n '/version_r/,$p' | grep -o 'GLIBC_2\.[0-9][0-9.]*' | sort -uV || true)
  [ -n "$needs" ] || { echo "FAIL: $name has no glibc version references (not a glibc build?)"; exit 1; }
  over=""
  for v in $needs; do
    minor=${v#GLIBC_2.}
    minor=${minor%%.*}
    [ "$minor" -le "$max" ] || over="$over $v"
  done
  if [ -n "$over" ]; then
    echo "FAIL: $name needs$over, above glibc $compat; the symbols:"
    for v in $over; do objdump -T "$f" | grep -F "($v)" | awk '{print "  " $NF " (" v ")"}' v="$v"; done
    fail=1
  else
    echo "ok: $name needs at most $(echo "$needs" | tail -n 1) ($(echo "$needs" | tr '\n' ' ' | sed 's/ $//'))"
  fi
  needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for so in libpthread.so.0 libdl.so.2; do
    grep -qx "$so" <<<"$needed" || { echo "FAIL: $name does not list $so as NEEDED"; fail=1; }
  done
done
exit "$fail"
