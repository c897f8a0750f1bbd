#!/bin/sh
# private-jemalloc.sh IN.a OUT.a — a copy of jemalloc's PIC archive with every symbol it defines
# renamed cgjpriv_je_<name>. Linked into cgjit (or a test), it gives cgjit arenas of its own
# (allocator/hostmem.c) while malloc, free, operator new... stay the C library's: nothing in
# the copy is called malloc any more.
#
# Nor does the copy read the program's allocator settings: jemalloc takes options from the
# environment variable MALLOC_CONF and the link /etc/malloc.conf, which a program sets for its
# own allocator (stats_print:true would print cgjit's statistics at exit; abort_conf:true with an
# option this jemalloc lacks would abort the program). The copy's names for them are changed, in
# place and at the same length, to CGJ_JE_CONF and /etc/cgjit.je.cf; the script fails where the
# archive holds no MALLOC_CONF to change.
set -eu
in=$1 out=$2
map=$out.syms
nm -g --defined-only "$in" 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDBRVWGS]/ { print $3 " cgjpriv_je_" $3 }' | sort -u >"$map"
objcopy --redefine-syms="$map" "$in" "$out"
LC_ALL=C perl -0777 -pi -e '
  $n = s/MALLOC_CONF\0/CGJ_JE_CONF\0/g;
  s{/etc/malloc\.conf\0}{/etc/cgjit.je.cf\0}g;
  END { die "private-jemalloc.sh: no MALLOC_CONF in the archive\n" unless $n }' "$out"
