#!/usr/bin/env python3
"""torch_transformer_adam — a small decoder-only transformer trained in PyTorch eager as people
write it (nanoGPT-style, hand-written causal attention: matmuls, a mask and softmax, so no fused
attention backend is involved), torch.optim.Adam with a warmup + cosine schedule, a fresh batch of
token ids copied to the GPU every step and the loss read with .item() every step. Deterministic
algorithms on, TF32 off, fixed seeds: two eager runs are bitwise equal. stdout: every loss as a
hex float and a parameter sum; stderr: "torch_transformer_adam: median_us=<x>"."""
import math
import sys
import time

from torch_common import deterministic_cuda, torch

dev = deterministic_cuda()

STEPS, WARMUP = 200, 20
VOCAB, CTX, D, HEADS, LAYERS, BATCH = 128, 32, 64, 4, 2, 8
F = torch.nn.functional


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.proj = torch.nn.Linear(D, D)
        self.register_buffer("mask", torch.triu(torch.ones(CTX, CTX, dtype=torch.bool), 1))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (z.view(b, t, HEADS, D // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // HEADS)
        att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, D)
        return self.proj(y)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.attn = Attention()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(),
                                       torch.nn.Linear(4 * D, D))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, D)
        self.pos = torch.nn.Embedding(CTX, D)
        self.blocks = torch.nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln = torch.nn.LayerNorm(D)
        self.head = torch.nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln(self.blocks(x)))


model = GPT().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.95))


def schedule(step):
    if step < WARMUP:
        return (step + 1) / WARMUP
    return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP)))


sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
gen = torch.Generator(device="cpu").manual_seed(3)


def batch():
    """A noisy bigram language: next = (5 * prev + 3) % VOCAB, one token in eight random."""
    seq = torch.empty(BATCH, CTX + 1, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (BATCH,), generator=gen)
    noise = torch.randint(0, VOCAB, (BATCH, CTX + 1), generator=gen)
    keep = torch.randint(0, 8, (BATCH, CTX + 1), generator=gen) != 0
    for t in range(1, CTX + 1):
        seq[:, t] = torch.where(keep[:, t], (5 * seq[:, t - 1] + 3) % VOCAB, noise[:, t])
    return seq[:, :-1], seq[:, 1:]


times = []
for step in range(STEPS):
    x_cpu, y_cpu = batch()
    t0 = time.perf_counter()
    x = x_cpu.to(dev)
    y = y_cpu.to(dev)
    opt.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))
    loss.backward()
    opt.step()
    sched.step()
    value = loss.item()
    times.append((time.perf_counter() - t0) * 1e6)
    print(f"step {step}: loss {float(value).hex()}")
with torch.no_grad():
    total = sum(p.double().sum().item() for p in model.parameters())
print(f"parameters sum {total.hex()}")
tail = sorted(times[-100:])
print(f"torch_transformer_adam: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr)
