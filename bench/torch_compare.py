#!/usr/bin/env python3
"""PyTorch reference timings for cgjit-bench's library and elementwise workloads.

Builds the three models and the two elementwise workloads of cgjit-bench's C workloads with the
same shapes and math, in PyTorch, fp32 without TF32, inference only (torch.no_grad()), and times
each one three ways:

    eager                 the nn.Module called directly
    compile               torch.compile(model)
    reduce_overhead       torch.compile(model, mode="reduce-overhead")   (CUDA graphs)

Models (weights from PyTorch's default initialisation, seed 0; inputs random normal):

    mlp   Linear(1024,1024)-ReLU-Linear(1024,1024)-ReLU-Linear(1024,10), batch 128.
    cnn   batch 1, 3x64x64 input; four blocks Conv2d 3x3 pad 1 (+bias) + ReLU + MaxPool2d(2),
          channels 3->32->64->64->128 (output 1x128x4x4).
    gpt2  12 pre-LN blocks, d=768, 12 heads, T=64, batch 1, input a random (1, 64, 768) tensor:
          x = x + attn(ln1(x)); x = x + mlp(ln2(x)); then a final LayerNorm.
          attn: Linear(768, 3*768) -> q, k, v (12 heads of 64); scores = q k^T / sqrt(64) by an
          explicit batched matmul, causal mask (masked_fill -inf), softmax over the last axis,
          @ v, heads merged, Linear(768, 768).  mlp: Linear(768, 3072), GELU(approximate='tanh'),
          Linear(3072, 768).  LayerNorm eps 1e-5, with weight and bias.
          The attention is written out (no scaled_dot_product_attention), so no flash or
          memory-efficient kernel is used: the math is that of the C workload's strided-batched
          GEMMs and softmax.
    ew16M torch.relu(x * 2 + 1) over x of 16M floats (1 << 24), U(-1, 1).  Eager PyTorch runs
          3 kernels (mul, add, relu; the C workload 2: scale-shift, relu); torch.compile fuses
          them into one.
    ew10  the C workload's chain of 10 elementwise ops over x and a bias vector b of 1M floats
          each (1 << 20), U(-1, 1) and U(-0.5, 0.5):
              t1 = 2 x + b;  t2 = tanh(t1 * x);  t3 = gelu(sigmoid(t1))  (erf form);
              t2 = relu(t2 + t3) + x;  out = 0.5 t2 - 0.25
          (eager PyTorch: 11 kernels, the last scale-shift being a mul and a sub).
    --models elementwise names both.

Timing, the method of cgjit-bench: per model, every mode is built (compiled) and warmed up
first: its first call (which compiles) and W more steps (--warmup, default 20).  Then R rounds
(--rounds, default 31) each time every mode once, in turn, as S steps (--steps, default 20):
a round is timed with CUDA events recorded on the current stream before its first step and after
its S-th step, and the host waits for the end event before the next round; per-step time =
round time / S; the median over a mode's rounds is reported, in microseconds.  Interleaving the
modes round by round, as cgjit-bench does, makes drift in clocks and host load (large on shared
machines: host-bound steps vary by 2x between runs) affect every mode alike.  --sequential
times the modes one after the other instead, each on its own with torch._dynamo.reset()
between them.

After the warm-up, each compiled mode's output is compared with eager's (printed only: the
compilers reorder reductions, so the results agree to rounding, not bitwise).

Output: a table on stdout and a JSON file (--json, default torch_compare.json):

    {"gpu": NAME, "torch": VERSION,
     "results": {"mlp":  {"eager_us": X, "compile_us": Y, "reduce_overhead_us": Z},
                 "cnn":  {...}, "gpt2": {...}, "ew16M": {...}, "ew10": {...}},
     "note": "..."}

All five workloads are always present in "results"; a value is null where the workload or mode
was not run or failed (the note says which and why).  Without PyTorch or without a CUDA GPU every
value is null, the note says why, and the exit status is 0.  The only dependency is torch.
"""

import argparse
import json
import math
import statistics
import sys
import traceback

MODELS = ("mlp", "cnn", "gpt2", "ew16M", "ew10")
ELEMENTWISE = ("ew16M", "ew10")      # --models elementwise
MODES = ("eager", "compile", "reduce_overhead")
MODE_KEYS = {"eager": "eager_us", "compile": "compile_us", "reduce_overhead": "reduce_overhead_us"}
MODE_ALIASES = {"eager": "eager", "compile": "compile", "default": "compile",
                "reduce_overhead": "reduce_overhead", "reduce-overhead": "reduce_overhead"}


def log(*args):
    print(*args, flush=True)


def null_results():
    return {m: {MODE_KEYS[k]: None for k in MODES} for m in MODELS}


def write_json(path, gpu, torch_version, results, notes):
    doc = {"gpu": gpu, "torch": torch_version, "results": results, "note": "; ".join(notes)}
    try:
        with open(path, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        log("torch_compare: wrote %s" % path)
    except OSError as e:
        log("torch_compare: cannot write %s: %s" % (path, e))


def parse_list(value, allowed, what, aliases=None):
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        if aliases is not None:
            item = aliases.get(item, item)
        if item not in allowed:
            raise argparse.ArgumentTypeError("unknown %s %r (choose from %s)"
                                             % (what, item, ",".join(allowed)))
        if item not in out:
            out.append(item)
    if not out:
        raise argparse.ArgumentTypeError("empty %s list" % what)
    return out


def parse_models(value):
    """--models: names of MODELS, "elementwise" standing for ew16M,ew10."""
    items = []
    for item in value.split(","):
        items.extend(ELEMENTWISE if item.strip() == "elementwise" else [item])
    return parse_list(",".join(items), MODELS, "model")


def positive_int(value):
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % value)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1: %r" % value)
    return n


def nonneg_int(value):
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % value)
    if n < 0:
        raise argparse.ArgumentTypeError("must be at least 0: %r" % value)
    return n


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Time cgjit-bench's mlp/cnn/gpt2 and elementwise (ew16M, ew10) workloads in "
                    "PyTorch (fp32, no TF32, inference): eager, torch.compile, "
                    "torch.compile(mode='reduce-overhead').")
    p.add_argument("--rounds", type=positive_int, default=31, help="rounds per mode (default 31)")
    p.add_argument("--steps", type=positive_int, default=20, help="steps per round (default 20)")
    p.add_argument("--warmup", type=nonneg_int, default=20,
                   help="warm-up steps after the first (compiling) call (default 20)")
    p.add_argument("--models", default=",".join(MODELS), type=parse_models,
                   help="comma-separated subset of mlp,cnn,gpt2,ew16M,ew10; elementwise names "
                        "ew16M and ew10 (default all)")
    p.add_argument("--modes", default=",".join(MODES),
                   type=lambda v: parse_list(v, MODES, "mode", MODE_ALIASES),
                   help="comma-separated subset of eager,compile,reduce-overhead (default all)")
    p.add_argument("--sequential", action="store_true",
                   help="time the modes one after the other (each compiled, warmed up and timed "
                        "on its own) instead of interleaving them round by round")
    p.add_argument("--json", default="torch_compare.json", metavar="FILE",
                   help="write the results as JSON to FILE (default torch_compare.json)")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# Models (defined inside a function so that the module imports without torch)

def define_models(torch):
    nn = torch.nn
    F = torch.nn.functional

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(1024, 1024)
            self.fc2 = nn.Linear(1024, 1024)
            self.fc3 = nn.Linear(1024, 10)

        def forward(self, x):
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            chans = (3, 32, 64, 64, 128)
            self.convs = nn.ModuleList(
                nn.Conv2d(chans[i], chans[i + 1], kernel_size=3, padding=1, bias=True)
                for i in range(4))

        def forward(self, x):
            for conv in self.convs:
                x = F.max_pool2d(F.relu(conv(x)), 2)
            return x

    class Attention(nn.Module):
        def __init__(self, d, heads, t):
            super().__init__()
            self.d, self.heads, self.hd = d, heads, d // heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.scale = 1.0 / math.sqrt(self.hd)
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)  # True above diag
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).split(d, dim=2)
            q = q.view(b, t, self.heads, self.hd).transpose(1, 2)   # (b, h, t, hd)
            k = k.view(b, t, self.heads, self.hd).transpose(1, 2)
            v = v.view(b, t, self.heads, self.hd).transpose(1, 2)
            att = torch.matmul(q, k.transpose(-2, -1)) * self.scale  # (b, h, t, t)
            att = att.masked_fill(self.mask[:t, :t], float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = torch.matmul(att, v)                                  # (b, h, t, hd)
            y = y.transpose(1, 2).contiguous().view(b, t, d)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self, d, heads, t):
            super().__init__()
            self.ln1 = nn.LayerNorm(d, eps=1e-5)
            self.attn = Attention(d, heads, t)
            self.ln2 = nn.LayerNorm(d, eps=1e-5)
            self.fc = nn.Linear(d, 4 * d)
            self.fc_proj = nn.Linear(4 * d, d)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            x = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
            return x

    class GPT2(nn.Module):
        def __init__(self, layers=12, d=768, heads=12, t=64):
            super().__init__()
            self.blocks = nn.ModuleList(Block(d, heads, t) for _ in range(layers))
            self.ln_f = nn.LayerNorm(d, eps=1e-5)

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return self.ln_f(x)

    class EW16M(nn.Module):
        """relu(2 x + 1): cgjit-bench's ew16M."""

        def forward(self, x):
            return torch.relu(x * 2.0 + 1.0)

    class EW10(nn.Module):
        """cgjit-bench's ew10: ten elementwise ops (workloads_elementwise.cu), b a bias vector."""

        def __init__(self, n):
            super().__init__()
            self.register_buffer("b", torch.rand(n) - 0.5, persistent=False)    # U(-0.5, 0.5)

        def forward(self, x):
            t1 = x * 2.0                      # 1 scale
            t1 = t1 + self.b                  # 2 add bias
            t2 = t1 * x                       # 3 multiply
            t2 = torch.tanh(t2)               # 4 tanh
            t3 = torch.sigmoid(t1)            # 5 sigmoid
            t3 = F.gelu(t3)                   # 6 GELU (erf form)
            t1 = t2 + t3                      # 7 add
            t2 = torch.relu(t1)               # 8 ReLU
            t2 = t2 + x                       # 9 residual
            return t2 * 0.5 - 0.25            # 10 scale-shift

    def build(name, device):
        torch.manual_seed(0)
        uniform = False                       # the elementwise inputs are U(-1, 1), as in C
        if name == "mlp":
            model, shape = MLP(), (128, 1024)
        elif name == "cnn":
            model, shape = CNN(), (1, 3, 64, 64)
        elif name == "gpt2":
            model, shape = GPT2(), (1, 64, 768)
        elif name == "ew16M":
            model, shape, uniform = EW16M(), (1 << 24,), True
        else:
            model, shape, uniform = EW10(1 << 20), (1 << 20,), True
        model = model.to(device=device, dtype=torch.float32).eval()
        if uniform:
            x = torch.rand(*shape, device=device, dtype=torch.float32) * 2.0 - 1.0
        else:
            x = torch.randn(*shape, device=device, dtype=torch.float32)
        return model, x

    return build


# ---------------------------------------------------------------------------------------------
# Precision set-up

def disable_tf32(torch):
    """TF32 off for cuBLAS and cuDNN; returns a line describing the effective state."""
    errors = []
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    except Exception as e:  # a build that refuses the legacy flags: use the newer API
        errors.append("allow_tf32: %s" % e)
        try:
            torch.backends.cuda.matmul.fp32_precision = "ieee"
            torch.backends.cudnn.conv.fp32_precision = "ieee"
            torch.backends.cudnn.rnn.fp32_precision = "ieee"
        except Exception as e2:
            errors.append("fp32_precision: %s" % e2)
    state = []
    for label, getter in (("matmul.allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
                          ("cudnn.allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
                          ("float32_matmul_precision", torch.get_float32_matmul_precision)):
        try:
            state.append("%s=%s" % (label, getter()))
        except Exception as e:
            state.append("%s=? (%s)" % (label, str(e).splitlines()[0] if str(e) else type(e).__name__))
    line = "TF32 off: " + ", ".join(state)
    if errors:
        line += " [" + "; ".join(errors) + "]"
    return line


# ---------------------------------------------------------------------------------------------
# Timing

def warm_up(torch, fn, x, warmup):
    """The first call (which compiles) and `warmup` more steps; returns a copy of the output."""
    fn(x)
    for _ in range(warmup):
        fn(x)
    out = fn(x).clone()                 # clone at once: CUDA-graph outputs are reused
    torch.cuda.synchronize()
    return out


def time_round(torch, fn, x, steps, start, end):
    """Per-step µs of one round of `steps` calls, timed with CUDA events on the current stream."""
    start.record()
    for _ in range(steps):
        fn(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / steps       # ms per round -> µs per step


def compare(torch, ref, out):
    """Largest absolute difference and that difference relative to max |ref|."""
    diff = (out.double() - ref.double()).abs().max().item()
    scale = ref.double().abs().max().item()
    return diff, (diff / scale if scale > 0 else float("inf") if diff > 0 else 0.0)


def cudagraph_skips(torch):
    try:
        from torch._dynamo.utils import counters
        return int(counters["inductor"]["cudagraph_skips"])
    except Exception:
        return None


def short_error(e):
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0][:200] if text else "")


def report_failure(name, mode, what, e, notes):
    log("torch_compare: %s %s: %s failed:" % (name, mode, what))
    traceback.print_exc()
    sys.stderr.flush()
    notes.append("%s %s: %s failed (%s)" % (name, mode, what, short_error(e)))


def make_fn(torch, model, mode):
    if mode == "eager":
        return model
    if mode == "compile":
        return torch.compile(model)
    return torch.compile(model, mode="reduce-overhead")


def run_model(torch, build, name, modes, args, notes):
    """Times `modes` of model `name`; returns its results dict (None where a mode failed).

    Interleaved (the default): every mode is compiled and warmed up first, all kept alive, then
    each round times every mode once, in turn, so that drift in clocks or host load affects all
    modes alike.  --sequential: each mode is compiled, warmed up and timed on its own, with
    torch._dynamo.reset() between modes."""
    res = {MODE_KEYS[k]: None for k in MODES}
    try:
        model, x = build(name, "cuda")
        with torch.no_grad():
            ref = model(x).clone()
        torch.cuda.synchronize()
    except Exception as e:
        report_failure(name, "-", "building the model", e, notes)
        return res

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    groups = [[m] for m in modes] if args.sequential else [list(modes)]
    try:
        torch._dynamo.reset()
    except Exception:
        pass
    for group in groups:
        fns, times = {}, {}
        for mode in group:
            try:
                skips0 = cudagraph_skips(torch)
                fn = make_fn(torch, model, mode)
                with torch.no_grad():
                    out = warm_up(torch, fn, x, args.warmup)
                msg = "torch_compare: %-5s %-16s ready" % (name, mode)
                if mode != "eager":
                    diff, rel = compare(torch, ref, out)
                    msg += "   max|out-eager| %.3g (%.3g of max|eager|)" % (diff, rel)
                skips1 = cudagraph_skips(torch)
                if mode == "reduce_overhead" and skips0 is not None and skips1 is not None \
                        and skips1 > skips0:
                    msg += "   WARNING: inductor skipped CUDA graphs %d time(s)" % (skips1 - skips0)
                    notes.append("%s reduce_overhead: inductor skipped CUDA graphs" % name)
                log(msg)
                fns[mode], times[mode] = fn, []
            except Exception as e:
                report_failure(name, mode, "compiling/warming up", e, notes)
        with torch.no_grad():
            for _ in range(args.rounds):
                for mode in list(fns):
                    try:
                        times[mode].append(time_round(torch, fns[mode], x, args.steps, start, end))
                    except Exception as e:
                        report_failure(name, mode, "timing", e, notes)
                        del fns[mode]
        for mode in fns:
            t = sorted(times[mode])
            med = statistics.median(t)
            res[MODE_KEYS[mode]] = round(med, 2)
            log("torch_compare: %-5s %-16s %10.1f us/step   (rounds: min %.1f, max %.1f)"
                % (name, mode, med, t[0], t[-1]))
        fns = None
        try:
            torch._dynamo.reset()
        except Exception:
            pass
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:
            pass
    return res


def fmt(v):
    return "%10.1f" % v if v is not None else "%10s" % "-"


def print_table(results, gpu, torch_version, args):
    log("")
    log("PyTorch %s on %s, fp32 without TF32, inference; median us/step of %d rounds x %d steps"
        % (torch_version, gpu, args.rounds, args.steps))
    log("%-6s %10s %10s %10s %12s" % ("model", "eager", "compile", "reduce-ovh", "eager/r-o"))
    for m in MODELS:
        r = results[m]
        e, c, ro = r["eager_us"], r["compile_us"], r["reduce_overhead_us"]
        ratio = "%12.2f" % (e / ro) if e is not None and ro else "%12s" % "-"
        log("%-6s %s %s %s %s" % (m, fmt(e), fmt(c), fmt(ro), ratio))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    results = null_results()
    notes = []

    try:
        import torch
    except Exception as e:
        notes.append("PyTorch is not available (%s); no timings" % short_error(e))
        log("torch_compare: " + notes[-1])
        write_json(args.json, None, None, results, notes)
        return 0

    torch_version = str(torch.__version__)
    try:
        has_gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
        why = "torch.cuda.is_available() is False"
    except Exception as e:
        has_gpu, why = False, short_error(e)
    if not has_gpu:
        notes.append("no CUDA GPU (%s); no timings" % why)
        log("torch_compare: " + notes[-1])
        write_json(args.json, None, torch_version, results, notes)
        return 0

    try:
        gpu = torch.cuda.get_device_name(0)
    except Exception as e:
        gpu = None
        notes.append("device name unknown (%s)" % short_error(e))

    tf32_line = disable_tf32(torch)
    log("torch_compare: torch %s, %s; %s" % (torch_version, gpu, tf32_line))
    notes.append("fp32, %s; torch.no_grad(); median of %d rounds x %d steps (after %d warm-up "
                 "steps), CUDA events, modes %s; attention as explicit matmul + causal masked "
                 "softmax; ew16M = relu(2x+1) over 16M floats, ew10 = 10 elementwise ops over 1M "
                 "floats" % (tf32_line, args.rounds, args.steps, args.warmup,
                             "one after the other" if args.sequential else "interleaved by round"))
    if "compile" in args.modes or "reduce_overhead" in args.modes:
        if not hasattr(torch, "compile"):
            notes.append("torch.compile is not available in this PyTorch")
            args.modes = [m for m in args.modes if m == "eager"]

    try:
        build = define_models(torch)
    except Exception as e:
        traceback.print_exc()
        notes.append("defining the models failed (%s)" % short_error(e))
        write_json(args.json, gpu, torch_version, results, notes)
        return 0

    skipped_models = [m for m in MODELS if m not in args.models]
    skipped_modes = [m for m in MODES if m not in args.modes]
    if skipped_models:
        notes.append("not run: models %s" % ",".join(skipped_models))
    if skipped_modes:
        notes.append("not run: modes %s" % ",".join(skipped_modes))

    for name in args.models:
        try:
            results[name] = run_model(torch, build, name, args.modes, args, notes)
        except Exception as e:      # anything run_model did not catch itself
            traceback.print_exc()
            notes.append("%s failed (%s)" % (name, short_error(e)))
        write_json(args.json, gpu, torch_version, results, notes)   # keep what is done so far

    print_table(results, gpu, torch_version, args)
    write_json(args.json, gpu, torch_version, results, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
