#!/usr/bin/env python3
"""torch_infer — PyTorch eager inference as people write it: a small transformer-like block
(layernorm, attention by matmuls and softmax, an MLP), batch 1, a greedy next-token readback with
.item() every step, so the next step's input follows the data. stdout: the tokens and a checksum;
stderr: "torch_infer: median_us=<x>"."""
import sys
import time

from torch_common import deterministic_cuda, torch

dev = deterministic_cuda()
V, D, T = 512, 128, 16
emb = torch.randn(V, D, device=dev) * 0.1
wq, wk, wv, wo = (torch.randn(D, D, device=dev) * 0.05 for _ in range(4))
w1, w2 = torch.randn(D, 4 * D, device=dev) * 0.05, torch.randn(4 * D, D, device=dev) * 0.05
head = torch.randn(D, V, device=dev) * 0.05
ln = torch.nn.LayerNorm(D).to(dev)


@torch.no_grad()
def forward(tokens):
    x = emb[tokens]
    h = ln(x)
    q, k, v = h @ wq, h @ wk, h @ wv
    att = torch.softmax((q @ k.T) / D ** 0.5 + torch.triu(torch.full((len(tokens),) * 2, -1e9, device=dev), 1), -1)
    x = x + (att @ v) @ wo
    x = x + torch.nn.functional.gelu(ln(x) @ w1) @ w2
    return (ln(x[-1]) @ head).argmax()


tokens = torch.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], device=dev)
out, times = [], []
for step in range(300):
    t0 = time.perf_counter()
    nxt = forward(tokens).item()
    tokens = torch.cat([tokens[1:], torch.tensor([nxt], device=dev)])
    times.append((time.perf_counter() - t0) * 1e6)
    out.append(nxt)
print("tokens:", " ".join(map(str, out[:60])))
print("checksum", sum((i + 1) * t for i, t in enumerate(out)))
tail = sorted(times[-200:])
print(f"torch_infer: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr)
