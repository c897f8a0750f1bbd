#!/usr/bin/env python3
"""torch_infer_probe — torch_infer's model with every intermediate kept, as people debug a
model: each step clones its activations (embeddings, attention scores, projections, logits) and
the first steps' clones are kept to be checksummed at the end. Steps then hold more calls, the
loop is found later, and the same call sites issue several kinds of GEMM on different steps.
stdout: the tokens and a checksum of every kept activation, bit for bit; stderr:
"torch_infer_probe: median_us=<x>"."""
import sys
import time

from torch_infer_model import T, dev, forward, torch

tokens = torch.arange(1, T + 1, device=dev)
out, times, saved = [], [], []
for step in range(200):
    t0 = time.perf_counter()
    nxt, kept = forward(tokens, keep=True)
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
