#!/bin/sh
# private-jemalloc.sh IN.a OUT.a — a copy of jemalloc's PIC archive with every symbol it defines
# renamed cgjpriv_je_<name>. Linked into cgjit (or a test), it gives cgjit arenas of its own
# (allocator/hostmem.c) while malloc, free, operator new... stay the C library's: nothing in
# the copy is called malloc any more.
set -eu
in=$1 out=$2
map=$out.syms
nm -g --defined-only "$in" 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDBRVWGS]/ { print $3 " cgjpriv_je_" $3 }' | sort -u >"$map"
objcopy --redefine-syms="$map" "$in" "$out"
