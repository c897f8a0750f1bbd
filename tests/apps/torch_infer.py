#!/usr/bin/env python3
"""torch_infer — PyTorch eager inference as people write it: the model of torch_infer_model.py,
a greedy next-token readback with .item() every step, so the next step's input follows the
data. stdout: the tokens and a checksum; stderr: "torch_infer: median_us=<x>"."""
import sys
import time

from torch_infer_model import T, dev, forward, torch

tokens = torch.arange(1, T + 1, device=dev)
out, times = [], []
for step in range(300):
    t0 = time.perf_counter()
    nxt = forward(tokens)[0].item()
    tokens = torch.cat([tokens[1:], torch.tensor([nxt], device=dev)])
    times.append((time.perf_counter() - t0) * 1e6)
    out.append(nxt)
print("tokens:", " ".join(map(str, out[:60])))
print("checksum", sum((i + 1) * t for i, t in enumerate(out)))
tail = sorted(times[-200:])
print(f"torch_infer: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr)
