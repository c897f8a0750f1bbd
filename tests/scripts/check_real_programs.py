#!/usr/bin/env python3
"""check_real_programs.py ROOT — the programs of tests/real, read without running them (this
machine may have no torch): each parses, and none binds again a name it imports from _common
(`for step in ...` over an imported `step` fails at the first call, on the GPU machine)."""
import ast
import glob
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
bad = []
files = sorted(glob.glob(os.path.join(root, "tests", "real", "**", "*.py"), recursive=True))
for path in files:
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "_common"
                for a in n.names}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in imported:
            bad.append(f"{os.path.relpath(path, root)}:{n.lineno}: '{n.id}', imported from _common, is bound again")
for b in bad:
    print(b)
if not files:
    print("no tests/real/*.py under " + root)
    sys.exit(1)
print(f"check_real_programs: {len(files)} programs, {len(bad)} names bound again")
sys.exit(1 if bad else 0)
