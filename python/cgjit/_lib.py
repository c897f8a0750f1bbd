"""Finding libcgjit in this process, and its C API through ctypes.

libcgjit works only when it is loaded before the program's CUDA libraries (LD_PRELOAD, as
``python -m cgjit`` and ``cgjit-run`` do): it interposes ``dlsym`` and the driver's functions. So
the module never loads the library itself; it looks for a copy already in the process (the
global symbol scope first, then /proc/self/maps with RTLD_NOLOAD) and, where there is none,
every function of the module is a documented no-op.
"""
import ctypes
import os
from typing import List, Optional

# The fields of cgj_stats_t after its size, in the order of CGJ_STATS_LIST in include/cgjit.h
# (tests/python/test_cgjit.py compares the two). Fields are only ever appended.
STATS_FIELDS: List[str] = [
    "steps", "steps_replayed", "steps_eager", "ops_recorded", "ops_absorbed", "graph_launches",
    "params_patched", "bytes_staged", "staging_waits", "side_exits", "variant_switches",
    "slots_promoted", "aborts", "traces_built", "build_failures", "anchors_blacklisted",
    "pool_allocs", "pool_frees", "escape_exits", "pool_bytes", "lib_calls", "lib_absorbed",
    "lib_relearned", "anchors_evicted", "values_promoted", "steps_probed", "anchors_off",
    "collectives_absorbed", "collectives_stuck", "fusions", "ops_fused", "fusions_dropped",
    "verify_segments", "verify_divergences", "verify_unchecked", "params_patched_on_gpu",
    "patch_launches", "launch_host_ns", "steps_warmup", "builds_background", "steps_building",
    "launches_handed",
]

# Status codes of CGJ_STATUS_LIST.
OK, ERR_NOT_ACTIVE, ERR_NESTED, ERR_INVALID_ARG, ERR_NO_DRIVER, ERR_DISABLED = 0, 1, 2, 3, 4, 5


class Stats(ctypes.Structure):
    """cgj_stats_t: its size, then one uint64 per counter."""

    _fields_ = [("size", ctypes.c_uint64)] + [(f, ctypes.c_uint64) for f in STATS_FIELDS]


class GovernInfo(ctypes.Structure):
    """cgj_govern_info_t."""

    _fields_ = [
        ("size", ctypes.c_uint64),
        ("state", ctypes.c_int32),
        ("dormant", ctypes.c_int32),
        ("last_dormant", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("heartbeat", ctypes.c_char * 160),
        ("beats", ctypes.c_uint64),
        ("windows", ctypes.c_uint64),
        ("pairs_total", ctypes.c_uint64),
        ("judgements", ctypes.c_uint64),
        ("phases", ctypes.c_uint64),
        ("switches", ctypes.c_uint64),
        ("pairs", ctypes.c_uint64),
        ("ratio", ctypes.c_double),
        ("lo", ctypes.c_double),
        ("hi", ctypes.c_double),
        ("cur_pairs", ctypes.c_uint64),
        ("cur_ratio", ctypes.c_double),
        ("measure_dormant_ns", ctypes.c_uint64),
        ("dormant_ns", ctypes.c_uint64),
    ]


# Prototypes: name -> (restype, argtypes). A library too old to have one leaves it unset.
_PROTOS = {
    "cgj_version": (ctypes.c_char_p, []),
    "cgj_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "cgj_trace_begin": (ctypes.c_int, [ctypes.c_char_p]),
    "cgj_trace_end": (ctypes.c_int, []),
    "cgj_trace_abort": (ctypes.c_int, []),
    "cgj_trace_pause": (ctypes.c_int, []),
    "cgj_trace_resume": (ctypes.c_int, []),
    "cgj_stats_read": (ctypes.c_int, [ctypes.POINTER(Stats)]),
    "cgj_govern_read": (ctypes.c_int, [ctypes.POINTER(GovernInfo)]),
    "cgj_govern_state_name": (ctypes.c_char_p, [ctypes.c_int]),
    "cgj_report_json_buf": (ctypes.c_size_t, [ctypes.c_char_p, ctypes.c_size_t]),
    "cgj_mode_get": (ctypes.c_char_p, []),
}


def _loaded_paths() -> List[str]:
    """Files named libcgjit.so* mapped into this process (/proc/self/maps)."""
    found: List[str] = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if os.path.basename(path).startswith("libcgjit.so") and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def find() -> Optional[ctypes.CDLL]:
    """The libcgjit loaded in this process, or None: never loads one."""
    try:
        glob = ctypes.CDLL(None)
        glob.cgj_version  # noqa: B018 -- raises AttributeError where not loaded
        lib: Optional[ctypes.CDLL] = glob
    except (OSError, AttributeError):
        lib = None
    if lib is None:
        for path in _loaded_paths():
            try:
                lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)
                lib.cgj_version  # noqa: B018
                break
            except (OSError, AttributeError):
                lib = None
    if lib is None:
        return None
    for name, (res, args) in _PROTOS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        fn.restype, fn.argtypes = res, args
    return lib


def has(lib: Optional[ctypes.CDLL], name: str) -> bool:
    """Does lib export the function name?"""
    if lib is None:
        return False
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False


def bundled_dir() -> str:
    """The folder of the wheel's libcgjit.so and cgjit-run."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib")


def bundled_library() -> Optional[str]:
    """The libcgjit.so to preload: $CGJIT_LIB, else the wheel's own; None where neither exists."""
    env = os.environ.get("CGJIT_LIB")
    if env:
        return os.path.abspath(env)
    path = os.path.join(bundled_dir(), "libcgjit.so")
    return path if os.path.isfile(path) else None
