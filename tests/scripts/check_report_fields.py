"""check_report_fields.py SOURCE_DIR — the per-anchor figures agree wherever they are written.

cgj_trace_info_t (include/cgjit.h) is filled by tracer/anchor.c and runtime/report_read.c,
written per anchor by runtime/report_json.c and described by docs/report-schema.json. This
checks, from the sources:
  - every field of cgj_trace_info_t is filled by the library (assigned, counted, or written
    into by a function it is passed to);
  - every figure report_json.c writes from a cgj_trace_info_t field (`num(f, "KEY", i->FIELD)`)
    has the field's own name as its key;
  - the keys report_json.c writes for an anchor, the schema's anchor properties and the schema's
    required anchor keys are the same three sets.
Prints each disagreement and exits 1, or one line and exits 0.
"""
import json
import os
import re
import sys


def struct_fields(header, name):
    i = header.index("typedef struct " + name[:-2])
    body = header[i:header.index("} " + name + ";", i)]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return re.findall(r"^\s*(?:const\s+)?\w+\s+\**\s*(\w+)(?:\[[^\]]*\])?\s*;", body, re.M)


def function_body(text, signature):
    i = text.index(signature)
    j = text.index("\n}\n", i)
    return text[i:j]


def main():
    if len(sys.argv) != 2:
        print("usage: check_report_fields.py SOURCE_DIR", file=sys.stderr)
        return 2
    src = sys.argv[1]
    read = lambda p: open(os.path.join(src, p), encoding="utf-8").read()
    problems = []
    fields = struct_fields(read("include/cgjit.h"), "cgj_trace_info_t")
    fill = read("tracer/anchor.c") + read("runtime/report_read.c")
    filled = set(re.findall(r"\bout->(\w+)\s*(?:=[^=]|\+\+|\+=|-=|,|\))", fill))
    for f in fields:
        if f != "size" and f not in filled:
            problems.append(f"cgj_trace_info_t.{f} is filled nowhere (tracer/anchor.c, runtime/report_read.c)")
    js = read("runtime/report_json.c")
    for key, field in re.findall(r'\b(?:num|real|str)\(f, "(\w+)", i->(\w+)\)', js):
        if key != field:
            problems.append(f'report_json.c writes i->{field} as "{key}": keys are the fields\' names')
    written = set()
    for sig in ("static void times(", "static void anchor("):
        body = function_body(js, sig)
        written.update(re.findall(r'\b(?:num|real|str|kept_reason)\(f, "(\w+)"', body))
        written.update(re.findall(r'cgj_json_key\(f, "(\w+)"', body))
    schema = json.loads(read("docs/report-schema.json"))
    anchor = schema["definitions"]["anchor"]
    props, required = set(anchor["properties"]), set(anchor["required"])
    for k in sorted(written - props):
        problems.append(f'report_json.c writes "{k}" for an anchor; the schema has no such property')
    for k in sorted(props - written):
        problems.append(f'the schema describes "{k}" for an anchor; report_json.c never writes it')
    for k in sorted(props ^ required):
        problems.append(f'the schema\'s anchor property "{k}" is not required, or required without a property')
    for p in problems:
        print("check_report_fields: " + p)
    if problems:
        return 1
    print(f"check_report_fields: {len(fields)} fields of cgj_trace_info_t filled; {len(written)} anchor keys written, "
          "described and required alike")
    return 0


if __name__ == "__main__":
    sys.exit(main())
