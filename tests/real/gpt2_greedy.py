#!/usr/bin/env python3
"""gpt2_greedy — greedy decoding with transformers' GPT2LMHeadModel in the shape of GPT-2 small
(124M: 12 layers, 12 heads, 768 wide, vocabulary 50257), random init, fp16, eager attention, the
loop written by hand as people do outside generate(): a DynamicCache passed as the past key
values, the next token taken with argmax and read with .item(), 80 new tokens after a fixed
prompt of 16. The cache grows by a position every token, so no two steps have the same shapes.
stdout: every token with the largest logit of its step (read at the end); stderr:
"gpt2_greedy: median_us=<x>" (the steps after the prompt's)."""
import inspect

from _common import Timer, cgjit_step, f32, need, setup, steps

torch, dev = setup()
need("transformers")
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel  # noqa: E402

cfg = GPT2Config(n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024,
                 attn_implementation="eager")
model = GPT2LMHeadModel(cfg).to(dev, torch.float16).eval()
# transformers 5 renames past_key_values to cache (the old name warns until 5.40).
cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
prompt = torch.randint(0, cfg.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1))
n = steps(80)
tokens, tops = [], []
timer = Timer("gpt2_greedy")
with torch.inference_mode():
    try:
        cache = DynamicCache(config=model.config)
    except TypeError:  # a transformers without the config argument
        cache = DynamicCache()
    ids = prompt.to(dev)
    for _ in range(n):
        with timer:
            with cgjit_step("gpt2_greedy.decode"):
                logits = model(input_ids=ids, use_cache=True, **{cache_arg: cache}).logits[:, -1, :]
                nxt = logits.argmax(dim=-1, keepdim=True)
            tokens.append(nxt.item())
        tops.append(logits.max().float())
        ids = nxt
    tops = torch.stack(tops).tolist()
print("prompt " + " ".join(str(t) for t in prompt[0].tolist()))
for i, (tok, top) in enumerate(zip(tokens, tops)):
    print(f"token {i}: {tok} max logit {f32(top)}")
timer.report(skip=3)
