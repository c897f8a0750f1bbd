#!/usr/bin/env python3
"""bert_train — fine-tuning a small BERT classifier with transformers as its examples do:
BertForSequenceClassification from a config (4 layers, 256 wide, vocabulary 2048, 4 labels,
random init, dropout on), the forward under autocast to float16 with torch.amp.GradScaler
(whose step reads back whether a gradient overflowed, and skips the optimizer then), AdamW,
gradient clipping on the unscaled gradients, a linear schedule with warm-up; batches of 16
sequences of 128 random tokens padded to random lengths (the attention mask changes every step,
its shape does not), pinned and copied with non_blocking=True, the loss read with .item() every
step. stdout: the loss and the scale of every step, then a checksum of the parameters; stderr:
"bert_train: median_us=<x>"."""
from _common import Timer, cgjit_step, f32, need, param_checksum, pinned, setup, steps

torch, dev = setup(strict=True)
need("transformers")
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup  # noqa: E402

cfg = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                 vocab_size=2048, max_position_embeddings=512, num_labels=4)
model = BertForSequenceClassification(cfg).to(dev).train()
n = steps(40)
opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=4, num_training_steps=n)
scaler = torch.amp.GradScaler(dev.type)
gen = torch.Generator().manual_seed(1)
B, T = 16, 128
timer = Timer("bert_train")
for step in range(n):
    with timer:
        ids = torch.randint(1, cfg.vocab_size, (B, T), generator=gen)
        lengths = torch.randint(T // 4, T + 1, (B, 1), generator=gen)
        mask = (torch.arange(T).unsqueeze(0) < lengths).long()
        labels = torch.randint(0, cfg.num_labels, (B,), generator=gen)
        ids, mask, labels = (pinned(t).to(dev, non_blocking=True) for t in (ids * mask, mask, labels))
        with cgjit_step("bert_train.step"):
            with torch.autocast(dev.type, dtype=torch.float16):
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)  # reads whether a gradient overflowed: a synchronization inside
            scaler.update()
            sched.step()
            opt.zero_grad(set_to_none=True)
        value = loss.item()
    print(f"step {step}: loss {f32(value)} scale {scaler.get_scale():.1f}")
print(f"parameters sum {param_checksum(torch, model)}")
timer.report()
