#!/usr/bin/env python3
"""gen_corpus.py — writes the planner corpus, tests/allocator/corpus/*.txt.

The corpus is what test_allocator_plan plans (and asserts planned <= 1.10 x lower bound on):
- traces shaped like real steps, written out from the patterns below (no randomness): an MLP
  training step (activations kept for backward and freed in reverse order, per-GEMM
  workspaces, weight gradients freed after the optimizer), a transformer block, a CNN with
  cuDNN-style workspaces, an iterative solver that ping-pongs two grids, an inference step whose
  output escapes, nested temporaries freed in reverse order, a naive program that reuses
  variable names with odd sizes;
- random traces from fixed seeds (random.Random(seed)), in the shapes of the test's generator:
  random / nested (LIFO) / queue (FIFO) frees, sizes from 1 byte to 64 MiB, long-lived and
  escaping blocks.
The files are committed; run this script only to regenerate them (python3 gen_corpus.py).
The bench_*.txt files are not made here: they were written by a running program, with
CGJIT_DUMP_ALLOCS=DIR cgjit-bench --workload temps --sizes 10,100,1000 (on an H200).
The format is the one of allocator/plan.h: `a ID BYTES`, `f ID`, `#` comments.
"""
import os
import random

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
MiB = 1 << 20


class Trace:
    def __init__(self, name, title):
        self.name, self.lines, self.live = name, [f"# {title}"], set()

    def note(self, text):
        self.lines.append(f"# {text}")

    def a(self, ident, nbytes, comment=None):
        assert ident not in self.live, ident
        self.live.add(ident)
        self.lines.append(f"a {ident} {int(nbytes)}" + (f"  # {comment}" if comment else ""))

    def f(self, ident):
        self.live.remove(ident)
        self.lines.append(f"f {ident}")

    def write(self):
        with open(os.path.join(HERE, self.name + ".txt"), "w") as out:
            out.write("\n".join(self.lines) + "\n")


def mlp_training_step():
    t = Trace("mlp_training_step", "MLP training step, fp32, batch 512, 1024-4096-4096-4096-1000, "
              "naive eager program (everything allocated in the step)")
    dims, batch, f4 = [1024, 4096, 4096, 4096, 1000], 512, 4
    t.note("forward: each layer's output is kept for the backward pass")
    t.a("x", batch * dims[0] * f4, "input batch, copied in from the host")
    for l in range(1, len(dims)):
        t.a(f"ws_fwd{l}", 4 * MiB, "GEMM workspace")
        t.a(f"h{l}", batch * dims[l] * f4)
        t.f(f"ws_fwd{l}")
    t.a("probs", batch * dims[-1] * f4, "softmax")
    t.a("loss_parts", batch * f4)
    t.a("loss", 4, "the loss, read by the host: escapes")
    t.f("loss_parts")
    t.note("backward: gradients flow back, activations are freed in reverse order")
    t.a("dh4", batch * dims[-1] * f4)
    t.f("probs")
    for l in range(len(dims) - 1, 0, -1):
        t.a(f"dW{l}", dims[l - 1] * dims[l] * f4)
        t.a(f"db{l}", dims[l] * f4)
        t.a(f"ws_bwd{l}", 4 * MiB, "GEMM workspace")
        prev = f"h{l - 1}" if l > 1 else "x"
        t.a(f"dh{l - 1}", batch * dims[l - 1] * f4)
        t.f(f"ws_bwd{l}")
        t.f(f"dh{l}")
        t.f(f"h{l}")
        if l == 1:
            t.f("x")
    t.f("dh0")
    t.note("optimizer (Adam): temporaries per parameter, then the gradients go")
    for l in range(1, len(dims)):
        t.a(f"adam_tmp{l}", dims[l - 1] * dims[l] * f4)
        t.f(f"adam_tmp{l}")
        t.f(f"dW{l}")
        t.f(f"db{l}")
    t.write()


def transformer_block():
    t = Trace("transformer_block", "transformer block forward and backward, fp16, batch 8, "
              "sequence 1024, width 1024, 16 heads")
    B, S, D, H, h2 = 8, 1024, 1024, 16, 2
    act = B * S * D * h2
    t.a("x", act, "block input")
    t.a("ln1", act)
    t.a("qkv", 3 * act)
    t.a("scores", B * H * S * S * h2, "attention scores")
    t.a("probs", B * H * S * S * h2, "softmax, kept for backward")
    t.f("scores")
    t.a("ctx", act)
    t.a("attn_out", act)
    t.a("res1", act)
    t.a("ln2", act)
    t.a("mlp_up", 4 * act)
    t.a("gelu", 4 * act)
    t.a("mlp_down", act)
    t.a("out", act, "block output")
    t.note("backward")
    t.a("d_out", act)
    t.a("d_mlp_down", act)
    t.a("d_gelu", 4 * act)
    t.f("mlp_down")
    t.a("d_mlp_up", 4 * act)
    t.f("gelu")
    t.f("d_gelu")
    t.a("dW_up", D * 4 * D * h2)
    t.a("dW_down", 4 * D * D * h2)
    t.a("d_ln2", act)
    t.f("mlp_up")
    t.f("d_mlp_up")
    t.f("d_mlp_down")
    t.a("d_res1", act)
    t.f("ln2")
    t.f("d_ln2")
    t.a("d_ctx", act)
    t.f("attn_out")
    t.a("d_probs", B * H * S * S * h2)
    t.a("d_scores", B * H * S * S * h2)
    t.f("d_probs")
    t.f("probs")
    t.a("d_qkv", 3 * act)
    t.f("d_scores")
    t.f("ctx")
    t.f("d_ctx")
    t.a("dW_qkv", D * 3 * D * h2)
    t.a("d_ln1", act)
    t.f("qkv")
    t.f("d_qkv")
    t.a("d_x", act, "gradient of the block input: escapes to the previous block")
    t.f("d_ln1")
    t.f("ln1")
    t.f("d_res1")
    t.f("res1")
    t.f("d_out")
    t.f("out")
    t.f("x")
    t.note("optimizer: the weight gradients are consumed and freed")
    for w in ("dW_up", "dW_down", "dW_qkv"):
        t.f(w)
    t.write()


def cnn_workspaces():
    t = Trace("cnn_workspaces", "CNN forward and backward, 8 conv layers, cuDNN-style workspaces "
              "allocated around each convolution and freed at once")
    shapes = [(64, 112), (64, 56), (128, 56), (128, 28), (256, 28), (256, 14), (512, 14), (512, 7)]
    batch, f4 = 64, 4
    t.a("img", batch * 3 * 224 * 224 * f4)
    prev = "img"
    ws = [7 * MiB, 33 * MiB + 512, 3 * MiB, 48 * MiB, 1 * MiB + 7, 12 * MiB, 96 * MiB, 5 * MiB]
    for i, (c, hw) in enumerate(shapes):
        t.a(f"ws_f{i}", ws[i], "convolution workspace")
        t.a(f"conv{i}", batch * c * hw * hw * f4)
        t.f(f"ws_f{i}")
        t.a(f"bn{i}", batch * c * hw * hw * f4)
        t.a(f"bn_stats{i}", 2 * c * f4)
        prev = f"bn{i}"
    t.a("pool", batch * 512 * f4)
    t.a("logits", batch * 1000 * f4)
    t.a("dlogits", batch * 1000 * f4)
    t.f("logits")
    t.a("dpool", batch * 512 * f4)
    t.f("dlogits")
    grad = "dpool"
    for i in range(len(shapes) - 1, -1, -1):
        c, hw = shapes[i]
        t.a(f"ws_b{i}", ws[(i + 3) % len(ws)], "backward-data workspace")
        t.a(f"dconv{i}", batch * c * hw * hw * f4)
        t.f(f"ws_b{i}")
        t.a(f"ws_w{i}", ws[(i + 5) % len(ws)] // 2 + 256, "backward-filter workspace")
        t.a(f"dW{i}", c * c * 9 * f4)
        t.f(f"ws_w{i}")
        t.f(grad)
        t.f(f"bn{i}")
        t.f(f"bn_stats{i}")
        t.f(f"conv{i}")
        grad = f"dconv{i}"
    t.f(grad)
    t.f("pool")
    t.f("img")
    for i in range(len(shapes)):
        t.f(f"dW{i}")
    t.write()


def ping_pong():
    t = Trace("ping_pong", "iterative solver: each sweep writes a new grid from the previous one, "
              "which is then freed (ping-pong), with a small reduction buffer per sweep; the "
              "final grid escapes")
    t.a("grid0", 64 * MiB)
    t.a("coeffs", 16 * MiB, "read by every sweep")
    for it in range(24):
        t.a(f"grid{it + 1}", 64 * MiB)
        t.a(f"residual{it}", 4096)
        t.f(f"residual{it}")
        t.f(f"grid{it}")
    t.f("coeffs")
    t.write()


def escaping_output():
    t = Trace("escaping_output", "inference step: staging of the input, temporaries, an output "
              "and a metrics buffer that escape (the program reads them after the step)")
    t.a("metrics", 1024, "escapes")
    t.a("input", 24 * MiB)
    for i in range(6):
        t.a(f"tmp{i}", (i + 2) * 3 * MiB)
        if i > 0:
            t.f(f"tmp{i - 1}")
    t.f("input")
    t.a("output", 8 * MiB, "escapes")
    t.f("tmp5")
    t.a("late_tmp", 40 * MiB, "freed before the end")
    t.f("late_tmp")
    t.write()


def reverse_temps():
    t = Trace("reverse_temps", "nested temporaries freed in reverse order, twice, odd sizes")
    sizes = [1, 255, 256, 257, 4095, 65536, 1 * MiB + 3, 7 * MiB, 300, 12 * MiB, 5, 2 * MiB]
    for rnd in range(2):
        for i, s in enumerate(sizes):
            t.a(f"t{rnd}_{i}", s if rnd == 0 else sizes[-1 - i])
        for i in reversed(range(len(sizes))):
            t.f(f"t{rnd}_{i}")
    t.write()


def naive_reuse():
    t = Trace("naive_reuse", "a naive program: cudaMalloc/cudaFree of the same variables in a loop, "
              "sizes that vary by iteration (IDs are reused after their free)")
    for it in range(40):
        t.a("tmp", 1000 * (it % 7 + 1) + it)
        t.a("buf", (it % 5 + 1) * 256 * 1024)
        if it % 3 == 0:
            t.a("scratch", 0, "a zero-size allocation")
            t.f("scratch")
        t.f("tmp")
        t.a("out", (it % 4 + 1) * 100000)
        t.f("buf")
        t.f("out")
    t.write()


# ---- random traces, in the shapes of the test's generator ----

def random_trace(seed):
    r = random.Random(seed)
    sizes = ["log-uniform", "classes", "small", "mixed"][seed % 4]
    frees = ["random", "lifo", "fifo"][seed % 3]
    n = r.randint(100, 1500)
    cap = r.choice([8, 32, 64, 256, n])
    p_long = r.choice([0.0, 0.05, 0.15])
    p_esc = r.choice([0.0, 0.01, 0.04])
    classes = [256 << r.randrange(18) for _ in range(8)]

    def size():
        if sizes == "log-uniform":
            return int((1 << r.randrange(26)) * (1 + r.random()))
        if sizes == "classes":
            return r.choice(classes)
        if sizes == "small":
            return r.randint(1, 4096)
        return MiB + r.randrange(64 * MiB) if r.random() < 0.25 else r.randint(1, 1 << r.randint(4, 20))

    t = Trace(f"random_{seed:02d}", f"random trace, seed {seed}: {n} blocks, sizes {sizes}, "
              f"frees {frees}, at most {cap} live, long-lived {p_long}, escaping {p_esc}")
    live, longs, made = [], [], 0
    while made < n or live:
        if made < n and (not live or (len(live) < cap and r.random() < 0.55)):
            ident = f"b{made}"
            t.a(ident, size())
            u = r.random()
            if u < p_esc:
                pass
            elif u < p_esc + p_long:
                longs.append(ident)
            else:
                live.append(ident)
            made += 1
        else:
            k = r.randrange(len(live)) if frees == "random" else (len(live) - 1 if frees == "lifo" else 0)
            t.f(live.pop(k))
    for ident in longs:
        t.f(ident)
    t.write()


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    for make in (mlp_training_step, transformer_block, cnn_workspaces, ping_pong, escaping_output,
                 reverse_temps, naive_reuse):
        make()
    for seed in range(20):
        random_trace(seed)
