#!/usr/bin/env python3
"""compare-checks.py BEFORE NOW — two tables of scripts/real-check.sh or scripts/apps-check.sh side
by side: the speed each program had before and has now, under each configuration.

BEFORE and NOW are table.tsv files those checks write into their OUTDIR, or the OUTDIRs. A table
of old runs that has none is made again from its runs, without running anything: the same check
with REAL_CHECK_REUSE=1 (or APPS_CHECK_REUSE=1) and the old OUTDIR.

Rows are matched by program and configuration (real-check: program, config; apps-check: app,
flavour, step). A speed is the table's (real-check's "1.02x", several joined by "/" for a
program that prints several: the lowest counts; apps-check's speedup). Prints a Markdown table
(program, configuration, speed before, speed now, the share of an earlier gain kept, verdict,
replayed share and note now), then a line per finding:
  - below: a speed now under --floor (default 0.98);
  - lost: a program faster than eager before (above 1.0) that keeps under --keep (default 98%) of
    its gain: (now - 1) / (before - 1);
  - differs: a verdict now that is not identical (or within eager spread, or "yes");
  - gone / new: rows only in one of the tables.
Exit status: 0 without findings, 1 with some, 2 on bad usage or an unreadable table.
"""
import argparse
import csv
import os
import sys

KEYS = ("program", "config", "app", "flavour", "step")
SPEED = ("speed", "speedup")
VERDICT = ("verdict", "identical")
SHOWN = ("replayed", "share", "note")
GOOD = ("identical", "within eager spread", "yes")


def load(path):
    """The rows of a table.tsv (or of DIR/table.tsv) as a dict: key tuple -> row dict."""
    if os.path.isdir(path):
        path = os.path.join(path, "table.tsv")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if not any(k in (reader.fieldnames or ()) for k in SPEED):
            raise ValueError(f"{path}: no speed or speedup column")
        rows = list(reader)
    table = {}
    for r in rows:
        key = tuple(r[k] for k in KEYS if k in r)
        table[key] = r
    return table


def first(row, names):
    for n in names:
        if n in row:
            return row[n] or ""
    return ""


def speed(row):
    """The lowest of a row's speeds, or None."""
    vals = []
    for part in first(row, SPEED).split("/"):
        try:
            vals.append(float(part.strip().rstrip("x")))
        except ValueError:
            pass
    return min(vals) if vals else None


def fmt(x):
    return "-" if x is None else f"{x:.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("now")
    ap.add_argument("--floor", type=float, default=0.98)
    ap.add_argument("--keep", type=float, default=98.0, help="percent of an earlier gain to keep")
    a = ap.parse_args()
    try:
        old, new = load(a.before), load(a.now)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare-checks: {e}", file=sys.stderr)
        return 2
    print("| program | configuration | before | now | gain kept | verdict | replayed, note |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    findings = []
    for key, row in new.items():
        name, conf = key[0], " ".join(key[1:])
        was = old.get(key)
        s0, s1 = speed(was) if was else None, speed(row)
        kept = ""
        if s0 is not None and s1 is not None and s0 > 1.0:
            pct = 100.0 * (s1 - 1.0) / (s0 - 1.0)
            kept = f"{pct:.0f}%"
            if pct < a.keep:
                findings.append(f"lost: {name} {conf}: {fmt(s0)} before, {fmt(s1)} now ({kept} of its gain)")
        verdict = first(row, VERDICT)
        shown = "; ".join(v for v in (row.get(k, "") for k in SHOWN) if v)
        print(f"| {name} | {conf} | {fmt(s0)} | {fmt(s1)} | {kept} | {verdict} | {shown} |")
        if s1 is not None and s1 < a.floor:
            findings.append(f"below: {name} {conf}: {fmt(s1)} (under {a.floor:.2f}x)")
        if verdict and verdict not in GOOD and verdict != "skipped":
            findings.append(f"differs: {name} {conf}: {verdict}")
        if was is None:
            findings.append(f"new: {name} {conf}: no row before")
    for key in old:
        if key not in new:
            findings.append(f"gone: {key[0]} {' '.join(key[1:])}: no row now")
    print()
    for f in findings:
        print(f)
    print(f"compare-checks: {len(new)} rows now, {len(old)} before, {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
