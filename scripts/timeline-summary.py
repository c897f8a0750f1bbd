#!/usr/bin/env python3
"""timeline-summary.py TRACE.json [--top N] [--json] — where a program's host time went, anchor by
anchor, from the timeline cgjit writes with CGJIT_TRACE_FILE (docs/diagnostics.md).

For each anchor, largest total first: its steps by how they ran (replay: replayed to the end;
exit: left the trace, finished eagerly; record: recorded; eager: an eager probe or a run while
replay was off or blacklisted), each with its count, median and total host time; its builds
(count, total time, the largest variant's ops); its side exits by reason; and, where it has
eager steps, a rough net: what its replays saved against its eager median, less its builds and
what its recorded and exited steps took beyond that median. Then the totals by kind over all
anchors. A build runs inside the step whose recording it is built from: its time is counted as
the build's, not that step's.

What to look for when a program runs slower with cgjit than without (docs/troubleshooting.md):
  - exit steps much longer than the anchor's replay or eager steps: the step leaves its trace,
    is finished eagerly and recorded again; the reasons say why it left;
  - builds whose total is large against what the replays saved (replay against eager median
    times the replays);
  - record steps that never become replays: a step whose shape follows the data.

--json prints the same figures as one JSON object (anchors in the same order). Exit status: 0;
1 when the file is no cgjit timeline; 2 on bad usage.
"""
import json
import statistics
import sys

KINDS = ("replay", "exit", "record", "eager")


def usage():
    print(__doc__.split("\n\n")[0], file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("timeline-summary: %s: %s" % (path, e), file=sys.stderr)
        sys.exit(1)
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        print("timeline-summary: %s: no traceEvents (not a CGJIT_TRACE_FILE timeline)" % path, file=sys.stderr)
        sys.exit(1)
    return doc, events


def net_us(steps, builds):
    """What the anchor's replays saved less what its warm-up and exits cost, in us, taking its
    eager steps' median as what every step would have cost without cgjit; None without eager
    steps to take it from. Rough: steps of one anchor need not be alike (a step whose length
    follows the data), and a recording also runs the step."""
    eager = steps.get("eager")
    if not eager:
        return None
    e = statistics.median(eager)
    saved = sum(e - d for d in steps.get("replay", []))
    spent = sum(d - e for k in ("record", "exit") for d in steps.get(k, [])) + builds["total_us"]
    return saved - spent


def summarize(events):
    """Per anchor: its steps by kind (host time less the builds made inside them), its builds,
    its side exits; anchors by total time, largest first; totals and counts by kind."""
    anchors = {}

    def anchor(name):
        return anchors.setdefault(name, {"name": name, "steps": {}, "builds": [], "exits": {}})

    steps = [e for e in events if e.get("ph") == "X" and e.get("cat") in KINDS]
    builds = [e for e in events if e.get("ph") == "X" and e.get("cat") == "build"]
    # A build runs inside the step that finished the recording it is built from: its time is
    # taken off that step's, so that a step's figure is the step's own.
    less = {}
    for b in builds:
        t0, t1 = float(b["ts"]), float(b["ts"]) + float(b.get("dur", 0))
        for i, e in enumerate(steps):
            if e.get("tid") == b.get("tid") and float(e["ts"]) <= t0 and t1 <= float(e["ts"]) + float(e.get("dur", 0)):
                less[i] = less.get(i, 0.0) + float(b.get("dur", 0))
                break
    for i, e in enumerate(steps):
        own = max(0.0, float(e.get("dur", 0)) - less.get(i, 0.0))
        anchor(e["name"])["steps"].setdefault(e["cat"], []).append(own)
    for b in builds:
        anchor(b["name"])["builds"].append((float(b.get("dur", 0)), b.get("args", {}).get("ops", 0)))
    for e in events:
        if e.get("ph") == "i" and e.get("name") == "side exit":
            args = e.get("args", {})
            key = "%s at op %s" % (args.get("reason", "?"), args.get("op", "?"))
            ex = anchor(args.get("anchor", "?"))["exits"]
            ex[key] = ex.get(key, 0) + 1
    out = []
    for a in anchors.values():
        st = {k: {"count": len(v), "median_us": statistics.median(v), "total_us": sum(v)} for k, v in a["steps"].items()}
        bl = {"count": len(a["builds"]), "total_us": sum(d for d, _ in a["builds"]),
              "most_ops": max((n for _, n in a["builds"]), default=0)}
        total = sum(x["total_us"] for x in st.values()) + bl["total_us"]
        exits = sorted(a["exits"].items(), key=lambda kv: -kv[1])
        out.append({"name": a["name"], "total_us": total, "steps": st, "builds": bl,
                    "exits": [{"reason": k, "count": n} for k, n in exits], "net_us": net_us(a["steps"], bl)})
    out.sort(key=lambda a: -a["total_us"])
    totals = {k: sum(a["steps"].get(k, {}).get("total_us", 0) for a in out) for k in KINDS}
    totals["build"] = sum(a["builds"]["total_us"] for a in out)
    counts = {k: sum(a["steps"].get(k, {}).get("count", 0) for a in out) for k in KINDS}
    counts["build"] = sum(a["builds"]["count"] for a in out)
    return out, totals, counts


def main(argv):
    args = argv[1:]
    top, as_json, paths = 10, False, []
    while args:
        a = args.pop(0)
        if a == "--top" and args and args[0].isdigit():
            top = int(args.pop(0))
        elif a == "--json":
            as_json = True
        elif a.startswith("-"):
            usage()
        else:
            paths.append(a)
    if len(paths) != 1:
        usage()
    doc, events = load(paths[0])
    anchors, totals, counts = summarize(events)
    dropped = doc.get("otherData", {}).get("dropped", 0) if isinstance(doc, dict) else 0
    if as_json:
        print(json.dumps({"anchors": anchors, "totals_us": totals, "counts": counts, "dropped": dropped}))
        return 0
    print("timeline-summary: %s: %d anchors, host time in steps and builds by kind:" % (paths[0], len(anchors)))
    print("  " + "  ".join("%s %d / %.1f ms" % (k, counts[k], totals[k] / 1e3) for k in KINDS + ("build",)))
    if dropped:
        print("  (%d later events were not kept: CGJIT_TRACE_EVENTS)" % dropped)
    for a in anchors[:top]:
        print("%9.1f ms  %s" % (a["total_us"] / 1e3, a["name"]))
        for k in KINDS:
            s = a["steps"].get(k)
            if s:
                print("      %-7s %5d steps, median %9.1f us, total %8.1f ms" % (k, s["count"], s["median_us"],
                                                                          s["total_us"] / 1e3))
        b = a["builds"]
        if b["count"]:
            print("      build   %5d, total %.1f ms, largest %d ops" % (b["count"], b["total_us"] / 1e3, b["most_ops"]))
        for x in a["exits"][:3]:
            print("      exits   %5d  %s" % (x["count"], x["reason"]))
        if a["net_us"] is not None:
            print("      net     %+.1f ms against its eager median: %s" % (
                a["net_us"] / 1e3, "replay paid" if a["net_us"] >= 0 else "cost more than it saved"))
    if len(anchors) > top:
        print("  (%d more anchors: --top N)" % (len(anchors) - top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
