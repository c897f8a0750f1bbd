#!/usr/bin/env python3
"""torch_kv_decode — greedy decoding with a key/value cache, as PyTorch users write it without a
framework: one token per step through a two-layer attention block, the new key and value
appended to the cache with torch.cat (so every tensor of attention grows by a row each step and
no two steps have the same shapes), the next token read with .item(); then a second phase with a
preallocated cache written in place (index_copy_ at the step's position, attention over a fixed
window with a mask), whose shapes stay the same. stdout: the tokens of both phases and a
checksum; stderr: "torch_kv_decode: median_us=<x>" (the second phase's steps)."""
import sys
import time

from torch_common import deterministic_cuda, torch

dev = deterministic_cuda()
V, D, L, W = 256, 64, 2, 64
emb = torch.randn(V, D, device=dev) * 0.1
layers = [tuple(torch.randn(D, D, device=dev) * 0.08 for _ in range(4)) for _ in range(L)]
head = torch.randn(D, V, device=dev) * 0.1
norm = torch.nn.LayerNorm(D).to(dev)


@torch.no_grad()
def step_growing(tok, cache):
    x = emb[tok].unsqueeze(0)
    for i, (wq, wk, wv, wo) in enumerate(layers):
        h = norm(x)
        k, v = h @ wk, h @ wv
        cache[i] = (k, v) if cache[i] is None else (torch.cat([cache[i][0], k]), torch.cat([cache[i][1], v]))
        ks, vs = cache[i]
        att = torch.softmax((h @ wq) @ ks.T / D ** 0.5, -1)
        x = x + (att @ vs) @ wo
    return (norm(x) @ head).argmax().item()


@torch.no_grad()
def step_window(tok, pos, kc, vc, mask):
    x = emb[tok].unsqueeze(0)
    slot = torch.tensor([pos % W], device=dev)
    mask.index_fill_(0, slot, 0.0)
    for i, (wq, wk, wv, wo) in enumerate(layers):
        h = norm(x)
        kc[i].index_copy_(0, slot, h @ wk)
        vc[i].index_copy_(0, slot, h @ wv)
        att = torch.softmax((h @ wq) @ kc[i].T / D ** 0.5 + mask, -1)
        x = x + (att @ vc[i]) @ wo
    return (norm(x) @ head).argmax().item()


out1, cache, tok = [], [None] * L, 3
for _ in range(60):
    tok = step_growing(tok, cache)
    out1.append(tok)
out2, times, tok = [], [], 3
kc = [torch.zeros(W, D, device=dev) for _ in range(L)]
vc = [torch.zeros(W, D, device=dev) for _ in range(L)]
mask = torch.full((W,), -1e9, device=dev)
for pos in range(300):
    t0 = time.perf_counter()
    tok = step_window(tok, pos, kc, vc, mask)
    times.append((time.perf_counter() - t0) * 1e6)
    out2.append(tok)
print("growing:", " ".join(map(str, out1)))
print("window:", " ".join(map(str, out2[:80])))
print("checksum", sum((i + 1) * t for i, t in enumerate(out1 + out2)))
tail = sorted(times[-200:])
print(f"torch_kv_decode: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr)
