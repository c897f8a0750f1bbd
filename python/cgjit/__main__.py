"""python -m cgjit [--lib PATH] SCRIPT [ARGS...] — run a Python program with libcgjit preloaded.

Re-executes this interpreter with libcgjit.so first in LD_PRELOAD, as cgjit-run does: the wheel's
own library, or --lib PATH, or $CGJIT_LIB. Everything after the options goes to the interpreter,
so ``python -m cgjit -m torch.distributed.run ...`` works too. cgjit's settings are CGJIT_*
environment variables (docs/configuration.md); ``cgjit-run --help`` lists them.

``python -m cgjit --install-kernel [--sys-prefix]`` makes a Jupyter kernel, "Python 3 (cgjit)",
whose interpreter starts under cgjit as above: ipykernel run through ``python -m cgjit``, with
this interpreter (and --lib where given). Its spec goes to $JUPYTER_DATA_DIR/kernels/cgjit, else
~/.local/share/jupyter/kernels/cgjit, or with --sys-prefix to this environment's
share/jupyter/kernels/cgjit (a virtual environment's own Jupyter finds it there).
"""
import json
import os
import sys
from typing import List, Optional

from . import _lib
from ._version import __version__

USAGE = ("usage: python -m cgjit [--lib PATH] [--version] [--help] SCRIPT|-m MODULE|-c CODE [ARGS...]\n"
         "       python -m cgjit [--lib PATH] --install-kernel [--sys-prefix]")
KERNEL_NAME = "cgjit"


def install_kernel(lib: Optional[str], sys_prefix: bool) -> int:
    """Write the Jupyter kernel spec (the module's docstring says where), the kernel preloading lib
    (None: the one it finds itself); 0, or 2 where it cannot."""
    if sys_prefix:
        base = os.path.join(sys.prefix, "share", "jupyter")
    else:
        base = os.environ.get("JUPYTER_DATA_DIR") or os.path.join(
            os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"), "jupyter")
    where = os.path.join(base, "kernels", KERNEL_NAME)
    argv = [sys.executable, "-m", "cgjit"] + (["--lib", lib] if lib else [])
    spec = {"argv": argv + ["-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (cgjit)", "language": "python", "metadata": {"debugger": True}}
    try:
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
            f.write("\n")
    except OSError as e:
        print("python -m cgjit: the kernel spec cannot be written in %s: %s" % (where, e), file=sys.stderr)
        return 2
    print("python -m cgjit: Jupyter kernel 'Python 3 (cgjit)' installed in %s" % where)
    import importlib.util
    if importlib.util.find_spec("ipykernel") is None:
        print("python -m cgjit: this interpreter has no ipykernel, which the kernel runs: pip install ipykernel",
              file=sys.stderr)
    return 0


def preload_env(lib: str, env: Optional[dict] = None) -> dict:
    """env (os.environ) with lib first in LD_PRELOAD, once."""
    env = dict(os.environ if env is None else env)
    old = [p for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p]
    env["LD_PRELOAD"] = ":".join([lib] + [p for p in old if os.path.basename(p) != os.path.basename(lib)])
    return env


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    lib = None
    kernel = sys_prefix = False
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt == "--":
            break
        if opt in ("--help", "-h"):
            print(USAGE)
            print(__doc__.split("\n", 2)[2].strip())
            return 0
        if opt == "--version":
            print("cgjit %s" % __version__)
            return 0
        if opt == "--install-kernel":
            kernel = True
        elif opt == "--sys-prefix":
            sys_prefix = True
        elif opt == "--lib" and args:
            lib = os.path.abspath(args.pop(0))
        elif opt.startswith("--lib="):
            lib = os.path.abspath(opt[len("--lib="):])
        else:
            print("python -m cgjit: unknown option %s\n%s" % (opt, USAGE), file=sys.stderr)
            return 2
    if bool(args) == kernel or (sys_prefix and not kernel):  # a program, or the kernel: one of them
        print(USAGE, file=sys.stderr)
        return 2
    found = lib or _lib.bundled_library()
    if not found or not os.path.isfile(found):
        print("python -m cgjit: no libcgjit.so (%s); install the wheel, or give --lib PATH or CGJIT_LIB"
              % (found or "none bundled"), file=sys.stderr)
        return 2
    if kernel:  # one named by $CGJIT_LIB goes into the spec: Jupyter starts kernels with its own environment
        return install_kernel(lib or (found if os.environ.get("CGJIT_LIB") else None), sys_prefix)
    os.execve(sys.executable, [sys.executable] + args, preload_env(found))
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
