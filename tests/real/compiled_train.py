#!/usr/bin/env python3
"""compiled_train — a small transformer trained under torch.compile in its default mode, as its
users write it: Inductor's generated Triton kernels (launched by Triton's own launcher through the
driver), cuBLAS GEMMs, SDPA, the forward and backward compiled, no CUDA graphs of PyTorch's own;
AdamW (foreach) left eager, gradient clipping, batches of random tokens made on the CPU, pinned
and copied with non_blocking=True, the loss read with .item() every step; 40 steps. Inductor's
compiled code and its autotuning choices are kept in a cache directory of this program's own
(TORCHINDUCTOR_CACHE_DIR, set here unless given), so every run after the first takes the same
kernels: two eager runs print the same bits. stdout: the loss of every step, then a checksum of
the parameters; stderr: "compiled_train: median_us=<x>"."""
import os
import tempfile

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "cgjit-real-inductor"))

from _common import CPU, Timer, f32, nothing, param_checksum, pinned, setup, steps  # noqa: E402

torch, dev = setup(strict=True)
if CPU:
    nothing("torch.compile's GPU code is what this program checks")
try:
    import triton  # noqa: F401  (Inductor's GPU backend)
except ImportError:
    nothing("triton is not installed: torch.compile has no GPU backend")

VOCAB, WIDTH, HEADS, LAYERS, SEQ, BATCH = 512, 128, 4, 3, 64, 8
nn, F = torch.nn, torch.nn.functional


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx, targets):
        x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


model = Model().to(dev).train()
step_fn = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=True)
gen = torch.Generator().manual_seed(1)
timer = Timer("compiled_train")
for step in range(steps(40)):
    with timer:
        x = pinned(torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)).to(dev, non_blocking=True)
        loss = step_fn(x[:, :-1], x[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
    print(f"step {step}: loss {f32(value)}")
print(f"parameters sum {param_checksum(torch, model)}")
timer.report(skip=3)
