"""_tiny_transformer — what compiled_train.py and compiled_graphs.py share: their set-up for
torch.compile, and the small decoder-only transformer they compile (pre-LayerNorm blocks, SDPA
with a causal mask, tanh GELU, learned positions, a head without bias). Not a program of its
own: scripts/real-check.sh runs no tests/real/_*.py."""
import os
import tempfile

from _common import CPU, nothing, setup

VOCAB, WIDTH, HEADS, LAYERS, SEQ, BATCH = 512, 128, 4, 3, 64, 8


def compiled_setup(cpu_reason):
    """torch and the device, seeded and strict (_common.setup), for a program that checks
    torch.compile's GPU code (on the CPU: nothing to do, for cpu_reason). Inductor's
    compiled code and its autotuning choices go to a cache directory of the corpus's own
    (TORCHINDUCTOR_CACHE_DIR, unless given), so every run after the first takes the same kernels;
    without Triton, torch.compile has no GPU backend: nothing to do."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "cgjit-real-inductor"))
    torch, dev = setup(strict=True)
    if CPU:
        nothing(cpu_reason)
    try:
        import triton  # noqa: F401  (Inductor's GPU backend)
    except ImportError:
        nothing("triton is not installed: torch.compile has no GPU backend")
    return torch, dev


def model_class(torch):
    """The model's class, its forward taking token ids (batch, time) to logits."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
            self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
            q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB, bias=False)

        def forward(self, idx):
            x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return Model
