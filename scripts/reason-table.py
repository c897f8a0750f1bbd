"""reason-table.py SOURCE_DIR [--check FILE] — docs/troubleshooting.md from the reason table.

Every way a step leaves the fast path is a row of ir/reason.h: X(CODE, "message", "what the user
can do"), in groups marked by comments. This prints the troubleshooting page: each group under its
heading, each code with its message and its hint, in the table's order (the codes' order). With
--check FILE it compares FILE with what it would print and exits 1 where they differ (the
check_troubleshooting test), so that the page never says what the code no longer does.
"""
import os
import re
import sys

STRING = r'"((?:[^"\\]|\\.)*)"'
ROW = re.compile(r"X\((\w+),\s*((?:" + STRING + r"\s*)+),\s*((?:" + STRING + r"\s*)+)\)")
COMMENT = re.compile(r"/\*\s*(.*?)\s*\*/")

INTRO = """# Troubleshooting: every reason, and what to do

Why: when a step runs eagerly, a user wants to know why and what would make it replay. What:
every reason code cgjit reports, in the order of its table (`ir/reason.h`), with the message the
report prints and what the user can do. The report's `top reasons` list, `cgj_trace_info`'s
`reason_code` (`cgj_reason_name()`, `cgj_reason_hint()`) and the JSON report's `reasons` use these
codes. A hint "nothing to do" marks a reason that costs nothing or cannot be helped.

This page is generated: `python3 scripts/reason-table.py . > docs/troubleshooting.md` (a test
checks that it is current).
"""


def literal(chunk):
    return "".join(bytes(s, "utf-8").decode("unicode_escape") for s in re.findall(STRING, chunk))


def rows(src):
    text = open(os.path.join(src, "ir/reason.h"), encoding="utf-8").read()
    start = text.index("#define CGJ_REASON_LIST(X)")
    end = start
    while text[end:text.index("\n", end)].rstrip().endswith("\\"):  # the macro's lines
        end = text.index("\n", end) + 1
    end = text.index("\n", end)
    body = text[start:end].replace("\\\n", "\n")
    out, pos = [], 0
    events = sorted([(m.start(), "group", m.group(1)) for m in COMMENT.finditer(body)] +
                    [(m.start(), "row", m) for m in ROW.finditer(body)], key=lambda e: e[0])
    for _, kind, v in events:
        if kind == "group":
            out.append(("group", v))
        else:
            out.append(("row", (v.group(1), literal(v.group(2)), literal(v.group(4)))))
    return out


def cell(s):
    return s.replace("|", "\\|") if s else ""


def page(src):
    lines = [INTRO]
    open_table = False
    for kind, v in rows(src):
        if kind == "group":
            lines.append(f"\n## {v[0].upper() + v[1:]}\n")
            lines.append("| code | what happened | what to do |")
            lines.append("| --- | --- | --- |")
            open_table = True
        elif v[0] != "NONE":
            if not open_table:
                lines.append("| code | what happened | what to do |")
                lines.append("| --- | --- | --- |")
                open_table = True
            lines.append(f"| `{v[0]}` | {cell(v[1])} | {cell(v[2]) or 'nothing to do'} |")
    return "\n".join(lines) + "\n"


def main():
    args = sys.argv[1:]
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--check"):
        print("usage: reason-table.py SOURCE_DIR [--check FILE]", file=sys.stderr)
        return 2
    text = page(args[0])
    if len(args) == 1:
        sys.stdout.write(text)
        return 0
    have = open(args[2], encoding="utf-8").read()
    if have != text:
        print(f"reason-table: {args[2]} is not the reason table of ir/reason.h; regenerate it with "
              f"python3 scripts/reason-table.py {args[0]} > {args[2]}")
        return 1
    print(f"reason-table: {args[2]} holds every reason of ir/reason.h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
