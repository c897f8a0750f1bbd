"""python -m cgjit [--lib PATH] SCRIPT [ARGS...] — run a Python program with libcgjit preloaded.

Re-executes this interpreter with libcgjit.so first in LD_PRELOAD, as cgjit-run does: the wheel's
own library, or --lib PATH, or $CGJIT_LIB. Everything after the options goes to the interpreter,
so ``python -m cgjit -m torch.distributed.run ...`` works too. cgjit's settings are CGJIT_*
environment variables (docs/configuration.md); ``cgjit-run --help`` lists them.
"""
import os
import sys
from typing import List, Optional

from . import _lib
from ._version import __version__

USAGE = "usage: python -m cgjit [--lib PATH] [--version] [--help] SCRIPT|-m MODULE|-c CODE [ARGS...]"


def preload_env(lib: str, env: Optional[dict] = None) -> dict:
    """env (os.environ) with lib first in LD_PRELOAD, once."""
    env = dict(os.environ if env is None else env)
    old = [p for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p]
    env["LD_PRELOAD"] = ":".join([lib] + [p for p in old if os.path.basename(p) != os.path.basename(lib)])
    return env


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    lib = None
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
        if opt == "--lib" and args:
            lib = os.path.abspath(args.pop(0))
        elif opt.startswith("--lib="):
            lib = os.path.abspath(opt[len("--lib="):])
        else:
            print("python -m cgjit: unknown option %s\n%s" % (opt, USAGE), file=sys.stderr)
            return 2
    if not args:
        print(USAGE, file=sys.stderr)
        return 2
    lib = lib or _lib.bundled_library()
    if not lib or not os.path.isfile(lib):
        print("python -m cgjit: no libcgjit.so (%s); install the wheel, or give --lib PATH or CGJIT_LIB"
              % (lib or "none bundled"), file=sys.stderr)
        return 2
    os.execve(sys.executable, [sys.executable] + args, preload_env(lib))
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
