#!/usr/bin/env python3
"""torch_mlp_adam — a PyTorch eager training loop whose host scalars change every step: a
residual MLP with LayerNorm, torch.optim.Adam with weight decay and a warmup + cosine learning
rate schedule (LambdaLR), so every step's optimizer kernels get a new learning rate and new bias
corrections (Adam's step count lives on the host), and a fresh batch copied from pageable host
memory. The loss is read with .item() every step. Deterministic algorithms on, TF32 off, fixed
seeds: two eager runs are bitwise equal. stdout: every loss as a hex float and a parameter sum;
stderr: "torch_mlp_adam: median_us=<x>"."""
import math
import sys
import time

from torch_common import deterministic_cuda, torch

dev = deterministic_cuda()

STEPS, WARMUP, D, HIDDEN, DEPTH, CLASSES, BATCH = 300, 30, 64, 128, 4, 16, 64


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(D)
        self.up = torch.nn.Linear(D, HIDDEN)
        self.down = torch.nn.Linear(HIDDEN, D)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


model = torch.nn.Sequential(
    torch.nn.Linear(32, D),
    *[Block() for _ in range(DEPTH)],
    torch.nn.LayerNorm(D),
    torch.nn.Linear(D, CLASSES)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.98), weight_decay=1e-4)


def schedule(step):
    if step < WARMUP:
        return (step + 1) / WARMUP
    return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP)))


sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
loss_fn = torch.nn.CrossEntropyLoss()
gen = torch.Generator(device="cpu").manual_seed(2)
teacher = torch.randn(32, CLASSES, generator=gen)
times = []
for step in range(STEPS):
    x_cpu = torch.randn(BATCH, 32, generator=gen)
    y_cpu = (x_cpu @ teacher + 0.5 * torch.randn(BATCH, CLASSES, generator=gen)).argmax(1)
    t0 = time.perf_counter()
    x = x_cpu.to(dev)
    y = y_cpu.to(dev)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
    value = loss.item()
    times.append((time.perf_counter() - t0) * 1e6)
    print(f"step {step}: lr {opt.param_groups[0]['lr'].hex()} loss {float(value).hex()}")
with torch.no_grad():
    total = sum(p.double().sum().item() for p in model.parameters())
print(f"parameters sum {total.hex()}")
tail = sorted(times[-100:])
print(f"torch_mlp_adam: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr)
