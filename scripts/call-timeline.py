#!/usr/bin/env python3
"""Where a thread's host time goes, from tests/gpu/libcupti_calls_probe.so's file.

Usage: call-timeline.py [--region K] [--top N] FILE...

For each FILE (one process), on its busiest thread:
  - the driver calls by name: count and total microseconds inside the driver;
  - the region between the K-th last synchronizing call and the one before it (K=1: the last
    one; a synchronizing call is a stream, event, context or device synchronize): each
    outermost call with the gap before it (host time outside every CUDA call: the program's,
    or cgjit's before it reaches the runtime or the driver), its own time, the time of its
    driver calls, and those calls.
Run it on an eager run's file and on a cgjit run's file of the same program: a gap or a driver
call that only the cgjit run has is what cgjit costs there.
"""
import argparse
import collections
import sys

SYNCS = ("Synchronize",)


def load(path):
    events = []
    status = ""
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                if "cupti-calls-probe:" in line:
                    status = line.split(":", 1)[1].strip()
                continue
            f5 = line.rstrip("\n").split("\t")
            faults = int(f5[5]) if len(f5) > 5 else 0
            events.append((int(f5[0]), int(f5[1]), f5[2], f5[3], f5[4], faults))
    return status, events


def calls_of(events):
    """Outermost calls of one thread: [start, end, domain, name, [(start, end, name) of its driver
    calls], page faults from its entry to its exit]."""
    out, stack = [], []
    for ns, _, site, dom, name, faults in events:
        if site == "E":
            stack.append([ns, None, dom, name, [], faults])
            continue
        if not stack:
            continue
        c = stack.pop()
        c[1] = ns
        c[5] = faults - c[5]
        if stack:
            if dom == "d":
                top = stack[0]
                top[4].append((c[0], c[1], name))
        else:
            if dom == "d":
                c[4].append((c[0], c[1], name))
            out.append(c)
    return out


def driver_ns(c):
    return sum(e - s for s, e, _ in c[4])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--region", type=int, default=1, help="the region ending at the K-th last synchronizing call")
    ap.add_argument("--top", type=int, default=12, help="driver functions listed by total time")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    for path in a.files:
        status, events = load(path)
        print(f"== {path}: {status}; {len(events)} events")
        if not events:
            continue
        busiest = collections.Counter(e[1] for e in events).most_common(1)[0][0]
        mine = [e for e in events if e[1] == busiest]
        calls = calls_of(mine)
        per = collections.defaultdict(lambda: [0, 0])
        for c in calls:
            for s, e, n in c[4]:
                per[n][0] += 1
                per[n][1] += e - s
        print(f"thread {busiest}: {len(calls)} outermost calls; driver calls by total time:")
        for n, (k, t) in sorted(per.items(), key=lambda kv: -kv[1][1])[: a.top]:
            print(f"  {n:40s} {k:7d} calls {t / 1000:10.1f} us")
        syncs = [i for i, c in enumerate(calls) if any(s in c[3] for s in SYNCS)]
        if len(syncs) < a.region:
            print("  (not that many synchronizing calls)")
            continue
        end = syncs[-a.region]
        begin = syncs[-a.region - 1] + 1 if len(syncs) > a.region else 0
        region = calls[begin : end + 1]
        t0 = region[0][0]
        total = region[-1][1] - t0
        gaps = sum(region[i][0] - region[i - 1][1] for i in range(1, len(region)))
        inside = sum(c[1] - c[0] for c in region)
        drv = sum(driver_ns(c) for c in region)
        print(
            f"region {a.region} ({len(region)} calls): {total / 1000:.1f} us from its first call to its "
            f"synchronization's end; gaps {gaps / 1000:.1f} us, inside calls {inside / 1000:.1f} us "
            f"(in the driver {drv / 1000:.1f} us)"
        )
        own = collections.defaultdict(lambda: [0, 0])
        for c in region:
            own[c[3]][0] += 1
            own[c[3]][1] += c[1] - c[0] - driver_ns(c)
        print(f"page faults inside the region's calls: {sum(c[5] for c in region)}")
        print("host time inside calls, not in the driver, by call:")
        for n, (k, t) in sorted(own.items(), key=lambda kv: -kv[1][1])[:6]:
            print(f"  {n:40s} {k:7d} calls {t / 1000:10.1f} us")
        worst = sorted(region, key=lambda c: -(c[1] - c[0] - driver_ns(c)))[:5]
        print(
            "  the largest: "
            + ", ".join(
                f"{c[3]} at +{(c[0] - t0) / 1000:.1f} us: {(c[1] - c[0] - driver_ns(c)) / 1000:.1f} us, {c[5]} faults"
                for c in worst
            )
        )
        prev = None
        for c in region:
            gap = (c[0] - prev) / 1000 if prev is not None else 0.0
            prev = c[1]
            names = collections.Counter(n for _, _, n in c[4])
            inner = ", ".join(f"{n}x{k}" if k > 1 else n for n, k in names.items())
            print(
                f"  +{(c[0] - t0) / 1000:8.1f}  gap {gap:7.1f}  {c[2]} {c[3]:32s} {(c[1] - c[0]) / 1000:7.1f} us"
                f"  driver {driver_ns(c) / 1000:7.1f}  faults {c[5]:3d}: {inner}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
