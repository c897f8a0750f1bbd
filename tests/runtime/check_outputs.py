#!/usr/bin/env python3
"""check_outputs.py REPORT_APP SCHEMA — what cgjit writes at exit, checked on fresh processes of
report_app (tests/runtime/report_app.c, on the fake driver):

  - CGJIT_REPORT=json:FILE validates against docs/report-schema.json and holds the run's figures;
  - CGJIT_REPORT=1 prints the text report: the summary first, once-run anchors folded, counters
    only when not zero; it prints, saying so, when cgjit is disabled or finds no driver;
  - CGJIT_TRACE_FILE=FILE is a Chrome trace (JSON object format) with steps, builds, side exits;
  - %p in file names is the pid; log files shared by processes carry the pid on every line;
  - anchor names are the same in two runs whose handles lie at other addresses (sync and auto).

Each check prints one line; the script exits 1 if any failed. The JSON Schema checker below
covers the keywords the schema uses (type, enum, const, properties, required,
additionalProperties, items, minimum, maximum, $ref to #/definitions).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

APP, SCHEMA_PATH = sys.argv[1], sys.argv[2]
SCHEMA = json.load(open(SCHEMA_PATH))
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def type_ok(v, t):
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, TYPES[t])


def validate(v, s, path="$"):
    """Problems of value v against schema s, as a list of strings."""
    if "$ref" in s:
        s = SCHEMA["definitions"][s["$ref"].split("/")[-1]]
    out = []
    types = s.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        if not any(type_ok(v, t) for t in types):
            return ["%s: %r is not of type %s" % (path, v, types)]
    if "const" in s and v != s["const"]:
        out.append("%s: %r is not %r" % (path, v, s["const"]))
    if "enum" in s and v not in s["enum"]:
        out.append("%s: %r is not one of %s" % (path, v, s["enum"]))
    if type_ok(v, "number"):
        if "minimum" in s and v < s["minimum"]:
            out.append("%s: %r < %r" % (path, v, s["minimum"]))
        if "maximum" in s and v > s["maximum"]:
            out.append("%s: %r > %r" % (path, v, s["maximum"]))
    if isinstance(v, dict):
        props = s.get("properties", {})
        out += ["%s: lacks %s" % (path, k) for k in s.get("required", []) if k not in v]
        extra = s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                out += validate(x, props[k], path + "." + k)
            elif extra is False:
                out.append("%s: %s is not in the schema" % (path, k))
            elif isinstance(extra, dict):
                out += validate(x, extra, path + "." + k)
    if isinstance(v, list) and "items" in s:
        for i, x in enumerate(v):
            out += validate(x, s["items"], "%s[%d]" % (path, i))
    return out


def run(args, env, tmp):
    """Run report_app with env added; returns (pid, stderr)."""
    full = dict(os.environ)
    for k in list(full):
        if k.startswith("CGJIT_"):
            del full[k]
    full.update(env)
    p = subprocess.Popen([APP] + [str(a) for a in args], env=full, cwd=tmp, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    _, err = p.communicate(timeout=120)
    if p.returncode != 0:
        raise AssertionError("report_app %s exited %d: %s" % (args, p.returncode, err))
    return p.pid, err


def json_report(tmp, args, env):
    pid, err = run(args, dict(env, CGJIT_REPORT="json:" + os.path.join(tmp, "r-%p.json")), tmp)
    path = os.path.join(tmp, "r-%d.json" % pid)
    assert os.path.exists(path), "no %s (%%p is the pid); stderr: %s" % (path, err)
    doc = json.load(open(path))
    problems = validate(doc, SCHEMA)
    assert not problems, "the report does not validate:\n  " + "\n  ".join(problems[:20])
    assert doc["pid"] == pid
    return doc


def check_json_implicit(tmp):
    doc = json_report(tmp, ["implicit", 60], {"CGJIT_STEP": "sync"})
    s = doc["summary"]
    assert doc["status"] == "ok" and doc["status_text"] == "" and doc["policy"] == "sync", doc["status"]
    assert s["steps"] >= 60 and 0 < s["steps_replayed"] <= s["steps"], s
    assert abs(s["share_replayed"] - s["steps_replayed"] / s["steps"]) < 1e-3, s
    loop = [a for a in doc["anchors"] if a["name"].startswith("sync:cuLaunchKernel:axpb:")]
    assert loop and loop[0] is doc["anchors"][0], [a["name"] for a in doc["anchors"]]
    a = loop[0]
    assert a["state"] == "REPLAY" and a["replays"] > 0 and a["side_exits"] > 0 and a["variants"], a
    # No run of this anchor ran eagerly without recording (no probes: CGJIT_COST is 0 here), so
    # there is no eager figure, and no host time saved is claimed from the recording runs.
    assert a["eager_host_ns_per_run"] == 0 and a["host_ns_saved"] == 0 and a["replay_host_ns_per_run"] > 0, a
    exits = [e for v in a["variants"] for e in v["exits"]]
    assert exits and exits[0]["reason"]["code"], a["variants"]
    assert s["top_reasons"] and all(r["hint"] for r in s["top_reasons"]), s["top_reasons"]
    assert doc["counters"]["steps"] == s["steps"] and doc["counters"]["side_exits"] > 0, doc["counters"]


def check_json_eager_figure(tmp):
    # With the cost model's probes, the eager figure comes from them (runs that record nothing).
    env = {"CGJIT_STEP": "sync", "CGJIT_COST": "1", "CGJIT_LOG": "cost",
           "CGJIT_LOG_FILE": os.path.join(tmp, "cost-%p.txt")}
    doc = json_report(tmp, ["implicit", 60], env)
    a = [a for a in doc["anchors"] if a["name"].startswith("sync:cuLaunchKernel:axpb:")][0]
    assert a["probes"] + a["off_runs"] > 0 and a["eager_host_ns_per_run"] > 0, a
    # CGJIT_LOG=cost names each pair's place (the anchors whose steps came before its begins)
    # and its two periods.
    log = open(os.path.join(tmp, "cost-%d.txt" % doc["pid"])).read()
    pairs = re.findall(r"anchor '([^']+)': pair (\d+) of its window, after '([^']+)' until after '([^']+)': "
                       r"eager ([0-9.]+) us, replay ([0-9.]+) us", log)
    assert pairs, "no pair in the cost log:\n" + log[:2000]
    numbers = [int(p[1]) for p in pairs]  # a strike starts a fresh window
    assert numbers[0] == 1 and all(n == m + 1 or n == 1 for m, n in zip(numbers, numbers[1:])), numbers
    assert all(p[0] == a["name"] and float(p[4]) > 0 and float(p[5]) > 0 for p in pairs), pairs


def check_json_marked(tmp):
    doc = json_report(tmp, ["marked", 30], {})
    names = [a["name"] for a in doc["anchors"]]
    assert names == ["train", "setup"], "ran-once anchors come last: %s" % names
    assert doc["summary"]["anchors_run_once"] == 1 and doc["policy"] == "off", doc["summary"]
    assert doc["anchors"][0]["replays"] > 0 and doc["anchors"][1]["runs"] == 1, doc["anchors"]


def check_json_without_driver(tmp):
    doc = json_report(tmp, ["nodriver"], {"CGJIT_DRIVER": "/nonexistent/libcuda.so.1"})
    assert doc["status"] == "no_driver" and "/nonexistent/libcuda.so.1" in doc["status_text"], doc["status_text"]
    doc = json_report(tmp, ["implicit", 10], {"CGJIT_DISABLE": "1"})
    assert doc["status"] == "disabled" and doc["summary"]["steps"] == 0, doc


def report_lines(err):
    lines = err.splitlines()
    assert "cgjit report" in lines, "no report on stderr: %s" % err
    return lines[lines.index("cgjit report"):]


def check_text_report(tmp):
    _, err = run(["marked", 30], {"CGJIT_REPORT": "1"}, tmp)
    lines = report_lines(err)
    summary = [i for i, l in enumerate(lines) if l.startswith("  summary: ")]
    anchors = [i for i, l in enumerate(lines) if re.match(r"^ +anchor '", l)]
    assert summary and anchors and summary[0] < anchors[0], "the summary comes first:\n" + err
    # The headline is the governor's measured figure once it judged, else the anchors' own sum.
    assert re.search(r"summary: \d+ of \d+ steps replayed \([0-9.]+%\); (the anchors' own estimate: about [0-9.]+ s "
                     r"of host time (saved|lost)|measured in this process: [0-9.]+x as fast with cgjit active as dormant)$",
                     lines[summary[0]]), lines[summary[0]]
    assert lines[summary[0] + 1].startswith("  governor (CGJIT_GOVERN): "), "the governor's line follows:\n" + err
    assert not any("anchor 'setup'" in l for l in lines), "a once-run anchor is folded:\n" + err
    assert any("ran once" in l and "'setup'" in l for l in lines), err
    start = [i for i, l in enumerate(lines) if l.startswith("  counters")]
    assert start, err
    for l in lines[start[0] + 1:]:
        m = re.match(r"^    (\w+) +(\d+)  ", l)
        assert m and int(m.group(2)) > 0, "a zero counter is printed: %r" % l


def check_text_report_to_a_file(tmp):
    pid, err = run(["marked", 10], {"CGJIT_REPORT": "text:" + os.path.join(tmp, "r-%p.txt")}, tmp)
    assert "cgjit report" not in err, err
    text = open(os.path.join(tmp, "r-%d.txt" % pid)).read()
    assert text.startswith("cgjit report\n") and "summary:" in text, text


def check_text_report_when_not_tracing(tmp):
    _, err = run(["implicit", 5], {"CGJIT_REPORT": "1", "CGJIT_DISABLE": "1"}, tmp)
    lines = report_lines(err)
    assert any("cgjit is disabled" in l for l in lines[:4]), err
    _, err = run(["nodriver"], {"CGJIT_REPORT": "1", "CGJIT_DRIVER": "/nonexistent/libcuda.so.1"}, tmp)
    lines = report_lines(err)
    assert any("could not be loaded" in l and "/nonexistent/libcuda.so.1" in l for l in lines[:4]), err


def check_chrome_trace(tmp):
    pid, err = run(["implicit", 60], {"CGJIT_STEP": "sync", "CGJIT_TRACE_FILE": os.path.join(tmp, "t-%p.json")}, tmp)
    path = os.path.join(tmp, "t-%d.json" % pid)
    assert os.path.exists(path), "no %s: %s" % (path, err)
    doc = json.load(open(path))
    events = doc["traceEvents"]
    assert isinstance(events, list) and events, doc
    for e in events:
        assert isinstance(e["name"], str) and e["ph"] in ("X", "i", "M") and e["pid"] == pid, e
        assert isinstance(e["tid"], int), e
        if e["ph"] != "M":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and isinstance(e["args"], dict), e
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
    cats = {}
    for e in events:
        cats.setdefault((e["ph"], e.get("cat")), []).append(e)
    replays = cats.get(("X", "replay"), [])
    assert replays and all(e["name"].startswith("sync:") for e in replays), sorted(cats)
    assert cats.get(("X", "record")) or cats.get(("X", "eager")), sorted(cats)
    assert cats.get(("X", "build")), sorted(cats)
    exits = cats.get(("i", "exit"), [])
    assert exits and exits[0]["name"] == "side exit" and exits[0]["args"]["reason"], sorted(cats)
    steps = sum(len(v) for (ph, c), v in cats.items() if ph == "X" and c in ("replay", "exit", "record", "eager"))
    assert steps >= 60, "one event per step: %d" % steps
    check_timeline_summary(path, cats)


def check_timeline_summary(path, cats):
    """scripts/timeline-summary.py on the same timeline: every step and build counted once, by
    kind and per anchor; builds taken off the steps they ran in; anchors by total, largest first."""
    tool = os.path.join(os.path.dirname(SCHEMA_PATH), "..", "scripts", "timeline-summary.py")
    out = subprocess.run([sys.executable, tool, path, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    for kind in ("replay", "exit", "record", "eager", "build"):
        want = len(cats.get(("X", kind), []))
        assert doc["counts"][kind] == want, (kind, doc["counts"], want)
        per_anchor = sum(a["builds"]["count"] if kind == "build" else a["steps"].get(kind, {}).get("count", 0)
                         for a in doc["anchors"])
        assert per_anchor == want, (kind, per_anchor, want)
    exits = sum(x["count"] for a in doc["anchors"] for x in a["exits"])
    assert exits == len(cats.get(("i", "exit"), [])), (exits, len(cats.get(("i", "exit"), [])))
    every = sum(e["dur"] for (ph, c), v in cats.items() if ph == "X" for e in v
                if c in ("replay", "exit", "record", "eager"))
    counted = sum(doc["totals_us"][k] for k in ("replay", "exit", "record", "eager", "build"))
    assert abs(every - counted) < 1e-3 * max(every, 1.0), (every, counted)
    totals = [a["total_us"] for a in doc["anchors"]]
    assert totals == sorted(totals, reverse=True), totals
    for a in doc["anchors"]:  # a net only against eager steps of its own
        assert (a["net_us"] is None) == ("eager" not in a["steps"]), a
    text = subprocess.run([sys.executable, tool, path], capture_output=True, text=True)
    assert text.returncode == 0 and "anchors, host time in steps and builds by kind" in text.stdout, text
    bad = subprocess.run([sys.executable, tool, SCHEMA_PATH], capture_output=True, text=True)
    assert bad.returncode == 1 and "no traceEvents" in bad.stderr, bad


def check_chrome_trace_capped(tmp):
    env = {"CGJIT_STEP": "sync", "CGJIT_TRACE_FILE": os.path.join(tmp, "t.json"), "CGJIT_TRACE_EVENTS": "1000"}
    run(["implicit", 1500], env, tmp)
    doc = json.load(open(os.path.join(tmp, "t.json")))
    kept = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    assert len(kept) == 1000 and doc["otherData"]["dropped"] > 0, (len(kept), doc["otherData"])


def anchor_names(doc):
    return sorted(a["name"] for a in doc["anchors"])


def logged_anchors(path):
    return sorted(set(re.findall(r"anchor '([^']+)'", open(path).read())))


def check_stable_names(tmp):
    for step, n in (("sync", 60), ("auto", 300)):
        runs = []
        for shift in (0, 123457):
            env = {"CGJIT_STEP": step, "CGJIT_LOG": "trace", "CGJIT_LOG_FILE": os.path.join(tmp, "log-%p.txt")}
            doc = json_report(tmp, ["implicit", n, shift], env)
            log = os.path.join(tmp, "log-%d.txt" % doc["pid"])
            assert os.path.exists(log), "no %s (%%p in CGJIT_LOG_FILE)" % log
            runs.append((anchor_names(doc), logged_anchors(log)))
        names = runs[0][0]
        assert any(x.startswith(step + ":") for x in names), "%s: no %s: anchor in %s" % (step, step, names)
        assert runs[0] == runs[1], "%s: anchors differ between runs:\n  %s\n  %s" % (step, runs[0], runs[1])


def check_shared_log(tmp):
    path = os.path.join(tmp, "shared.log")
    env = dict(os.environ, CGJIT_STEP="sync", CGJIT_LOG="trace", CGJIT_LOG_FILE=path)
    procs = [subprocess.Popen([APP, "implicit", "20"], env=env, cwd=tmp) for _ in range(2)]
    pids = set()
    for p in procs:
        assert p.wait(timeout=120) == 0
        pids.add(p.pid)
    seen = set()
    for line in open(path):
        m = re.match(r"^cgjit\[(\d+):(\w+)\] ", line)
        assert m, "a log file's line without its pid: %r" % line
        seen.add(int(m.group(1)))
    assert seen == pids, "pids %s in the log, processes %s" % (seen, pids)


CHECKS = [check_json_implicit, check_json_eager_figure, check_json_marked, check_json_without_driver, check_text_report,
          check_text_report_to_a_file, check_text_report_when_not_tracing, check_chrome_trace,
          check_chrome_trace_capped, check_stable_names, check_shared_log]


def main():
    failed = 0
    for check in CHECKS:
        with tempfile.TemporaryDirectory(prefix="cgjit-outputs-") as tmp:
            try:
                check(tmp)
                print("PASS", check.__name__)
            except Exception as e:  # every check reports, whatever fails
                failed += 1
                print("FAIL %s: %s: %s" % (check.__name__, type(e).__name__, e))
    print("%d of %d checks failed" % (failed, len(CHECKS)) if failed else "all %d checks passed" % len(CHECKS))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
