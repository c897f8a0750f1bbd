"""cgjit for Python: mark the steps of a CUDA program, and read what cgjit did with them.

cgjit is a trace-based JIT runtime for CUDA programs: loaded into a process ahead of the CUDA
libraries (``python -m cgjit train.py`` or ``cgjit-run -- python train.py``), it records one step
of the program's GPU work at the CUDA driver API and replays later steps as CUDA graphs, results
bitwise equal to eager execution. Without markers it guesses where a step is (the work between
two host synchronizations); this module says it exactly::

    import cgjit

    for batch in loader:
        with cgjit.step("train"):        # or decorate the step's function: @cgjit.step()
            loss = model(batch).sum()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    print(cgjit.report()["summary"])

Functions:
  step(name=None)   one step: a context manager and a decorator (cgj_trace_begin/end)
  off()             a context manager: calls inside run eagerly, untraced (cgj_trace_pause/resume)
  report()          the report as a dict (docs/report-schema.json), None without libcgjit
  stats()           the process-wide counters as a dict, None without libcgjit
  governor()        the process-level governor's figures as a dict, None without libcgjit
  version()         the version of the libcgjit loaded, None without libcgjit
  enabled()         is libcgjit loaded into this process and active?

Without libcgjit preloaded (a plain ``python train.py``) every function works: step() and off()
do nothing (one warning, the first time), report(), stats(), governor() and version() return
None and enabled() returns False. The module never loads libcgjit itself: loaded late, it could
not see the CUDA libraries' calls.

Steps do not nest, as in C: a step() entered inside another on the same thread is part of the
outer one and does nothing of its own (so a decorated function may call another). An exception
that leaves a step ends it as an abort (cgj_trace_abort): the work the step issued runs eagerly,
nothing of it is recorded or replayed, and the report names the reason ABORT_EXCEPTION.
"""
import functools
import json
import os
import sys
import threading
import warnings
from types import TracebackType
from typing import Any, Callable, Dict, Optional, Type, TypeVar, Union, overload

from . import _lib
from ._version import __version__

__all__ = ["step", "off", "report", "stats", "governor", "version", "enabled", "NotPreloadedWarning", "__version__"]

F = TypeVar("F", bound=Callable[..., Any])


class NotPreloadedWarning(RuntimeWarning):
    """cgjit's steps do nothing in this process: libcgjit is not preloaded."""


_LIB = _lib.find()
_warned = False
_local = threading.local()  # depth: this thread's open step() levels; paused: its off() levels


def _warn_once(stacklevel: int) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(
        "cgjit: libcgjit is not preloaded in this process, so cgjit.step() and cgjit.off() do "
        "nothing; run the program with `python -m cgjit script.py` or `cgjit-run -- python "
        "script.py`", NotPreloadedWarning, stacklevel=stacklevel + 1)


def _depth() -> int:
    return getattr(_local, "depth", 0)


def _strerror(st: int) -> str:
    if _LIB is None:
        return "status %d" % st
    return _LIB.cgj_strerror(st).decode("utf-8", "replace")


def _caller_name(depth: int) -> str:
    """file:line of the frame `depth` levels above the caller: a with-statement's step name."""
    frame = sys._getframe(depth + 1)
    return "%s:%d" % (os.path.basename(frame.f_code.co_filename), frame.f_lineno)


class step:
    """One step of the program: ``with cgjit.step(): ...`` or ``@cgjit.step()`` on a function.

    Steps with the same name share one trace: run 1 runs eagerly (a warm-up, CGJIT_WARMUP_RUNS),
    run 2 runs eagerly and is recorded, run 3 runs eagerly and is compared with it, and from
    run 4 on the step is replayed as CUDA graphs where it does the same again
    (cgj_trace_begin / cgj_trace_end).

    name: the anchor's name in the report. None: for a decorator, the function's module and
    qualified name ("train.Trainer.step"); for a with-statement, its file and line
    ("train.py:42"). Both stay the same from one run of the program to the next.

    Steps do not nest: one entered inside another on the same thread does nothing (its work is
    part of the outer step). An exception (any BaseException, KeyboardInterrupt too) that leaves
    the outermost step ends it with cgj_trace_abort: its work runs eagerly, nothing of it is
    recorded or replayed; the exception propagates. Inside ``cgjit.off()`` a step runs eagerly.
    Without libcgjit preloaded, a step does nothing (one NotPreloadedWarning per process).

    A step begins and ends on one thread; each thread has steps of its own.
    """

    @overload
    def __new__(cls, name: F) -> F: ...  # @cgjit.step without parentheses

    @overload
    def __new__(cls, name: Optional[str] = None) -> "step": ...

    def __new__(cls, name: Union[str, Callable[..., Any], None] = None) -> Any:
        if callable(name):  # @cgjit.step, no parentheses: the decorated function
            inst = super().__new__(cls)
            inst._setup(None, "")
            return inst(name)
        return super().__new__(cls)

    def __init__(self, name: Optional[str] = None) -> None:
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError("cgjit.step: the name must be a non-empty string")
        self._setup(name, name if name is not None else _caller_name(1))

    def _setup(self, name: Optional[str], where: str) -> None:
        self.name: Optional[str] = name
        self._where = where
        self._began = threading.local()  # per thread: did each open level begin a C step?

    def _enter(self, name: str) -> None:
        depth = _depth()
        _local.depth = depth + 1
        stack = getattr(self._began, "stack", None)
        if stack is None:
            stack = self._began.stack = []
        if depth or _LIB is None:
            if _LIB is None:
                _warn_once(3)  # _enter, __enter__ or the decorator's wrapper, the program
            stack.append(False)
            return
        st = _LIB.cgj_trace_begin(name.encode("utf-8", "surrogateescape"))
        if st == _lib.ERR_NESTED:
            warnings.warn("cgjit.step(%r): a step begun outside Python (cgj_trace_begin) is open on "
                          "this thread; it ends here and the thread runs eagerly" % name, RuntimeWarning, 3)
        stack.append(st != _lib.ERR_INVALID_ARG)

    def _exit(self, failed: bool) -> None:
        _local.depth = _depth() - 1
        if not self._began.stack.pop():
            return
        (_LIB.cgj_trace_abort if failed else _LIB.cgj_trace_end)()

    def __enter__(self) -> "step":
        self._enter(self._where)
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> bool:
        self._exit(exc_type is not None)
        return False

    def __call__(self, fn: F) -> F:
        """Decorate fn: every call of it is one step."""
        name = self.name or "%s.%s" % (getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", repr(fn)))

        @functools.wraps(fn)
        def stepped(*args: Any, **kwargs: Any) -> Any:
            self._enter(name)
            ok = False
            try:
                result = fn(*args, **kwargs)
                ok = True
                return result
            finally:
                self._exit(not ok)

        return stepped  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "cgjit.step(%r)" % (self.name or self._where)


class off:
    """``with cgjit.off(): ...``: the calls inside run eagerly, untraced (cgj_trace_pause/resume).

    For work that should never be part of a step: an evaluation pass, a checkpoint, a
    one-off. The thread's calls go straight to the driver until the block ends; blocks nest. A
    step cgjit found by itself (CGJIT_STEP) ends where the block begins. Inside a step() the
    block raises RuntimeError (end the step first: a step cannot hold untraced work). A step()
    inside the block runs eagerly. Without libcgjit preloaded, it does nothing (one warning).
    """

    def __enter__(self) -> "off":
        if _LIB is None or not _lib.has(_LIB, "cgj_trace_pause"):
            if _LIB is None:
                _warn_once(2)
            _local.paused = getattr(_local, "paused", 0) + 1
            return self
        if _depth():
            raise RuntimeError("cgjit.off() inside cgjit.step(): end the step first")
        st = _LIB.cgj_trace_pause()
        if st != _lib.OK:
            raise RuntimeError("cgjit.off(): a step begun with cgj_trace_begin is open on this thread (%s)"
                               % _strerror(st))
        _local.paused = getattr(_local, "paused", 0) + 1
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> bool:
        _local.paused -= 1
        if _LIB is not None and _lib.has(_LIB, "cgj_trace_resume"):
            _LIB.cgj_trace_resume()
        return False


def report() -> Optional[Dict[str, Any]]:
    """The report as a dict, as CGJIT_REPORT=json:FILE writes it (schema: docs/report-schema.json).

    Keys: schema_version, cgjit_version, pid, status ("ok", "disabled", "no_driver",
    "not_started"), summary (steps, steps_replayed, share_replayed, top_reasons with what to do),
    governor, counters, reasons and anchors (each with its state, runs, replays and reason).
    None where libcgjit is not preloaded.
    """
    if _LIB is None or not _lib.has(_LIB, "cgj_report_json_buf"):
        return None
    import ctypes

    size = 1 << 16
    for _ in range(8):  # the report may grow between two calls
        buf = ctypes.create_string_buffer(size)
        need = _LIB.cgj_report_json_buf(buf, size)
        if need == 0:
            return None
        if need <= size:
            return json.loads(buf.value.decode("utf-8", "replace"))
        size = need + 4096
    return None


def stats() -> Optional[Dict[str, int]]:
    """The process-wide counters (cgj_stats_read): steps, steps_replayed, steps_eager, aborts, ...

    Each is documented in include/cgjit.h (CGJ_STATS_LIST). None where libcgjit is not preloaded.
    """
    if _LIB is None:
        return None
    import ctypes

    s = _lib.Stats()
    s.size = ctypes.sizeof(s)
    if _LIB.cgj_stats_read(ctypes.byref(s)) != _lib.OK:
        return None
    return {f: int(getattr(s, f)) for f in _lib.STATS_FIELDS}


def governor() -> Optional[Dict[str, Any]]:
    """The governor's figures (cgj_govern_read): is the process faster with cgjit active or dormant?

    Keys: state (its name: "off", "learning", "measuring", "active", "dormant", or "its step's
    cost model" where one marked step is the whole program, ...), dormant,
    heartbeat (the step that paces it), judgements, ratio (speed active over dormant, with
    ratio_low and ratio_high its 95% bounds), windows, pairs, switches, dormant_ns.
    None where libcgjit is not preloaded.
    """
    if _LIB is None or not _lib.has(_LIB, "cgj_govern_read"):
        return None
    import ctypes

    g = _lib.GovernInfo()
    g.size = ctypes.sizeof(g)
    if _LIB.cgj_govern_read(ctypes.byref(g)) != _lib.OK:
        return None
    out: Dict[str, Any] = {f: getattr(g, f) for f, _ in _lib.GovernInfo._fields_ if f not in ("size", "reserved")}
    out["state"] = _LIB.cgj_govern_state_name(g.state).decode()
    out["heartbeat"] = g.heartbeat.decode("utf-8", "replace")
    out["dormant"] = bool(g.dormant)
    out["last_dormant"] = bool(g.last_dormant)
    out["ratio_low"], out["ratio_high"] = out.pop("lo"), out.pop("hi")
    return out


def version() -> Optional[str]:
    """The version of the libcgjit loaded ("MAJOR.MINOR.PATCH"), None where none is preloaded.

    The package's own version is cgjit.__version__.
    """
    return None if _LIB is None else _LIB.cgj_version().decode()


_enabled: Optional[bool] = None


def enabled() -> bool:
    """Is libcgjit loaded into this process and active (driver found, not CGJIT_DISABLE=1)?

    False where it is not preloaded. Asking starts libcgjit if nothing has yet (it loads the
    CUDA driver library; no CUDA context is made).
    """
    global _enabled
    if _LIB is None:
        return False
    if _enabled is None:
        _LIB.cgj_mode_get()  # starts libcgjit
        r = report()
        status = r.get("status") if r else None
        if status in ("ok", "disabled", "no_driver"):
            _enabled = status == "ok"
        return status == "ok"
    return _enabled
