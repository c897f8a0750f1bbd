#!/usr/bin/env python3
"""test_cgjit.py — the cgjit Python module (python/cgjit) on the fake CUDA driver.

Each test runs a small program in a fresh interpreter (so that every process starts with no
anchors) and checks what it printed: the values its GPU buffers held after each step, and
cgjit's counters and report. The programs do their GPU work with ctypes through the fake driver
(fakegpu.py). The environment says what to test:

  CGJIT_TEST_DRIVER  the fake driver, libcuda.so.1 (required)
  CGJIT_TEST_LIB     libcgjit.so to preload; unset: the installed wheel's own
  CGJIT_TEST_RUN     a cgjit-run launcher to test; unset: the cgjit-run on PATH, if any
  PYTHONPATH         where `import cgjit` finds the module (unset: the installed wheel)

Nothing here depends on durations: cgjit's cost model and governor are off (CGJIT_COST=0,
CGJIT_GOVERN=0), as in the C tests.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
DRIVER = os.environ.get("CGJIT_TEST_DRIVER", "")

import cgjit  # noqa: E402
from cgjit import _lib  # noqa: E402

LIB = os.environ.get("CGJIT_TEST_LIB") or _lib.bundled_library()

PRELUDE = """
import json, sys, warnings
sys.path.insert(0, %r)
import cgjit, fakegpu
gpu = fakegpu.Gpu()
N = 16
def out(**kw):
    print("RESULT " + json.dumps(kw))
""" % HERE


def child_env(preload=True, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CGJIT_") and k != "LD_PRELOAD"}
    # No implicit steps (CGJIT_STEP=off) unless a test asks: the set-up's calls before the first
    # marker would be a step of their own.
    env.update(CGJIT_DRIVER=DRIVER, CGJIT_STEP="off", CGJIT_COST="0", CGJIT_GOVERN="0", CGJIT_WARMUP_RUNS="0",
               CGJIT_BUILD_BACKGROUND="0", CGJIT_GRAPH_MIN_OPS="1", CGJIT_FUSE_BACKGROUND="0")
    # The children import the cgjit this process imported (the build tree's or the wheel's).
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cgjit.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if preload:
        env["LD_PRELOAD"] = LIB
    env.update(extra)
    return env


class Child:
    """A program's run: its status, output, and the RESULT lines it printed (as dicts)."""

    def __init__(self, argv, env):
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run(argv, env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
        self.rc, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr
        self.results = [json.loads(l[7:]) for l in p.stdout.splitlines() if l.startswith("RESULT ")]

    def why(self):
        return "status %d\nstdout:\n%s\nstderr:\n%s" % (self.rc, self.stdout, self.stderr)


def run(test, body, preload=True, launcher=None, **env):
    """Run PRELUDE + body as a script; the test fails unless it exits 0. Returns the Child."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="cgjit_test_", delete=False) as f:
        f.write(PRELUDE + textwrap.dedent(body))
        script = f.name
    try:
        argv = (launcher or [sys.executable]) + [script]
        c = Child(argv, child_env(preload, **env))
    finally:
        os.unlink(script)
    test.assertEqual(c.rc, 0, c.why())
    return c


def anchor(report, name):
    for a in report["anchors"]:
        if a["name"] == name:
            return a
    raise AssertionError("no anchor %r in %s" % (name, [a["name"] for a in report["anchors"]]))


class Sources(unittest.TestCase):
    """The module's copies of the C header's tables."""

    def header(self):
        path = os.path.join(SOURCE, "include", "cgjit.h")
        if not os.path.isfile(path):
            self.skipTest("no source tree beside the tests (%s)" % path)
        with open(path) as f:
            return f.read()

    def test_stats_fields_follow_the_header(self):
        text = self.header()
        body = text[text.index("#define CGJ_STATS_LIST(X)"):]
        body = body[:body.index("/* clang-format on */")]
        fields = re.findall(r"^\s*X\((\w+),", body, re.M)
        self.assertEqual(_lib.STATS_FIELDS, fields, "python/cgjit/_lib.py's STATS_FIELDS differs from CGJ_STATS_LIST")

    def test_version_follows_the_header(self):
        text = self.header()
        v = [re.search(r"#define CGJ_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
        self.assertEqual(cgjit.__version__, ".".join(v))

    def test_help_reads_as_documentation(self):
        for obj in (cgjit, cgjit.step, cgjit.off, cgjit.report, cgjit.stats, cgjit.governor, cgjit.version,
                    cgjit.enabled):
            self.assertTrue(obj.__doc__ and len(obj.__doc__) > 40, obj)


class JupyterKernel(unittest.TestCase):
    """python -m cgjit --install-kernel: a kernel spec whose interpreter starts under cgjit."""

    def install(self, *args, code=None, **env):
        d = tempfile.mkdtemp(prefix="cgjit_kernel_")
        self.addCleanup(shutil.rmtree, d, True)
        cmd = [sys.executable, "-c", code % d] if code else [sys.executable, "-m", "cgjit"] + list(args)
        p = subprocess.run(cmd, env=child_env(preload=False, JUPYTER_DATA_DIR=d, **env), capture_output=True,
                           text=True)
        return d, p

    def spec(self, path):
        with open(os.path.join(path, "kernels", "cgjit", "kernel.json")) as f:
            return json.load(f)

    def test_the_kernel_runs_ipykernel_through_python_m_cgjit(self):
        # The wheel's own library is found by the kernel as it is now; a build tree's is named.
        bundled = os.path.isfile(os.path.join(_lib.bundled_dir(), "libcgjit.so"))
        d, p = self.install("--install-kernel", **({} if bundled else {"CGJIT_LIB": LIB}))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("installed in " + os.path.join(d, "kernels", "cgjit"), p.stdout)
        k = self.spec(d)
        lib = [] if bundled else ["--lib", os.path.abspath(LIB)]
        self.assertEqual(k["argv"], [sys.executable, "-m", "cgjit"] + lib +
                         ["-m", "ipykernel_launcher", "-f", "{connection_file}"])
        self.assertEqual((k["display_name"], k["language"]), ("Python 3 (cgjit)", "python"))

    def test_lib_and_sys_prefix(self):
        d, p = self.install("--lib", LIB, "--install-kernel")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.spec(d)["argv"][3:5], ["--lib", os.path.abspath(LIB)])
        d, p = self.install("--install-kernel", CGJIT_LIB=LIB)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.spec(d)["argv"][3:5], ["--lib", os.path.abspath(LIB)], "$CGJIT_LIB, written down")
        d, p = self.install(code="import sys; sys.prefix = %r; from cgjit.__main__ import main; "
                                 "sys.exit(main(['--install-kernel', '--sys-prefix']))", CGJIT_LIB=LIB)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.spec(os.path.join(d, "share", "jupyter"))["argv"][1:3], ["-m", "cgjit"])

    def test_misuse_is_refused(self):
        d, p = self.install("--lib", "/nonexistent/libcgjit.so", "--install-kernel")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no libcgjit.so", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "kernels")))
        for args in (["--install-kernel", "train.py"], ["--sys-prefix", "train.py"]):
            d, p = self.install(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn("usage:", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "kernels")), args)


@unittest.skipUnless(DRIVER and os.path.isfile(DRIVER), "CGJIT_TEST_DRIVER (the fake libcuda.so.1) is not set")
class Preloaded(unittest.TestCase):
    def setUp(self):
        self.assertTrue(LIB and os.path.isfile(LIB), "no libcgjit.so: set CGJIT_TEST_LIB or install the wheel")

    def test_steps_replay_with_eager_results(self):
        c = run(self, """
            a, b = gpu.alloc(N), gpu.alloc(N)
            seen = []
            for i in range(8):
                with cgjit.step("fill"):
                    gpu.fill(a, i, N)
                    gpu.fill(b, 100 + i, N)
                seen.append([gpu.read(a, N)[0], gpu.read(b, N)[-1]])
            out(enabled=cgjit.enabled(), version=cgjit.version(), seen=seen, stats=cgjit.stats(),
                report=cgjit.report())
        """)
        r = c.results[0]
        self.assertTrue(r["enabled"])
        self.assertEqual(r["version"], cgjit.__version__)
        self.assertEqual(r["seen"], [[i, 100 + i] for i in range(8)])
        s = r["stats"]
        self.assertEqual(s["steps"], 8)
        self.assertEqual(s["steps_replayed"], 6, "runs 3 to 8 replay")
        self.assertGreater(s["graph_launches"], 0)
        a = anchor(r["report"], "fill")
        self.assertEqual(a["state"], "REPLAY")
        self.assertEqual(r["report"]["counters"], s)
        self.assertEqual(r["report"]["status"], "ok")

    def test_names_from_the_function_or_the_line(self):
        c = run(self, """
            a = gpu.alloc(N)
            @cgjit.step
            def bare(i):
                gpu.fill(a, i, N)
            class Model:
                @cgjit.step()
                def forward(self, i):
                    gpu.fill(a, i, N)
            m = Model()
            for i in range(4):
                bare(i)
                m.forward(i)
                line = sys._getframe().f_lineno + 1
                with cgjit.step():
                    gpu.fill(a, i, N)
            out(names=sorted(x["name"] for x in cgjit.report()["anchors"]), line=line)
        """)
        names = c.results[0]["names"]
        self.assertEqual(len(names), 3, names)
        self.assertEqual(names[:2], ["__main__.Model.forward", "__main__.bare"])
        self.assertRegex(names[2], r"^cgjit_test_\w+\.py:%d$" % c.results[0]["line"], "the with-statement's file:line")

    def test_an_inner_step_is_part_of_the_outer_one(self):
        c = run(self, """
            a, b = gpu.alloc(N), gpu.alloc(N)
            @cgjit.step("inner")
            def inner(i):
                gpu.fill(b, 2 * i, N)
            seen = []
            for i in range(6):
                with cgjit.step("outer"):
                    gpu.fill(a, i, N)
                    inner(i)
                    with cgjit.step("inner2"):
                        gpu.fill(a, i + 1, N)
                seen.append([gpu.read(a, N)[0], gpu.read(b, N)[0]])
            r = cgjit.report()
            out(seen=seen, stats=cgjit.stats(), names=[x["name"] for x in r["anchors"]],
                reasons=[x["code"] for x in r["reasons"]])
        """)
        r = c.results[0]
        self.assertEqual(r["seen"], [[i + 1, 2 * i] for i in range(6)])
        self.assertEqual(r["names"], ["outer"])
        self.assertEqual(r["stats"]["steps"], 6)
        self.assertEqual(r["stats"]["steps_replayed"], 4)
        self.assertNotIn("ABORT_NESTED", r["reasons"])

    def test_an_exception_aborts_the_step(self):
        c = run(self, """
            a, b = gpu.alloc(N), gpu.alloc(N)
            class Stop(Exception):
                pass
            @cgjit.step("work")
            def work(i, fail):
                gpu.fill(a, i, N)
                if fail:
                    raise Stop()
                gpu.fill(b, i, N)
            seen = []
            for i in range(12):
                try:
                    work(i, fail=i in (0, 5, 6))  # one while recording, two while replaying
                except Stop:
                    pass
                seen.append([gpu.read(a, N)[0], gpu.read(b, N)[0]])
            try:
                with cgjit.step("with"):
                    gpu.fill(a, 77, N)
                    raise KeyboardInterrupt
            except KeyboardInterrupt:
                seen.append([gpu.read(a, N)[0]])
            r = cgjit.report()
            out(seen=seen, stats=cgjit.stats(), work=[x for x in r["anchors"] if x["name"] == "work"][0],
                reasons={x["code"]: x["count"] for x in r["reasons"]})
        """)
        r = c.results[0]
        expect, last_b = [], 0
        for i in range(12):
            if i not in (0, 5, 6):
                last_b = i
            expect.append([i, last_b])
        self.assertEqual(r["seen"], expect + [[77]], "the work before the exception ran, none after it")
        self.assertEqual(r["stats"]["aborts"], 4)
        self.assertEqual(r["reasons"].get("ABORT_EXCEPTION"), 4)
        self.assertEqual(r["work"]["state"], "REPLAY", "an abort does not blacklist the anchor")
        self.assertGreaterEqual(r["stats"]["steps_replayed"], 4, "replay resumes after an abort")

    def test_off_runs_eagerly_untraced(self):
        c = run(self, """
            a = gpu.alloc(N)
            for i in range(4):
                with cgjit.step("s"):
                    gpu.fill(a, i, N)
            before = cgjit.stats()
            with cgjit.off():
                with cgjit.off():
                    gpu.fill(a, 41, N)
                gpu.fill(a, 42, N)
            value = gpu.read(a, N)[0]
            after = cgjit.stats()
            with cgjit.off():
                with cgjit.step("s"):  # eager inside off()
                    gpu.fill(a, 43, N)
            eager_step = gpu.read(a, N)[0]
            try:
                with cgjit.step("s"):
                    with cgjit.off():
                        pass
                raised = None
            except RuntimeError as e:
                raised = str(e)
            for i in range(3):
                with cgjit.step("s"):
                    gpu.fill(a, 50 + i, N)
            out(value=value, eager_step=eager_step, raised=raised, before=before, after=after,
                end=cgjit.stats(), last=gpu.read(a, N)[0])
        """)
        r = c.results[0]
        self.assertEqual(r["value"], 42)
        self.assertEqual(r["eager_step"], 43)
        self.assertIn("inside cgjit.step()", r["raised"] or "")
        for k in ("ops_recorded", "ops_absorbed", "steps", "graph_launches"):
            self.assertEqual(r["before"][k], r["after"][k], k)
        self.assertEqual(r["last"], 52)
        self.assertEqual(r["end"]["steps_replayed"] - r["after"]["steps_replayed"], 3,
                         "replay goes on after off() (the step off() raised in was aborted)")

    def test_off_ends_an_implicit_step(self):
        c = run(self, """
            a = gpu.alloc(N)
            vals = []
            for i in range(6):  # no markers: CGJIT_STEP=sync finds the steps
                gpu.fill(a, i, N)
                gpu.fill(a, i + 1, N)
                vals.append(gpu.read(a, N)[0])
                with cgjit.off():
                    gpu.fill(a, 99, N)
                    vals.append(gpu.read(a, N)[0])
            out(vals=vals, stats=cgjit.stats())
        """, CGJIT_STEP="sync")
        r = c.results[0]
        self.assertEqual(r["vals"], sum([[i + 1, 99] for i in range(6)], []))

    def test_disabled_is_loaded_but_not_enabled(self):
        c = run(self, """
            a = gpu.alloc(N)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                for i in range(3):
                    with cgjit.step("s"):
                        gpu.fill(a, i, N)
            out(enabled=cgjit.enabled(), version=cgjit.version(), value=gpu.read(a, N)[0],
                warnings=len(w), status=cgjit.report()["status"])
        """, CGJIT_DISABLE="1")
        r = c.results[0]
        self.assertEqual((r["enabled"], r["value"], r["warnings"], r["status"]), (False, 2, 0, "disabled"))
        self.assertEqual(r["version"], cgjit.__version__)

    def test_python_m_cgjit_preloads(self):
        env = {"CGJIT_LIB": LIB} if os.environ.get("CGJIT_TEST_LIB") else {}
        c = run(self, """
            import os
            a = gpu.alloc(N)
            for i in range(5):
                with cgjit.step("s"):
                    gpu.fill(a, i, N)
            out(enabled=cgjit.enabled(), replayed=cgjit.stats()["steps_replayed"], value=gpu.read(a, N)[0],
                argv=sys.argv[1:])
        """, preload=False, launcher=[sys.executable, "-m", "cgjit"], **env)
        self.assertEqual(c.results[0]["enabled"], True)
        self.assertEqual(c.results[0]["replayed"], 3)
        self.assertEqual(c.results[0]["value"], 4)

    def test_cgjit_run_preloads(self):
        exe = os.environ.get("CGJIT_TEST_RUN") or shutil.which("cgjit-run")
        if not exe:
            self.skipTest("no cgjit-run (CGJIT_TEST_RUN unset and none on PATH)")
        v = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(v.returncode, 0)
        self.assertIn(cgjit.__version__, v.stdout)
        launcher = [exe, "--lib", LIB, "--"] if os.environ.get("CGJIT_TEST_RUN") else [exe, "--"]
        c = run(self, """
            a = gpu.alloc(N)
            for i in range(4):
                with cgjit.step("s"):
                    gpu.fill(a, i, N)
            out(enabled=cgjit.enabled(), replayed=cgjit.stats()["steps_replayed"])
        """, preload=False, launcher=launcher + [sys.executable])
        self.assertEqual(c.results[0], {"enabled": True, "replayed": 2})


@unittest.skipUnless(DRIVER and os.path.isfile(DRIVER), "CGJIT_TEST_DRIVER (the fake libcuda.so.1) is not set")
class NotPreloaded(unittest.TestCase):
    def test_every_function_is_a_no_op_with_one_warning(self):
        c = run(self, """
            a = gpu.alloc(N)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                @cgjit.step
                def f(i):
                    gpu.fill(a, i, N)
                for i in range(3):
                    with cgjit.step("s"):
                        gpu.fill(a, i, N)
                    f(i + 10)
                    with cgjit.off():
                        gpu.fill(a, i + 20, N)
                try:
                    with cgjit.step():
                        raise ValueError
                except ValueError:
                    pass
            out(enabled=cgjit.enabled(), version=cgjit.version(), report=cgjit.report(), stats=cgjit.stats(),
                governor=cgjit.governor(), value=gpu.read(a, N)[0],
                warnings=[(x.category.__name__, str(x.message), x.filename) for x in w])
        """, preload=False)
        r = c.results[0]
        self.assertEqual([r[k] for k in ("enabled", "version", "report", "stats", "governor")],
                         [False, None, None, None, None])
        self.assertEqual(r["value"], 22)
        self.assertEqual(len(r["warnings"]), 1, r["warnings"])
        cat, msg, filename = r["warnings"][0]
        self.assertEqual(cat, "NotPreloadedWarning")
        self.assertIn("not preloaded", msg)
        self.assertRegex(os.path.basename(filename), r"^cgjit_test_", "the warning names the program's line")


if __name__ == "__main__":
    unittest.main(verbosity=2)
