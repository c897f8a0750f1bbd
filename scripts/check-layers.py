#!/usr/bin/env python3
"""check-layers.py SOURCE_DIR BUILD_DIR — the library's dependency order, checked.

docs/design.md's layout: runtime -> tracer -> {fusion, allocator} -> graphs -> ir -> base. A file may
use its own folder and the folders below it; never a folder above, never a sibling (fusion and
allocator do not use each other). This script checks it twice:

  - includes: every `#include "folder/file.h"` of every library source and header;
  - calls: every symbol an object file of the build leaves undefined (functions called and data
    read, `nm -P`) is looked up among the symbols the other objects define.

and that neither graph has a cycle between files (Tarjan's strongly connected components), so
the house reads one way: from runtime/ down to base/. It also checks that every row of the
reason table (ir/reason.h) is used somewhere in the library, by its name or through a macro that
pastes it (`#define DIFF(code) ... CGJ_REASON_DIFF_##code` used as `DIFF(KERNEL)`): a row
nothing uses promises the user a reason they will never see (LuaJIT's lj_traceerr.h ends with
such a check). Then the house:

  - sizes: no source file of the library or the tools (SIZED folders: .c, .h, .cu) is over
    MAX_LINES lines (files about one thing);
  - links: every markdown link of the repository's documents (README.md, docs/, every tracked
    .md) to a file or an anchor inside the repository resolves: the file exists, and the anchor
    is a heading of it (as GitHub makes anchors of headings) or an explicit <a id/name>;
  - stale references: no source, script or document cites a DESIGN.md (the design doc is
    docs/design.md) or a numbered issue of a tracker the repository does not have.

Prints each violation and exits 1, or one line of figures and exits 0.
"""
import os
import re
import subprocess
import sys

RANK = {"base": 0, "ir": 1, "graphs": 2, "allocator": 3, "fusion": 3, "tracer": 4, "runtime": 5}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z]+)/([A-Za-z0-9_]+\.h)"', re.M)


def allowed(user, used):
    """May a file of folder `user` use folder `used`?"""
    return used == user or RANK[used] < RANK[user]


def sccs(graph):
    """Strongly connected components with more than one node, or a self loop (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def library_files(src):
    files = []
    for folder in RANK:
        d = os.path.join(src, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                files.append(folder + "/" + name)
    return files


def check_includes(src, files, problems):
    graph = {}
    for f in files:
        text = open(os.path.join(src, f), encoding="utf-8").read()
        for folder, header in INCLUDE.findall(text):
            if folder not in RANK:
                continue
            target = folder + "/" + header
            graph.setdefault(f, set()).add(target)
            if not allowed(f.split("/")[0], folder):
                problems.append(f"include upward: {f} includes {target}")
    for comp in sccs(graph):
        problems.append("include cycle: " + " <-> ".join(comp))
    return sum(len(v) for v in graph.values())


def symbols(obj):
    """(defined globals, undefined) of an object file."""
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() or kind in ("u", "v", "w"):
            defined.add(name)
    return defined, undefined


def check_calls(src, build, files, problems):
    objs = {}
    for f in files:
        if not f.endswith(".c"):
            continue
        folder, name = f.split("/")
        obj = os.path.join(build, folder, "CMakeFiles", "cgj_" + folder + ".dir", name + ".o")
        if not os.path.exists(obj):
            problems.append(f"no object file for {f} (build first): {obj}")
            continue
        objs[f] = symbols(obj)
    owner = {}
    for f, (defined, _) in objs.items():
        for s in defined:
            owner.setdefault(s, f)
    graph = {}
    for f, (_, undefined) in objs.items():
        for s in sorted(undefined):
            g = owner.get(s)
            if not g or g == f:
                continue
            graph.setdefault(f, set()).add(g)
            if not allowed(f.split("/")[0], g.split("/")[0]):
                problems.append(f"call upward: {f} uses {s} of {g}")
    for comp in sccs(graph):
        problems.append("call cycle: " + " <-> ".join(comp))
    return len(objs), sum(len(v) for v in graph.values())


REASON_ROW = re.compile(r"^\s*X\(([A-Z0-9_]+),", re.M)
PASTING = re.compile(r"#\s*define\s+(\w+)\((\w+)[^)]*\)((?:[^\n]*\\\n)*[^\n]*)")


def check_reasons(src, files, problems):
    rows = REASON_ROW.findall(open(os.path.join(src, "ir/reason.h"), encoding="utf-8").read())
    used = set()
    for f in files:
        if f == "ir/reason.h":
            continue
        text = open(os.path.join(src, f), encoding="utf-8").read()
        used.update(re.findall(r"\bCGJ_REASON_([A-Z0-9_]+)\b", text))
        for name, arg, body in PASTING.findall(text):
            m = re.search(r"CGJ_REASON_(\w*)##\s*" + arg + r"\b", body)
            if m:
                used.update(m.group(1) + s for s in re.findall(r"\b" + name + r"\(\s*([A-Z0-9_]+)", text))
    for r in rows:
        if r not in used:
            problems.append(f"reason row {r} (ir/reason.h) is used nowhere")
    return len(rows)


SIZED = ("base", "ir", "graphs", "allocator", "fusion", "tracer", "runtime", "tools", "include")
MAX_LINES = 800


def check_sizes(src, problems):
    n = 0
    for folder in SIZED:
        d = os.path.join(src, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h", ".cu")):
                continue
            n += 1
            with open(os.path.join(d, name), encoding="utf-8") as f:
                lines = sum(1 for _ in f)
            if lines > MAX_LINES:
                problems.append(f"{folder}/{name} has {lines} lines, over the {MAX_LINES}-line bound: "
                                "split it by concern")
    return n


SKIP_DIRS = ("Testing", "__pycache__", "node_modules")


def tracked(src, patterns):
    """The repository's files matching the git pathspecs, or, outside a git checkout, every such
    file of the tree but for hidden, build and output folders."""
    try:
        out = subprocess.run(["git", "-C", src, "ls-files", "-z", "--"] + list(patterns), check=True,
                             capture_output=True, text=True).stdout
        return sorted(f for f in out.split("\0") if f and os.path.isfile(os.path.join(src, f)))
    except (OSError, subprocess.CalledProcessError):
        pass
    exts = tuple(p.lstrip("*") for p in patterns)
    found = []
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d not in SKIP_DIRS]
        for name in names:
            if name.endswith(exts):
                found.append(os.path.relpath(os.path.join(root, name), src))
    return sorted(found)


FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)[^`].*?\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)


def slug(heading):
    """GitHub's anchor of a heading: its text (markup dropped) lower-cased, every character but
    letters, digits, '_', '-' and spaces dropped, spaces made '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache):
    if path not in cache:
        text = open(path, encoding="utf-8").read()
        body = FENCE.sub("", text)
        seen, names = {}, set(HTML_ANCHOR.findall(text))
        for h in HEADING.findall(body):
            base = slug(h)
            k = seen.get(base, 0)
            seen[base] = k + 1
            names.add(base if k == 0 else f"{base}-{k}")
        cache[path] = names
    return cache[path]


def check_links(src, problems):
    docs = tracked(src, ["*.md"])
    files = set(tracked(src, ["*"]))  # a link must reach what a fresh clone has, not a build's output
    present = files | {os.path.dirname(f) for f in files}
    for d in list(present):
        while d:
            d = os.path.dirname(d)
            present.add(d)
    cache, nlinks = {}, 0
    root = os.path.realpath(src)
    for doc in docs:
        text = open(os.path.join(src, doc), encoding="utf-8").read()
        body = CODE_SPAN.sub("", FENCE.sub("", text))
        for target in INLINE_LINK.findall(body) + REF_LINK.findall(body):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
                continue  # a URL (https:, mailto:): outside the repository
            nlinks += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(os.path.join(src, doc)), path)) if path \
                else os.path.join(src, doc)
            if not os.path.realpath(dest).startswith(root + os.sep) and os.path.realpath(dest) != root:
                problems.append(f"{doc}: link {target} leaves the repository")
            elif not os.path.exists(dest) or os.path.relpath(dest, src).replace(os.sep, "/") not in present \
                    and os.path.relpath(dest, src) != ".":
                problems.append(f"{doc}: link {target}: no file {os.path.relpath(dest, src)} in the repository")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest, cache):
                problems.append(f"{doc}: link {target}: no heading or anchor '{anchor}' in "
                                f"{os.path.relpath(dest, src)}")
    return len(docs), nlinks


STALE = [
    (re.compile(r"(?<![\w/.])DESIGN\.md"), "cites DESIGN.md, which the repository does not have (docs/design.md)"),
    (re.compile(r"\b[Ii]ssues? #?\d+(?:'s|[,.:;)]|\s+(?:item|point)\b|$)|\(#\d+\)|\b[Ii]ssue #\d|\(issue[:,)]"),
     "cites a numbered issue of a tracker the repository does not have: say the reason instead"),
]
STALE_FILES = ["*.c", "*.h", "*.cu", "*.py", "*.sh", "*.md", "*.txt", "*.cmake", "*.in", "*.map"]


def check_stale(src, problems):
    this = os.path.relpath(os.path.realpath(__file__), os.path.realpath(src))  # names the patterns
    files = [f for f in tracked(src, STALE_FILES) if f != this]
    for f in files:
        with open(os.path.join(src, f), encoding="utf-8", errors="replace") as fh:
            for no, line in enumerate(fh, 1):
                for pattern, why in STALE:
                    if pattern.search(line):
                        problems.append(f"{f}:{no}: {why}")
    return len(files)


def main():
    if len(sys.argv) != 3:
        print("usage: check-layers.py SOURCE_DIR BUILD_DIR", file=sys.stderr)
        return 2
    src, build = sys.argv[1], sys.argv[2]
    files = library_files(src)
    problems = []
    nincl = check_includes(src, files, problems)
    nobj, ncalls = check_calls(src, build, files, problems)
    nreasons = check_reasons(src, files, problems)
    nsized = check_sizes(src, problems)
    ndocs, nlinks = check_links(src, problems)
    nstale = check_stale(src, problems)
    for p in problems:
        print("check-layers: " + p)
    if problems:
        return 1
    print(f"check-layers: {len(files)} files, {nincl} includes, {nobj} objects, {ncalls} file-to-file "
          f"call edges: no upward use, no cycle; {nreasons} reason rows, each used; {nsized} sources, "
          f"none over {MAX_LINES} lines; {nlinks} links in {ndocs} documents, each resolved; "
          f"{nstale} files without a stale reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
