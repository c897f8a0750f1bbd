#!/usr/bin/env python3
"""llama_train — pre-training a small Llama with transformers as its examples do: LlamaForCausalLM
from a config (random init, SDPA attention, fp32), AdamW (foreach), gradient clipping at 1.0, a
cosine schedule with warm-up, batches of 8x128 random tokens made on the CPU, pinned and copied
with non_blocking=True (as a DataLoader with pin_memory=True does), the loss read with .item()
every step. stdout: the loss of every step, then a checksum of the parameters; stderr:
"llama_train: median_us=<x>"."""
from _common import Timer, cgjit_step, f32, llama_step, need, param_checksum, pinned, setup, steps

torch, dev = setup(strict=True)
need("transformers")
from transformers import LlamaConfig, LlamaForCausalLM, get_cosine_schedule_with_warmup  # noqa: E402

cfg = LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=4, vocab_size=1024, max_position_embeddings=256,
                  attn_implementation="sdpa")
model = LlamaForCausalLM(cfg).to(dev).train()
n = steps(60)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=True)
sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=6, num_training_steps=n)
gen = torch.Generator().manual_seed(1)
timer = Timer("llama_train")
for step in range(n):
    with timer:
        x = pinned(torch.randint(0, cfg.vocab_size, (8, 128), generator=gen)).to(dev, non_blocking=True)
        with cgjit_step("llama_train.step"):
            loss = llama_step(torch, model, opt, sched, x)
        value = loss.item()
    print(f"step {step}: loss {f32(value)} lr {sched.get_last_lr()[0]:.9e}")
print(f"parameters sum {param_checksum(torch, model)}")
timer.report()
