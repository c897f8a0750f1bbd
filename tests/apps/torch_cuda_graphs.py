#!/usr/bin/env python3
"""torch_cuda_graphs — PyTorch inference that makes CUDA graphs of its own, as the PyTorch
documentation shows (torch.cuda.graphs): the model of torch_infer_model.py warmed up on a side
stream, its forward captured once with torch.cuda.graph into static tensors, then every step
copies the next window of tokens into the static input, replays the graph, and picks the next
token with eager work after it (a temperature, a top-k, an argmax) read back with .item(). The
first 40 steps run the model eagerly, as a program does before it captures. stdout: the tokens
and a checksum; stderr: "torch_cuda_graphs: median_us=<x>" over the replayed steps."""
import sys
import time

from torch_infer_model import T, V, dev, forward, torch

EAGER_STEPS, STEPS = 40, 300


def pick(logits, step):
    scaled = logits / (1.0 + 0.01 * (step % 7))
    top = torch.topk(scaled, 8)
    return top.indices[torch.argmax(top.values)]


tokens = torch.arange(1, T + 1, device=dev)
static_tokens = tokens.clone()
out, times = [], []
graph = static_logits = None
for step in range(STEPS):
    t0 = time.perf_counter()
    if step < EAGER_STEPS:
        _, kept = forward(tokens, keep=True)
        logits = kept[-1]
    else:
        if graph is None:  # warm up on a side stream, then capture (torch.cuda.graphs' recipe)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    forward(static_tokens, keep=True)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _, static_kept = forward(static_tokens, keep=True)
            static_logits = static_kept[-1]
        static_tokens.copy_(tokens)
        graph.replay()
        logits = static_logits
    nxt = pick(logits, step).item() % V
    tokens = torch.cat([tokens[1:], torch.tensor([nxt], device=dev)])
    times.append((time.perf_counter() - t0) * 1e6)
    out.append(nxt)
print("tokens:", " ".join(map(str, out[:80])))
print("checksum", sum((i + 1) * t for i, t in enumerate(out)))
tail = sorted(times[-200:])
print(f"torch_cuda_graphs: median_us={tail[len(tail) // 2]:.1f}", file=sys.stderr)
