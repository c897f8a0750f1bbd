#!/usr/bin/env bash
# nvtx-cupti-check.sh BUILD_DIR — on a GPU, cgjit's NVTX ranges (CGJIT_NVTX=1) as NVIDIA's CUPTI,
# the NVTX interface profilers build on, receives them, named with the exit report's anchors.
#
# Runs BUILD_DIR/tests/apps/tiny_kernels_static (else _shared: 300 steps of 1000 kernels, which
# cgjit records, builds and replays) with
#   LD_PRELOAD="BUILD_DIR/libcgjit.so:BUILD_DIR/tests/gpu/libcupti_nvtx_probe.so"
#   CGJIT_NVTX=1 CGJIT_GOVERN=0 CGJIT_STEP=sync CGJIT_REPORT=json:OUT/report.json
#   CUPTI_NVTX_PROBE_CUPTI=<libcupti.so> CUPTI_NVTX_PROBE_OUT=OUT/MODE/probe.txt
# twice (tests/gpu/cupti_nvtx_probe.c writes what CUPTI's NVTX callbacks report, one line per
# range pushed in the domain "cgjit", "push<TAB>CATEGORY<TAB>NAME"): MODE inject, with
# NVTX_INJECTION64_PATH=<the probe>, NVTX's injection library, which hands NVTX to CUPTI and then
# subscribes; MODE start, with NVTX_INJECTION64_PATH=<libcupti.so> and the probe subscribing to
# CUPTI as the process starts (CUPTI_NVTX_PROBE_SUBSCRIBE=start), as a profiler does. Each checks that the probe subscribed, that the report
# has an anchor that replayed, and that CUPTI received ranges of the kinds
#   record A, build A, replay A   (A: an anchor the report lists; replay: one that replayed)
#   instantiate                   (a graph's instantiation, inside a build; it names no anchor)
# each with its kind's category (the kind's place in CGJ_NVTX_KIND_LIST, base/nvtx.h, from 1),
# in the domain CUPTI saw created as "cgjit", and no range of those kinds named with an anchor
# the report does not list.
#
# libcupti.so is looked for (the build machine's path need not exist here) in $CUPTI_LIB (the
# file), then BUILD_DIR/devlibs, /usr/local/cuda/lib64, /usr/local/cuda/extras/CUPTI/lib64,
# /usr/local/cuda*/targets/x86_64-linux/lib, and python3's site-packages nvidia/cu13/lib and
# nvidia/cuda_cupti/lib. Files go to ${NVTX_CUPTI_OUT:-BUILD_DIR/nvtx-cupti}; the program runs
# under `timeout ${NVTX_CUPTI_TIMEOUT:-300}`.
#
# Exit status: 0 pass; 1 fail (the last line says what is missing); 77 skipped, with the reason
# (no GPU: nvidia-smi fails; no libcupti found; no probe built; no python3); 2 bad usage.
set -u

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
out=${NVTX_CUPTI_OUT:-$build/nvtx-cupti}
limit=${NVTX_CUPTI_TIMEOUT:-300}

skip() {
  echo "nvtx-cupti-check: SKIP: $*"
  exit 77
}
fail() {
  echo "nvtx-cupti-check: FAIL: $*"
  exit 1
}

if ! command -v nvidia-smi >/dev/null 2>&1; then skip "no GPU (nvidia-smi not found)"; fi
if ! nvidia-smi -L >/dev/null 2>&1; then skip "no GPU (nvidia-smi -L failed)"; fi
probe=$build/tests/gpu/libcupti_nvtx_probe.so
[ -f "$probe" ] || skip "no probe: $probe not built (CUPTI was not found where the build was configured)"
command -v python3 >/dev/null 2>&1 || skip "no python3 to read the report"

# The first libcupti.so* in a folder.
cupti_in() {
  local f
  for f in "$1/libcupti.so" "$1"/libcupti.so.[0-9]*; do
    if [ -f "$f" ]; then
      echo "$f"
      return 0
    fi
  done
  return 1
}
find_cupti() {
  if [ -n "${CUPTI_LIB:-}" ]; then
    if [ -f "$CUPTI_LIB" ]; then
      echo "$CUPTI_LIB"
      return 0
    fi
    echo "nvtx-cupti-check: CUPTI_LIB=$CUPTI_LIB is no file; looking elsewhere" >&2
  fi
  local d
  for d in "$build/devlibs" /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 \
    /usr/local/cuda*/targets/x86_64-linux/lib; do
    [ -d "$d" ] && cupti_in "$d" && return 0
  done
  # python3's CUDA wheels (nvidia-cuda-cupti; the cu13 wheels put every library in nvidia/cu13/lib).
  local py
  py=$(python3 -c 'import sys, os
for p in sys.path:
    for sub in ("nvidia/cu13/lib", "nvidia/cuda_cupti/lib"):
        d = os.path.join(p or ".", sub)
        if os.path.isdir(d):
            print(d)' 2>/dev/null)
  while IFS= read -r d; do
    [ -n "$d" ] && cupti_in "$d" && return 0
  done <<<"$py"
  return 1
}
searched="CUPTI_LIB, $build/devlibs, /usr/local/cuda/lib64, /usr/local/cuda/extras/CUPTI/lib64,"
searched="$searched /usr/local/cuda*/targets/x86_64-linux/lib, python3's nvidia/cu13/lib and nvidia/cuda_cupti/lib"
cupti=$(find_cupti) || skip "no libcupti.so found ($searched)"

lib=$build/libcgjit.so
[ -f "$lib" ] || fail "$lib not found"
app=""
for a in "$build/tests/apps/tiny_kernels_static" "$build/tests/apps/tiny_kernels_shared"; do
  if [ -x "$a" ]; then
    app=$a
    break
  fi
done
[ -n "$app" ] || fail "no sample program $build/tests/apps/tiny_kernels_{static,shared}"
nvtx_h=$here/../../base/nvtx.h
[ -f "$nvtx_h" ] || fail "$nvtx_h not found (the kinds' categories)"

rm -rf "$out"
mkdir -p "$out" || fail "cannot make $out"
top=$out
bounded() {
  if command -v timeout >/dev/null 2>&1; then timeout -k 10 "$limit" "$@"; else "$@"; fi
}
# Each way a profiler reaches NVTX: the probe as NVTX's injection library (inject), and CUPTI's
# own with the probe subscribing as the process starts (start).
for mode in inject start; do
  out=$top/$mode
  mkdir -p "$out" || fail "cannot make $out"
  echo "nvtx-cupti-check: $(basename "$app") with CUPTI $cupti, subscribed at $mode"
  inject=$probe
  [ "$mode" = start ] && inject=$cupti
  # The preload is the program's alone (env), not timeout's.
  bounded env LD_PRELOAD="$lib:$probe" CGJIT_NVTX=1 CGJIT_GOVERN=0 CGJIT_STEP=sync \
    CGJIT_REPORT="json:$out/report.json" NVTX_INJECTION64_PATH="$inject" CUPTI_NVTX_PROBE_CUPTI="$cupti" \
    CUPTI_NVTX_PROBE_SUBSCRIBE="$mode" CUPTI_NVTX_PROBE_OUT="$out/probe.txt" "$app" >"$out/app.out" 2>"$out/app.err"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 5 "$out/app.err" | sed 's/^/  /'
    fail "$(basename "$app") exited with status $rc$([ "$rc" -eq 124 ] && echo ', timed out') ($out/app.err)"
  fi
  [ -f "$out/probe.txt" ] || fail "the probe wrote no $out/probe.txt"
  [ -f "$out/report.json" ] || fail "cgjit wrote no report $out/report.json"

  python3 - "$out/probe.txt" "$out/report.json" "$nvtx_h" <<'PY' || exit 1
import json, re, sys

probe_file, report_file, nvtx_h = sys.argv[1:4]

def fail(why):
    print("nvtx-cupti-check: FAIL: " + why)
    sys.exit(1)

# The kinds' words in CGJ_NVTX_KIND_LIST's order: category k + 1.
kinds = re.findall(r'^\s*X\(\s*[A-Z_]+\s*,\s*"([^"]*)"', open(nvtx_h).read(), re.M)
category = {w: k + 1 for k, w in enumerate(kinds)}
for w in ("record", "build", "instantiate", "replay"):
    if w not in category:
        fail("no kind '%s' in %s (the check knows record, build, instantiate, replay)" % (w, nvtx_h))

lines = open(probe_file, encoding="utf-8", errors="replace").read().splitlines()
if not lines or not lines[0].startswith("# cupti-nvtx-probe: subscribed"):
    fail("the probe did not subscribe to CUPTI: " + (lines[0] if lines else "empty file " + probe_file))
for l in lines:
    if l.startswith("# "):
        print("  probe: " + l[2:])
if any(l.startswith("# domain \"cgjit\" not seen created") for l in lines):
    fail("CUPTI reported no creation of the domain \"cgjit\" (%s)" % probe_file)
pushes = []
for l in lines:
    f = l.split("\t")
    if len(f) == 3 and f[0] == "push":
        pushes.append((int(f[1]) if f[1].isdigit() else -1, f[2]))

report = json.load(open(report_file))
replays = {a["name"]: a.get("replays", 0) for a in report.get("anchors", [])}
if not replays:
    fail("the report lists no anchor (%s)" % report_file)
if not any(replays.values()):
    fail("no anchor of the report replayed (%s)" % report_file)

missing, found, wrong, unknown, example = [], [], [], [], ""
for kind in ("record", "build", "instantiate", "replay"):
    if kind == "instantiate":  # names no anchor
        named = [(c, "") for c, n in pushes if n == kind]
        ok = [a for c, a in named if c == category[kind]]
    else:
        named = [(c, n[len(kind) + 1:]) for c, n in pushes if n.startswith(kind + " ")]
        ok = [a for c, a in named if c == category[kind] and a in replays and (kind != "replay" or replays[a] > 0)]
    wrong += ["'%s' in category %d" % ((kind + " " + a).strip(), c) for c, a in named if c != category[kind]]
    unknown += ["'%s %s'" % (kind, a) for c, a in named if kind != "instantiate" and a not in replays]
    if ok:
        found.append("%s %d" % (kind, len(named)))
        if kind == "replay":
            example = "replay '%s'" % ok[0]
    elif kind == "instantiate":
        missing.append("'instantiate'")
    else:
        missing.append("'%s ANCHOR' with an anchor the report lists%s (%d '%s ...' ranges)" %
                       (kind, " as replayed" if kind == "replay" else "", len(named), kind))
if wrong:
    fail("ranges in another category than their kind's: " + "; ".join(sorted(set(wrong))[:5]))
if unknown:
    fail("ranges named with no anchor of the report: %d, e.g. %s" % (len(unknown), "; ".join(sorted(set(unknown))[:3])))
if missing:
    fail("CUPTI received no range " + ", no ".join(missing) + " (%d ranges in all, %s)" % (len(pushes), probe_file))
print("nvtx-cupti-check: PASS: CUPTI received %s ranges, named with the report's anchors (%s)" %
      (", ".join(found), example))
PY
done
