#!/usr/bin/env python3
"""nanogpt_sample — sampling from a nanoGPT-style decoder written here as nanoGPT's model.py
writes it (causal self-attention through F.scaled_dot_product_attention(is_causal=True), a GELU
MLP, LayerNorm, the token embedding tied to the head; 4 layers, 4 heads, 256 wide, block 256,
vocabulary 1024, random init), under autocast to bfloat16 as nanoGPT's sample.py runs it, and
its generate(): no key/value cache, the whole context (cropped to the block) run again for every
token, temperature 0.8, top-k 50, torch.multinomial with a seeded CUDA generator. The prompt has
200 tokens: the first 57 new tokens see a context growing from 200 to 256 tokens, the last 43 a
full block (the same shapes every step). stdout: the 100 new tokens, each with its probability
(read at the end); stderr: "nanogpt_sample: median_us=<x>"."""
import math

from _common import Timer, f32, setup, steps

torch, dev = setup()
nn, F = torch.nn, torch.nn.functional
import os
# NANOGPT_SHAPE=gpt2: GPT-2 124M's shape (12 layers, 12 heads, 768 wide, block 1024, vocabulary
# 50304) from a one-token prompt, as nanoGPT's sample.py runs it: a context one longer every token.
GPT2 = os.environ.get("NANOGPT_SHAPE") == "gpt2"
N_LAYER, N_HEAD, N_EMBD, BLOCK, VOCAB = (12, 12, 768, 1024, 50304) if GPT2 else (4, 4, 256, 256, 1024)
PROMPT = 1 if GPT2 else 200


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
        q, k, v = (t.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, N_EMBD), wpe=nn.Embedding(BLOCK, N_EMBD),
            h=nn.ModuleList([Block() for _ in range(N_LAYER)]), ln_f=nn.LayerNorm(N_EMBD)))
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * N_LAYER))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x)[:, [-1], :])  # inference: the last position


model = GPT().to(dev).eval()
g = torch.Generator(device=dev).manual_seed(1337)
idx = torch.randint(0, VOCAB, (1, PROMPT), generator=torch.Generator().manual_seed(1)).to(dev)
timer = Timer("nanogpt_sample")
tokens, chosen = [], []
with torch.no_grad():
    for _ in range(steps(100)):
        with timer:
            idx_cond = idx if idx.size(1) <= BLOCK else idx[:, -BLOCK:]
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                logits = model(idx_cond)
            logits = logits[:, -1, :] / 0.8
            v, _ = torch.topk(logits, 50)
            logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1, generator=g)
            idx = torch.cat((idx, idx_next), dim=1)
            tokens.append(idx_next.item())
        chosen.append(probs.gather(-1, idx_next).view(()).float())
    chosen = torch.stack(chosen).tolist()
for i, (tok, p) in enumerate(zip(tokens, chosen)):
    print(f"token {i}: {tok} p {f32(p)}")
timer.report()
