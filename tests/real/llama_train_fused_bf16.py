#!/usr/bin/env python3
"""llama_train_fused_bf16 — llama_train in mixed precision: the same small LlamaForCausalLM
(random init, SDPA attention) with attention dropout 0.1 in training mode, the forward under
autocast to bfloat16 (fp32 weights), AdamW with fused=True, gradient clipping at 1.0, a cosine
schedule with warm-up, pinned batches of 8x128 random tokens copied with non_blocking=True, the
loss read with .item() every step. The dropout masks come from CUDA's generator (seeded), so a
replayed step must draw the same random numbers as an eager one. stdout: the loss of every step,
then a checksum of the parameters; stderr: "llama_train_fused_bf16: median_us=<x>"."""
from _common import Timer, f32, llama_step, need, param_checksum, pinned, setup, steps

torch, dev = setup(strict=True)
need("transformers")
from transformers import LlamaConfig, LlamaForCausalLM, get_cosine_schedule_with_warmup  # noqa: E402

cfg = LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=4, vocab_size=1024, max_position_embeddings=256,
                  attention_dropout=0.1, attn_implementation="sdpa")
model = LlamaForCausalLM(cfg).to(dev).train()
n = steps(40)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=True)
sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=4, num_training_steps=n)
gen = torch.Generator().manual_seed(1)
timer = Timer("llama_train_fused_bf16")
for step in range(n):
    with timer:
        x = pinned(torch.randint(0, cfg.vocab_size, (8, 128), generator=gen)).to(dev, non_blocking=True)
        value = llama_step(torch, model, opt, sched, x, autocast=torch.bfloat16).item()
    print(f"step {step}: loss {f32(value)} lr {sched.get_last_lr()[0]:.9e}")
print(f"parameters sum {param_checksum(torch, model)}")
timer.report()
