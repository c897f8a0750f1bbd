#!/usr/bin/env bash
# real-check.sh BUILD_DIR [OUTDIR] — run the corpus of real programs (tests/real: programs written
# against libraries other people wrote: transformers, timm, torchvision, CuPy; and C/CUDA programs
# built elsewhere) without cgjit and with LD_PRELOAD=BUILD_DIR/libcgjit.so under each configuration,
# and check that every output is byte for byte what eager execution printed.
#
# Programs: every tests/real/*.py but _*.py (helpers), run as `python3 FILE` from the repository's
# root; plus, where REAL_CHECK_EXTRA names a file, each of its lines "NAME<TAB>COMMAND..." (lines
# starting with # and empty ones ignored), COMMAND run with `bash -c` in the folder of that file
# (third-party C/CUDA code is built there, never committed: tests/real/README.md). A program prints
# its results on stdout and "NAME: median_us=X" on stderr; one whose eager run prints "nothing to
# do" (a library or the GPU missing) is skipped. REAL_CHECK_ONLY="NAME ..." runs only those, in
# that order. REAL_CHECK_CORPUS=0 leaves tests/real out altogether (no python3 program is run):
# REAL_CHECK_EXTRA's programs only.
#
# Runs, each under `timeout REAL_CHECK_TIMEOUT` seconds (default 300), one after the other: eager
# twice (no preload), then once per configuration of REAL_CHECK_CONFIGS (default "sync auto"):
# POLICY[-default][-verify|-verifyall][-learned][-step][-dormant][-async], POLICY sync or auto (CGJIT_STEP),
# -default adding CGJIT_MODE=default, -verify CGJIT_VERIFY=1, -verifyall CGJIT_VERIFY_ALL=1 (verify
# over all the memory the program holds), -learned CGJIT_LIBS_LEARNED=1, -step REAL_STEP=1 (the
# programs of tests/real that mark their step with cgjit's Python module do so: _common.py),
# -dormant CGJIT_GOVERN=2 (the governor holds cgjit dormant all the run: the preload's own cost),
# -async CGJIT_LAUNCH_ASYNC=1 (chunks launched by cgjit's launch thread), -ungov CGJIT_GOVERN=0 (no
# governor: replay as the cost model decides, for side-by-side runs of replay's own settings),
# -chunkN CGJIT_CHUNK_US=N (N a number of microseconds);
# every cgjit run has CGJIT_REPORT=json:OUTDIR/NAME.CONFIG.PID.report.json (one per process);
# other CGJIT_* variables of the environment pass through. LD_PRELOAD is exported inside the `bash -c`, so the shell itself is not preloaded
# (each preloaded process writes the report at exit: a command should run one program). Files:
# OUTDIR/NAME.KIND.{out,err,rc}, KIND eager1, eager2 or the configuration (OUTDIR defaults to
# BUILD_DIR/real-check). REAL_CHECK_REUSE=1 keeps the runs whose .rc file exists (a run cut short
# leaves none), so a check cut short by a time limit is finished by running the same command again
# with the same OUTDIR. Eager runs leave out LD_PRELOAD; eager1 failing fails every configuration
# of that program without running it.
#
# Columns, per program and configuration:
#  - verdict: identical (stdout equals the first eager run's, cmp), DIFFERS at line N, exit RC
#    (timeout for 124/137), eager exit RC, or skipped. Where the two eager runs differ from each
#    other the note says eager-differs, and equal to either eager run counts as identical; output
#    with the eager runs' words, whose numbers are no further from eager than the eager runs are
#    from each other, is "within eager spread" (within_spread below) and passes.
#  - speed: the median over the eager runs of their median_us (of two, their mean) / the median
#    over the cgjit runs' (one without REAL_CHECK_ROUNDS); n/a without the stderr line.
#  - replayed: from the JSON report, over the anchors that ran at least 10 times,
#    sum(replays) / sum(max(runs - 2 - warmup_runs - building_runs, 0)) (its warm-up runs, the
#    draft and the run compared with it, and the runs while cgjit's builder thread built the step
#    are eager on purpose; n/a: no readable report; none>=10: no such anchor);
#    where some of them are the program's marked steps ("marked X%"), over those alone (a marked
#    step begun while the governor holds cgjit dormant runs straight through: no run of its anchor),
#    then the governor's last decision and its measured speed active/dormant (active@1.31x), or
#    its state where it has not judged (learning, measuring, off), then the graphs launched per
#    replayed step and the host time each launch took (3.8g/step@7.3us: cgjit's counters
#    graph_launches and launch_host_ns), where any was launched.
#  - verify (-verify configurations): verify=N, the stderr lines "cgjit: verify: ...diverge...".
# REAL_CHECK_ROUNDS=N (default 1): each configuration also runs N - 1 more times, each time beside
# an eager run of its own (the configuration first in even rounds, eager first in odd ones:
# NAME.CONFIG.rR and NAME.CONFIG.eager.rR), and every one of its runs must print what eager does.
# The speed is then the median of all the eager times over the median of the configuration's:
# a program's pace moves between processes on a shared machine (by 2x between consecutive runs
# on a lent H200), and one run of each kind is no figure. The note says how many runs it took,
# and how far apart the eager runs were ((largest - smallest) / median of their times): a speed
# closer to 1.0 than that is not told apart from it. REAL_CHECK_MAX_ROUNDS=M (default N): where a
# speed is below 0.98x after N rounds, rounds are added one at a time, up to M, while it stays
# there (short programs, whose runs are cheap and whose pace moves most between processes).
# REAL_CHECK_BUDGET=S (seconds; default 0, none): a program is begun only while the time spent
# so far plus the longest program so far fits in S; the ones left are rows "not run" (on a
# machine lent for a while, the table comes out before the time is up, and REAL_CHECK_REUSE=1
# later runs only what is left).
# REAL_CHECK_GPUS=N (default 1; "all": every GPU nvidia-smi lists, or CUDA_VISIBLE_DEVICES names):
# N jobs at once, each a real-check of its own on one GPU (CUDA_VISIBLE_DEVICES set to it) and on
# an N-th of the host's cores (taskset), each taking the next program no job has taken (a claim
# in OUTDIR/.claims) and running all of its runs, eager and cgjit alternating as above, on its
# GPU; logs OUTDIR/gpu.K.log. Then the table is made from their runs, as REAL_CHECK_REUSE=1 would
# make it; the data-parallel programs of tests/real/dist, which need two GPUs, run after the jobs,
# one at a time, on all of them. A program's runs share the machine with the other jobs' (the
# host's memory, PCIe, the driver), which its eager and cgjit runs meet alike: its speed is still
# taken side by side, in about an N-th of the time. A program no job began (REAL_CHECK_BUDGET,
# which each job keeps) is a row "not run".
# The summary table comes last (its rows also in OUTDIR/table.tsv, tab-separated, with a header:
# scripts/compare-checks.py sets two such tables side by side), then PASS (every program not
# skipped identical under every configuration), FAIL, or INCOMPLETE (none failed, some not run
# within REAL_CHECK_BUDGET).
# Exit status: 0 PASS, 1 FAIL, 2 bad usage, 3 INCOMPLETE.
set -u

usage() {
  echo "usage: $0 BUILD_DIR [OUTDIR]  (env: REAL_CHECK_CONFIGS REAL_CHECK_ONLY REAL_CHECK_EXTRA" \
    "REAL_CHECK_CORPUS REAL_CHECK_TIMEOUT REAL_CHECK_REUSE REAL_CHECK_BUDGET REAL_CHECK_ROUNDS" \
    "REAL_CHECK_MAX_ROUNDS REAL_CHECK_GPUS)" >&2
  exit 2
}
die() { echo "real-check: $*" >&2; exit 2; }

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then usage; fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
out=${2:-$build/real-check}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
lib=$build/libcgjit.so
configs=${REAL_CHECK_CONFIGS:-sync auto}
limit=${REAL_CHECK_TIMEOUT:-300}
only=${REAL_CHECK_ONLY:-}
reuse=${REAL_CHECK_REUSE:-0}
extra=${REAL_CHECK_EXTRA:-}
corpus=${REAL_CHECK_CORPUS:-1}
[ -f "$lib" ] || die "$lib not found (build first)"
command -v timeout >/dev/null 2>&1 || die "timeout(1) is needed"
command -v python3 >/dev/null 2>&1 || die "python3 is needed"
case "$limit" in '' | *[!0-9]* | 0) die "REAL_CHECK_TIMEOUT must be a positive integer" ;; esac
budget=${REAL_CHECK_BUDGET:-0}
case "$budget" in '' | *[!0-9]*) die "REAL_CHECK_BUDGET must be a number of seconds (0: none)" ;; esac
case "$corpus" in 0 | 1) ;; *) die "REAL_CHECK_CORPUS must be 1 (tests/real and REAL_CHECK_EXTRA) or 0 (REAL_CHECK_EXTRA only)" ;; esac
rounds=${REAL_CHECK_ROUNDS:-1}
case "$rounds" in '' | *[!0-9]* | 0) die "REAL_CHECK_ROUNDS must be a positive integer" ;; esac
max_rounds=${REAL_CHECK_MAX_ROUNDS:-$rounds}
case "$max_rounds" in '' | *[!0-9]*) die "REAL_CHECK_MAX_ROUNDS must be a positive integer" ;; esac
[ "$max_rounds" -ge "$rounds" ] || max_rounds=$rounds
# shellcheck source=gpu-jobs.sh
. "$root/scripts/gpu-jobs.sh"
ngpus=$(gpu_jobs_count "${REAL_CHECK_GPUS:-1}") || die "REAL_CHECK_GPUS must be a positive integer or 'all'"
claims=${REAL_CHECK_CLAIMS:-} # set for the jobs of REAL_CHECK_GPUS: where they claim programs

# config_env CONFIG: the cgjit variables of a configuration, one per line; fails on a bad name.
config_env() {
  local part rest
  case "$1" in sync | sync-* | auto | auto-*) ;; *) return 1 ;; esac
  echo "CGJIT_STEP=${1%%-*}"
  rest=${1#*-}
  [ "$rest" = "$1" ] && return 0
  for part in ${rest//-/ }; do
    case "$part" in
      default) echo "CGJIT_MODE=default" ;;
      verify) echo "CGJIT_VERIFY=1" ;;
      verifyall) echo "CGJIT_VERIFY_ALL=1" ;;
      learned) echo "CGJIT_LIBS_LEARNED=1" ;;
      step) echo "REAL_STEP=1" ;;
      dormant) echo "CGJIT_GOVERN=2" ;;
      async) echo "CGJIT_LAUNCH_ASYNC=1" ;;
      ungov) echo "CGJIT_GOVERN=0" ;;
      chunk[0-9]*) [[ ${part#chunk} != *[!0-9]* ]] || return 1; echo "CGJIT_CHUNK_US=${part#chunk}" ;;
      *) return 1 ;;
    esac
  done
}
for c in $configs; do config_env "$c" >/dev/null || die "unknown configuration '$c' in REAL_CHECK_CONFIGS"; done

# The programs: names[i], cmds[i], dirs[i] (where the command runs).
names=() cmds=() dirs=()
add_program() {
  case "$1" in '' | *[!A-Za-z0-9_.-]*) die "bad program name '$1'" ;; esac
  if [ -n "$only" ] && [[ " $only " != *" $1 "* ]]; then return; fi
  names+=("$1") cmds+=("$2") dirs+=("$3")
}
# The corpus: tests/real/*.py, and the data-parallel programs of tests/real/dist, started by
# torchrun on two GPUs where there are two.
add_corpus() {
  local f base layout name gpus
  for f in "$root"/tests/real/*.py; do
    [ -f "$f" ] || continue
    base=$(basename "$f" .py)
    case "$base" in _*) continue ;; esac
    add_program "$base" "python3 $(printf '%q' "$f")" "$root"
  done
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  for f in "$root"/tests/real/dist/*.py; do
    [ -f "$f" ] || continue
    for layout in $(sed -n 's/^LAYOUTS = (\(.*\))$/\1/p' "$f" | tr -d '",'); do
      name="$(basename "$f" .py | sed 's/_dist$//')_$layout"
      if [ "${gpus:-0}" -ge 2 ]; then
        add_program "$name" "python3 -m torch.distributed.run --standalone --nproc_per_node=2 $(printf '%q' "$f") $layout" "$root"
      else
        add_program "$name" "echo 'nothing to do: needs two GPUs, nvidia-smi lists ${gpus:-0}'" "$root"
      fi
    done
  done
}
if [ "$corpus" = 1 ]; then
  add_corpus
elif [ -z "$extra" ]; then
  die "REAL_CHECK_CORPUS=0 without REAL_CHECK_EXTRA: no program to run"
fi
if [ -n "$extra" ]; then
  [ -f "$extra" ] || die "REAL_CHECK_EXTRA: '$extra' is not a file"
  extra_dir=$(cd "$(dirname "$extra")" && pwd)
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in '' | '#'*) continue ;; esac
    [[ "$line" == *$'\t'* ]] || die "REAL_CHECK_EXTRA: no tab in line '$line'"
    add_program "${line%%$'\t'*}" "${line#*$'\t'}" "$extra_dir"
  done <"$extra"
fi
# REAL_CHECK_ONLY's order is the order they run in (a budget is spent on the first ones).
if [ -n "$only" ]; then
  sorted_names=() sorted_cmds=() sorted_dirs=()
  for w in $only; do
    for i in "${!names[@]}"; do
      if [ "${names[$i]}" = "$w" ]; then
        sorted_names+=("${names[$i]}") sorted_cmds+=("${cmds[$i]}") sorted_dirs+=("${dirs[$i]}")
      fi
    done
  done
  names=("${sorted_names[@]}") cmds=("${sorted_cmds[@]}") dirs=("${sorted_dirs[@]}")
fi
[ ${#names[@]} -gt 0 ] || die "no program to run${only:+ (REAL_CHECK_ONLY=$only)}"

# dist CMD: true where CMD starts a data-parallel program (two GPUs: never a job's of REAL_CHECK_GPUS).
dist() { [[ "$1" == *torch.distributed.run* ]]; }

# REAL_CHECK_GPUS: the jobs, each on a GPU and a share of the cores of its own, claiming programs
# until none is left; this check then makes the table from their runs (table_only: a program
# with no run of its own is a row "not run"), and runs the data-parallel programs itself.
table_only=0
if [ "$ngpus" -gt 1 ]; then
  rm -rf "$out/.claims" && mkdir -p "$out/.claims" || exit 2
  jobs_only=""
  for i in "${!names[@]}"; do dist "${cmds[$i]}" || jobs_only="$jobs_only ${names[$i]}"; done
  for ((k = 0; k < ngpus && ${#jobs_only}; k++)); do
    REAL_CHECK_GPUS=1 REAL_CHECK_CLAIMS="$out/.claims" REAL_CHECK_ONLY="$jobs_only" \
      gpu_job "$k" "$ngpus" "$out/gpu.$((k + 1)).log" bash "$0" "$build" "$out"
  done
  wait
  echo "real-check: $k jobs done, one per GPU (logs $out/gpu.*.log); the table from their runs"
  table_only=1
fi

# run STEM DIR CMD [VAR=VALUE...]: run CMD once (eager without variables, else under the preload
# with them); stdout -> STEM.out, stderr -> STEM.err, exit status -> STEM.rc; sets rc.
run() {
  local stem=$1 dir=$2 cmd=$3 pre="" again=$reuse
  shift 3
  [ "$table_only" = 1 ] && ! dist "$cmd" && again=1 # a job's run
  if [ "$again" = 1 ] && [ -f "$out/$stem.rc" ] && [ -f "$out/$stem.out" ] && [ -f "$out/$stem.err" ]; then
    rc=$(cat "$out/$stem.rc")
    return
  fi
  echo "== $stem"
  [ $# -gt 0 ] && pre="export LD_PRELOAD=$(printf '%q' "$lib"); "
  rm -f "$out/$stem".*report.json
  (cd "$dir" && timeout -k 10 "$limit" env -u LD_PRELOAD "$@" bash -c "$pre$cmd") \
    >"$out/$stem.out" 2>"$out/$stem.err"
  rc=$?
  echo "$rc" >"$out/$stem.rc"
}

# us FILE: "NAME X" for each NAME of the "NAME: median_us=X" lines a run printed on stderr (the
# last of each NAME; several where the ranks of a data-parallel program each print one), sorted.
us() {
  sed -n 's/^\([A-Za-z0-9_.-]*\): median_us=\([0-9][0-9.eE+-]*\).*/\1 \2/p' "$1" 2>/dev/null |
    awk '{ v[$1] = $2 } END { for (k in v) print k, v[k] }' | sort
}

# run_stat median|spread FILE...: over the runs' stderr files, "NAME X" for each NAME they print
# with X the median of its values (median), or how far apart the values of the first NAME are,
# (largest - smallest) / median in percent ("" with fewer than two runs: spread). A speed inside
# the eager runs' spread is not told apart from 1.0 by these runs.
run_stat() {
  local what=$1 f
  shift
  for f in "$@"; do us "$f"; done | python3 -c '
import statistics, sys
v = {}
for line in sys.stdin:
    k, x = line.split()
    v.setdefault(k, []).append(float(x))
for k in sorted(v):
    x, m = v[k], statistics.median(v[k])
    if sys.argv[1] == "median":
        print(k, "%.3f" % m)
        continue
    if len(x) > 1 and m > 0:
        print("%.0f" % (100 * (max(x) - min(x)) / m))
    break' "$what"
}

# one_round R: round R of the configuration $stem beside an eager run of its own (the
# configuration first in even rounds), its outputs judged; appends to eager_errs and config_errs.
one_round() {
  local r=$1 kind
  for kind in $([ $((r % 2)) = 0 ] && echo "cgjit eager" || echo "eager cgjit"); do
    if [ "$kind" = eager ]; then
      run "$stem.eager.r$r" "$dir" "$cmd"
      eager_errs+=("$out/$stem.eager.r$r.err")
      [ "$rc" -eq 0 ] || { failed=1; note="${note:+$note; }eager round $r $(rc_text "$rc")"; }
    else
      run "$stem.r$r" "$dir" "$cmd" "${vars[@]}" "CGJIT_REPORT=json:$out/$stem.r$r.%p.report.json"
      config_errs+=("$out/$stem.r$r.err")
      if [ "$verdict" = identical ] || [ "$verdict" = "within eager spread" ]; then judge "$stem.r$r" "round $r: "; fi
    fi
  done
}

# speed_now: speed, per NAME printed by both (the eager runs' median / the cgjit runs'), joined
# by "/", over the runs so far.
speed_now() {
  local te tc
  te=$(run_stat median "${eager_errs[@]}") tc=$(run_stat median "${config_errs[@]}")
  speed=$(printf '%s\n' "$te" | awk -v c="$tc" '
    BEGIN { n = split(c, l, "\n"); for (i = 1; i <= n; i++) { split(l[i], kv, " "); v[kv[1]] = kv[2] } }
    NF == 2 && ($1 in v) && v[$1] > 0 { out = out (out == "" ? "" : "/") sprintf("%.2fx", $2 / v[$1]) }
    END { print (out == "" ? "n/a" : out) }')
}

# diff_line A B: the first line where files A and B differ ("?" if cmp names none). cmp says
# "differ: byte B, line L", "EOF on A after byte B, line L" (A has L whole lines: L + 1 differs)
# or "EOF on A after byte B, in line L".
diff_line() {
  local l
  l=$(cmp "$1" "$2" 2>&1 | awk '
    match($0, /, line [0-9]+/) { l = substr($0, RSTART + 7, RLENGTH - 7) + ($0 ~ /EOF on/); print l; exit }
    match($0, /in line [0-9]+/) { print substr($0, RSTART + 8, RLENGTH - 8); exit }')
  echo "${l:-?}"
}

# within_spread E1 E2 OUT: for a program whose two eager runs differ (float atomics): true where
# OUT has the eager runs' lines and words, and every number in it is as close to an eager run's
# as the eager runs are to each other (the largest difference of a number, line by line); says
# "numbers within D of eager (eager runs: S)". False where words differ or a number is further.
within_spread() {
  python3 - "$1" "$2" "$3" 2>/dev/null <<'EOF'
import sys
def words(p):
    return [l.split() for l in open(p, errors="replace").read().splitlines()]
def num(w):
    try:
        return float(w)
    except ValueError:
        return None
def gap(a, b):
    if len(a) != len(b):
        return None
    worst = 0.0
    for la, lb in zip(a, b):
        if len(la) != len(lb):
            return None
        for x, y in zip(la, lb):
            if x == y:
                continue
            fx, fy = num(x), num(y)
            if fx is None or fy is None:
                return None
            worst = max(worst, abs(fx - fy))
    return worst
e1, e2, out = (words(p) for p in sys.argv[1:4])
spread = gap(e1, e2)
mine = [g for g in (gap(e1, out), gap(e2, out)) if g is not None]
# Decimal numbers as printed: 7.73 - 7.72 and 7.62 - 7.61 are the same step of the last digit.
if spread is None or not mine or min(mine) > spread * (1 + 1e-9) + 1e-12:
    sys.exit(1)
print("numbers within %g of eager (eager runs: %g)" % (min(mine), spread))
EOF
}

# share STEM: the replayed share of the JSON reports of a run (see the header), one per process,
# "none>=10" or "n/a". Where stderr says "rank R pid P" (data-parallel programs), the share of
# each rank's process, in rank order (r0:X r1:Y); else that of the process with anchors.
share() {
  python3 - "$out/$1" 2>/dev/null <<'EOF' || echo "n/a"
import glob, json, re, sys
stem = sys.argv[1]
ranks = {}
for line in open(stem + ".err", errors="replace"):
    m = re.match(r"rank (\d+) pid (\d+)$", line.strip())
    if m:
        ranks[int(m.group(2))] = int(m.group(1))
def one(report):
    anchors = [a for a in report["anchors"] if a["runs"] >= 10]
    # A program that marks its steps: its marked anchors alone (implicit ones are named sync:, auto:).
    marked = [a for a in anchors if not a["name"].startswith(("sync:", "auto:"))]
    num = sum(a["replays"] for a in marked or anchors)
    den = sum(max(a["runs"] - 2 - a.get("warmup_runs", 1) - a.get("building_runs", 0), 0) for a in marked or anchors)
    share = f"{100.0 * num / den:.1f}%" if den else "none>=10"
    if marked:
        share = "marked " + share
    g = report.get("governor") or {}
    if g.get("judgements"):  # the governor's last decision and measured speed active/dormant
        share += f" {g['decision']}@{g['ratio']:.2f}x"
    elif g:
        share += " " + g["state"].replace(" ", "-")
    counters, replayed = report.get("counters") or {}, report["summary"].get("steps_replayed", 0)
    launches = counters.get("graph_launches", 0)
    if launches and replayed:  # graphs a replayed step launches, and the host time each took
        share += f" {launches / replayed:.1f}g/step@{counters.get('launch_host_ns', 0) / launches / 1e3:.1f}us"
    return share
reports = [json.load(open(f)) for f in sorted(glob.glob(stem + ".*.report.json"))]
if not reports:
    print("n/a")
elif ranks:
    shares = sorted((ranks[r["pid"]], one(r)) for r in reports if r.get("pid") in ranks)
    print(" ".join(f"r{k}:{v}" for k, v in shares) or "n/a")
else:
    busy = [r for r in reports if r["anchors"]] or reports
    print(one(busy[0]))
EOF
}

# tail_of FILE: its last lines, indented, for the details.
tail_of() {
  if [ -s "$1" ]; then tail -n 6 "$1" | cut -c 1-200 | sed 's/^/    /'; else echo "    (empty)"; fi
}

rc_text() { case "$1" in 124 | 137) echo "timeout" ;; *) echo "exit $1" ;; esac; }

# judge STEM [PREFIX]: the verdict of run STEM (exit status rc) against the eager runs e1 and e2
# (spread: how they differ): identical, within eager spread, DIFFERS at line N, or its exit. With
# PREFIX (a later round's "round R: "), the verdict so far stands unless this run is worse: a
# failure is PREFIX and its verdict. A failing run sets failed and adds to details; a first
# round's note says which eager run it equals or how far it is within their spread.
judge() {
  local stem=$1 prefix=${2:-} v n w
  if [ "$rc" -ne 0 ]; then
    v=$(rc_text "$rc")
  elif cmp -s "$e1" "$out/$stem.out"; then
    v=identical
  elif [ "${spread#eager-differs}" != "$spread" ] && cmp -s "$e2" "$out/$stem.out"; then
    v=identical
    [ -z "$prefix" ] && note="$spread; equals eager2"
  elif [ "${spread#eager-differs}" != "$spread" ] && w=$(within_spread "$e1" "$e2" "$out/$stem.out"); then
    v="within eager spread"
    [ -z "$prefix" ] && note="$spread; $w"
  else
    n=$(diff_line "$e1" "$out/$stem.out")
    v="DIFFERS at line $n"
    details="$details  $stem, line $n:
    eager: $(sed -n "${n}p" "$e1" 2>/dev/null | cut -c 1-150)
    cgjit: $(sed -n "${n}p" "$out/$stem.out" 2>/dev/null | cut -c 1-150)
"
  fi
  if [ "$v" != identical ] && [ "$v" != "within eager spread" ]; then
    failed=1
    if [ "$v" = "${v#DIFFERS}" ]; then
      details="$details  $stem ($v) stderr tail:
$(tail_of "$out/$stem.err")
"
    fi
  fi
  if [ -z "$prefix" ]; then
    verdict=$v
  elif [ "$v" != identical ] && [ "$v" != "within eager spread" ]; then
    verdict=$prefix$v
  elif [ "$v" != identical ] && [ "$verdict" = identical ]; then
    verdict=$v note="${note:+$note; }${prefix%: } within eager spread"
  fi
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
failed=0
rows=""
details=""
tsv=""
row() {
  rows="$rows$(printf '  %-24s %-20s %-18s %8s %10s %-9s %s' "$@")
"
  tsv="$tsv$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s' "$@")
"
}
# not_run_rows NOTE: program $name's rows "not run", one per configuration, counted.
not_run_rows() {
  for config in $configs; do row "$name" "$config" "not run" "" "" "" "$1"; done
  not_run=$((not_run + 1))
}
started=$SECONDS longest=0 not_run=0 begun=""
for i in "${!names[@]}"; do
  name=${names[$i]} cmd=${cmds[$i]} dir=${dirs[$i]}
  # the program before took SECONDS - begun
  [ -n "$begun" ] && [ $((SECONDS - begun)) -gt "$longest" ] && longest=$((SECONDS - begun))
  begun=""
  if [ "$table_only" = 1 ] && ! dist "$cmd"; then
    # the table of REAL_CHECK_GPUS's jobs: a program none of them began is a row "not run"
    if [ ! -f "$out/$name.eager1.rc" ]; then
      not_run_rows "no job began it (REAL_CHECK_BUDGET, ${budget} s)"
      continue
    fi
  elif [ "$budget" -gt 0 ] && [ $((SECONDS - started + longest)) -gt "$budget" ]; then
    # a job of REAL_CHECK_GPUS leaves it to no one (the table's row "not run")
    [ -n "$claims" ] || not_run_rows "REAL_CHECK_BUDGET (${budget} s) spent"
    continue
  fi
  # a job of REAL_CHECK_GPUS runs the programs no other job has claimed
  if [ -n "$claims" ] && ! mkdir "$claims/$name" 2>/dev/null; then continue; fi
  begun=$SECONDS
  e1=$out/$name.eager1.out e2=$out/$name.eager2.out
  run "$name.eager1" "$dir" "$cmd"
  rc_e1=$rc
  if [ "$rc_e1" -eq 0 ] && grep -a -q 'nothing to do' "$e1"; then
    row "$name" "-" "skipped" "" "" "" "$(grep -a -m 1 'nothing to do' "$e1")"
    continue
  fi
  if [ "$rc_e1" -ne 0 ]; then
    failed=1
    details="$details  $name.eager1 ($(rc_text "$rc_e1")) stderr tail:
$(tail_of "$out/$name.eager1.err")
"
    for config in $configs; do row "$name" "$config" "eager $(rc_text "$rc_e1")" "" "" "" ""; done
    continue
  fi
  run "$name.eager2" "$dir" "$cmd"
  spread=""
  if [ "$rc" -ne 0 ]; then
    failed=1
    spread="eager2 $(rc_text "$rc")"
    details="$details  $name.eager2 ($(rc_text "$rc")) stderr tail:
$(tail_of "$out/$name.eager2.err")
"
  elif ! cmp -s "$e1" "$e2"; then
    spread="eager-differs (line $(diff_line "$e1" "$e2"))"
  fi
  for config in $configs; do
    stem=$name.$config
    mapfile -t vars < <(config_env "$config")
    run "$stem" "$dir" "$cmd" "${vars[@]}" "CGJIT_REPORT=json:$out/$stem.%p.report.json"
    note=$spread
    judge "$stem"
    # More rounds, each a run of the configuration beside an eager run of its own; past
    # REAL_CHECK_ROUNDS, one more at a time while a speed is below 0.98x (up to REAL_CHECK_MAX_ROUNDS).
    eager_errs=("$out/$name.eager1.err" "$out/$name.eager2.err") config_errs=("$out/$stem.err")
    for ((r = 2; r <= rounds; r++)); do one_round "$r"; done
    speed_now
    for ((r = rounds + 1; r <= max_rounds; r++)); do
      [[ "$speed" =~ (^|/)0\.([0-8][0-9]|9[0-7])x ]] || break
      one_round "$r"
      speed_now
    done
    ran=$((r - 1))
    if [ "$ran" -gt 1 ]; then
      note="${note:+$note; }speed of $((ran + 1)) eager and $ran cgjit runs"
      sp=$(run_stat spread "${eager_errs[@]}")
      [ -n "$sp" ] && note="$note, the eager runs $sp% apart"
    fi
    replayed=$(share "$stem")
    verify=""
    [[ "$config" == *-verify* ]] && verify="verify=$(grep -a -c '^cgjit: verify:.*diverge' "$out/$stem.err")"
    row "$name" "$config" "$verdict" "$speed" "$replayed" "$verify" "$note"
  done
done

echo
at_once=""
[ "$table_only" = 1 ] && at_once=", $ngpus jobs at once, one per GPU"
echo "real-check: GPU ${gpu:-unknown}$at_once, libcgjit $lib, runs in $out"
[ -n "$details" ] && printf 'details:\n%s' "$details"
printf '  %-24s %-20s %-18s %8s %10s %-9s %s\n' program config verdict speed replayed verify note
printf '%s' "$rows"
printf 'program\tconfig\tverdict\tspeed\treplayed\tverify\tnote\n%s' "$tsv" >"$out/table.tsv"
if [ "$failed" -eq 0 ] && [ "$not_run" -gt 0 ]; then
  echo "INCOMPLETE: $not_run program(s) not run within REAL_CHECK_BUDGET=$budget s (none failed)"
  exit 3
fi
if [ "$failed" -eq 0 ]; then
  echo "PASS"
  exit 0
fi
echo "FAIL"
exit 1
