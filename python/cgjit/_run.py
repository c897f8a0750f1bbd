"""The console script cgjit-run: the wheel's C launcher (tools/cgjit_run.c), which finds the
libcgjit.so beside it. ``cgjit-run --help`` lists its options."""
import os
import sys

from . import _lib


def main() -> int:
    exe = os.path.join(_lib.bundled_dir(), "cgjit-run")
    if not os.path.isfile(exe):
        print("cgjit-run: the launcher is not in this installation (%s)" % exe, file=sys.stderr)
        return 2
    if not os.access(exe, os.X_OK):
        os.chmod(exe, 0o755)
    os.execv(exe, [exe] + sys.argv[1:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
