"""torch_infer_model — the model torch_infer and torch_infer_probe run: a small transformer-like
block (layernorm, attention by matmuls and softmax, an MLP) over a window of T tokens, batch 1,
greedy: forward returns the next token's logits' argmax (a device tensor) and, with keep, clones
of every activation, as people keep them to debug a model."""
from torch_common import deterministic_cuda, torch

dev = deterministic_cuda()
V, D, T = 512, 128, 16
emb = torch.randn(V, D, device=dev) * 0.1
wq, wk, wv, wo = (torch.randn(D, D, device=dev) * 0.05 for _ in range(4))
w1, w2 = torch.randn(D, 4 * D, device=dev) * 0.05, torch.randn(4 * D, D, device=dev) * 0.05
head = torch.randn(D, V, device=dev) * 0.05
ln = torch.nn.LayerNorm(D).to(dev)


@torch.no_grad()
def forward(tokens, keep=False):
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
    kept = [t.clone() for t in (h, q, k, v, s, att, av, o, h1, g, m, x, logits)] if keep else None
    return logits.argmax(), kept
