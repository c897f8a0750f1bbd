#!/usr/bin/env python3
"""torch_infer_probe — torch_infer's model with every intermediate kept, as people debug a
model: each step clones its activations (embeddings, attention scores, projections, logits) and
the first steps' clones are kept to be checksummed at the end. Steps then hold more calls, the
loop is found later, and the same call sites issue several kinds of GEMM on different steps.
stdout: the tokens and a checksum of every kept activation, bit for bit; stderr:
"torch_infer_probe: median_us=<x>"."""
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
    kept = []
    x = emb[tokens]
    h = ln(x)
    q, k, v = h @ wq, h @ wk, h @ wv
    s = q @ k.T
    att = torch.softmax(s / D ** 0.5 + torch.triu(torch.full((len(tokens),) * 2, -1e9, device=dev), 1), -1)
    av = att @ v
    o = av @ wo
    x = x + o
    h1 = ln(x) @ w1
    g = torch.nn.functional.gelu(h1)
    m = g @ w2
    x = x + m
    logits = ln(x[-1]) @ head
    kept = [t.clone() for t in (h, q, k, v, s, att, av, o, h1, g, m, x, logits)]
    return logits.argmax(), kept


tokens = torch.arange(1, T + 1, device=dev)
out, times, saved = [], [], []
for step in range(200):
    t0 = time.perf_counter()
    nxt, kept = forward(tokens)
    nxt = nxt.item()
    tokens = torch.cat([tokens[1:], torch.tensor([nxt], device=dev)])
    times.append((time.perf_counter() - t0) * 1e6)
    out.append(nxt)
    if step < 16:
        saved.append(kept)
torch.cuda.synchronize()
digest = 0
for kept in saved:
    for t in kept:
        bits = t.cpu().contiguous().view(torch.int32).flatten().to(torch.int64)
        digest = (digest * 1000003 + int((bits * torch.arange(1, bits.numel() + 1)).sum())) % (1 << 61)
print("tokens:", " ".join(map(str, out[:60])))
print("activations checksum", digest)
tail = sorted(times[-100:])
print(f"torch_infer_probe: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr)
