#!/usr/bin/env python3
"""torch_train — a PyTorch eager training loop as people write it: a small MLP, Adam, the loss
read with .item() every step, deterministic algorithms on and TF32 off, so that two eager runs
are bitwise equal. stdout: every loss as a hex float; stderr: "torch_train: median_us=<x>"."""
import sys
import time

from torch_common import deterministic_cuda, torch

dev = deterministic_cuda()
model = torch.nn.Sequential(
    torch.nn.Linear(64, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 256), torch.nn.GELU(),
    torch.nn.Linear(256, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = torch.nn.CrossEntropyLoss()
gen = torch.Generator(device="cpu").manual_seed(1)
data = torch.randn(32, 64, 64, generator=gen)
labels = torch.randint(0, 10, (32, 64), generator=gen)
times = []
for step in range(200):
    t0 = time.perf_counter()
    x = data[step % 32].to(dev, non_blocking=False)
    y = labels[step % 32].to(dev)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    value = loss.item()
    times.append((time.perf_counter() - t0) * 1e6)
    print(f"step {step}: loss {float(value).hex()}")
with torch.no_grad():
    total = sum(p.double().sum().item() for p in model.parameters())
print(f"parameters sum {total.hex()}")
tail = sorted(times[-100:])
print(f"torch_train: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr)
