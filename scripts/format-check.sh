#!/bin/sh
# format-check.sh [--fix | --diff] — cgjit's C and CUDA sources against .clang-format.
#
# The sources are the library's (base ir graphs allocator fusion tracer runtime include), the
# tools', the bench's and the tests' .c, .h, .cu and .cuh files that git tracks (every such file
# of those folders outside a git checkout). With no option each is checked with clang-format
# --dry-run -Werror: the files that differ from the format are listed, and the script exits 1.
# --fix rewrites them in place; --diff prints what --fix would change, and changes nothing.
# Exits 77 where no clang-format 14 or later is found (CLANG_FORMAT names one).
set -eu
cd "$(dirname "$0")/.."

mode="check"
case "${1:-}" in
"") ;;
--fix) mode="fix" ;;
--diff) mode="diff" ;;
*)
    echo "usage: scripts/format-check.sh [--fix | --diff]" >&2
    exit 2
    ;;
esac

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
    for c in clang-format-14 clang-format-15 clang-format-16 clang-format-17 clang-format-18 clang-format; do
        if command -v "$c" >/dev/null 2>&1; then
            cf=$c
            break
        fi
    done
fi
major=$([ -n "$cf" ] && "$cf" --version 2>/dev/null | sed -n 's/.*version \([0-9][0-9]*\).*/\1/p' | head -n 1)
if [ -z "$major" ] || [ "$major" -lt 14 ]; then
    echo "format-check: no clang-format 14 or later found (install clang-format-14, or set CLANG_FORMAT)" >&2
    exit 77
fi

folders="base ir graphs allocator fusion tracer runtime include tools bench tests"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    for f in $folders; do
        git ls-files -- "$f/*.c" "$f/*.h" "$f/*.cu" "$f/*.cuh"
    done | while IFS= read -r p; do [ -f "$p" ] && printf '%s\n' "$p"; done >"$list"
else
    # shellcheck disable=SC2086
    find $folders -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort >"$list"
fi
n=$(wc -l <"$list" | tr -d ' ')

case $mode in
fix)
    tr '\n' '\0' <"$list" | xargs -0 "$cf" -i --style=file
    echo "format-check: $n files formatted with $cf"
    ;;
diff)
    while IFS= read -r p; do
        "$cf" --style=file "$p" | diff -u --label "a/$p" --label "b/$p" "$p" - || true
    done <"$list"
    ;;
check)
    out=$(tr '\n' '\0' <"$list" | xargs -0 "$cf" --dry-run -Werror --style=file 2>&1) && st=0 || st=$?
    bad=$(printf '%s\n' "$out" |
        sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
    if [ -z "$bad" ] && [ "$st" -ne 0 ]; then
        printf '%s\n' "$out" >&2
        echo "format-check: $cf failed" >&2
        exit 1
    fi
    if [ -n "$bad" ]; then
        printf '%s\n' "$bad" | sed 's/^/format-check: not formatted: /'
        echo "format-check: $(printf '%s\n' "$bad" | wc -l | tr -d ' ') of $n files differ from .clang-format" \
            "(scripts/format-check.sh --diff shows how, --fix rewrites them)"
        exit 1
    fi
    echo "format-check: $n files, each as .clang-format has it"
    ;;
esac
