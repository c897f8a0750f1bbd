"""_common — what the programs of tests/real share (scripts/real-check.sh runs every
tests/real/*.py but this one, whose name starts with "_").

Each program: a line "nothing to do: WHY" and exit 0 where torch, CUDA or a library it needs is
missing; the seed set everywhere, cuDNN without autotuning; its results on stdout with full
precision, one line per step; its median step time on stderr as "NAME: median_us=X".

REAL_CPU=1 runs a program on the CPU with a few steps only: a check of how it calls its
libraries on a machine without a GPU, whose output is compared with nothing.

REAL_DEFAULTS=1 leaves the libraries as a user's program finds them: no deterministic
algorithms, cuBLAS with its own workspace (no CUBLAS_WORKSPACE_CONFIG). Its eager runs may differ
from each other (scripts/real-check.sh says so); cuBLAS then picks its kernels and splits as it
does in programs nobody made reproducible.

REAL_STEPS=N runs N steps of a program's loop instead of its own count (a program of a few dozen
steps spends a tenth of them learning: warm-up, recording, eager probes; a real training run is
longer). Sizes that are no loop (tokens per generate call) keep theirs.

REAL_STEP=1 marks each program's step for cgjit with its Python module (`with cgjit.step(...)`,
docs/python.md), as a user who adopts it writes: the step's GPU work inside, the host's reads of
its results after. Without it `step` does nothing."""
import os
import random
import sys
import time

DEFAULTS = os.environ.get("REAL_DEFAULTS") == "1"
if not DEFAULTS:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
# Never the network: every model is built from a config with random weights.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CPU = os.environ.get("REAL_CPU") == "1"
STEP = os.environ.get("REAL_STEP") == "1"


def nothing(why):
    """Say there is nothing to do, and exit 0."""
    print(f"nothing to do: {why}", flush=True)
    sys.exit(0)


def need(*names):
    """The modules named, imported; where one is missing, nothing to do."""
    import importlib
    mods = []
    for name in names:
        try:
            mods.append(importlib.import_module(name))
        except ImportError as e:
            nothing(f"{name} is not installed ({e})")
    return mods[0] if len(mods) == 1 else mods


def setup(strict=False, seed=0):
    """torch and the device (CUDA, or the CPU under REAL_CPU=1), seeded. strict: deterministic
    algorithms that raise where an op has none (training: the backward of SDPA's memory-efficient
    and flash kernels is deterministic only so); otherwise they only warn (sampling: top-p's
    cumsum has no deterministic kernel)."""
    try:
        import torch
    except ImportError:
        nothing("torch is not installed")
    if not CPU and not torch.cuda.is_available():
        nothing("no CUDA device")
    if not DEFAULTS:
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True, warn_only=not strict)
        # ... but no NaN fills of every torch.empty (not what users' programs launch).
        import torch.utils.deterministic
        torch.utils.deterministic.fill_uninitialized_memory = False
    random.seed(seed)
    torch.manual_seed(seed)
    if not CPU:
        torch.cuda.manual_seed_all(seed)
    return torch, torch.device("cpu" if CPU else "cuda")


def _cgjit():
    """The cgjit module: installed (the wheel), or the checkout's python/ folder."""
    try:
        import cgjit
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        import cgjit
    return cgjit


def cgjit_step(name):
    """`with cgjit_step(NAME):` around a step's GPU work: cgjit.step(NAME) under REAL_STEP=1, else
    nothing."""
    import contextlib
    return _cgjit().step(name) if STEP else contextlib.nullcontext()


def marked(name, fn):
    """fn as a step of its own on every call (cgjit.step(NAME) as a decorator) under
    REAL_STEP=1, else fn: for a step inside a library's loop, such as one decoding step of
    transformers' generate."""
    return _cgjit().step(name)(fn) if STEP else fn


def steps(n, loop=True):
    """n, or REAL_STEPS where set and this is the program's loop (loop=False: a size, such as
    the tokens of one generate call), or 3 under REAL_CPU=1."""
    if CPU:
        return 3
    if loop and os.environ.get("REAL_STEPS"):
        return int(os.environ["REAL_STEPS"])
    return n


def pinned(t):
    """t in page-locked memory (as a DataLoader with pin_memory=True hands it over)."""
    return t if CPU else t.pin_memory()


def f32(x):
    """A float32 value in full: 10 significant digits."""
    return f"{float(x):.9e}"


def f64(x):
    """A float64 value in full: its hex form."""
    return float(x).hex()


class Timer:
    """Times steps (host time, each step ended by a read-back) and reports their median."""

    def __init__(self, name):
        self.name, self.us, self.t0 = name, [], 0.0

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.us.append((time.perf_counter() - self.t0) * 1e6)
        return False

    def add(self, us):
        self.us.append(us)

    def report(self, skip=2):
        """The median over the steps after the first skip ones (warm-up), on stderr."""
        tail = sorted(self.us[skip:] if len(self.us) > skip else self.us)
        if tail:
            print(f"{self.name}: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr, flush=True)


def llama_step(torch, model, opt, sched, x, autocast=None):
    """One training step of a causal LM as these programs write it: the loss of tokens x
    predicting themselves (under autocast to dtype `autocast` where given), backward, gradients
    clipped to norm 1, the optimizer and the schedule stepped, gradients set to None. The loss,
    on the device."""
    import contextlib
    cast = torch.autocast(x.device.type, dtype=autocast) if autocast is not None else contextlib.nullcontext()
    with cast:
        loss = model(input_ids=x, labels=x, use_cache=False).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return loss


def param_checksum(torch, model):
    """The sum of every parameter in float64, as hex (one read-back)."""
    with torch.no_grad():
        total = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum()
    return f64(total.item())


def cupy_setup():
    """cupy, with a CUDA device for it; where CuPy or a device is missing, nothing to do."""
    try:
        import cupy as cp
    except ImportError as e:
        nothing(f"cupy is not installed ({e})")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            nothing("no CUDA device")
    except Exception as e:  # CUDARuntimeError, or no driver library at all
        nothing(f"no CUDA device ({e})")
    return cp


def jax_setup(preallocate=True):
    """jax and jax.numpy, on the GPU (the CPU under REAL_CPU=1), XLA's ops deterministic; where
    JAX or a GPU for it is missing, nothing to do. preallocate=False leaves XLA's pool to grow
    (its default takes most of the GPU's memory at start)."""
    os.environ.setdefault("XLA_FLAGS", "--xla_gpu_deterministic_ops=true")
    if not preallocate:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if CPU:
        os.environ["JAX_PLATFORMS"] = "cpu"
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        nothing(f"jax is not installed ({e})")
    if not CPU:
        try:
            jax.devices("gpu")
        except RuntimeError as e:
            nothing(f"no CUDA device for JAX ({e})")
    return jax, jnp
