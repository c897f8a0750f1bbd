#!/usr/bin/env python3
"""compiled_train — a small transformer (_tiny_transformer.py) trained under torch.compile in its
default mode, as its users write it: Inductor's generated Triton kernels (launched by Triton's
own launcher through the driver), cuBLAS GEMMs, SDPA, the forward and backward compiled, no CUDA
graphs of PyTorch's own; AdamW (foreach) left eager, gradient clipping, batches of random tokens
made on the CPU, pinned and copied with non_blocking=True, the loss read with .item() every step;
40 steps. Inductor's compiled code and its autotuning choices are kept in a cache directory of
this program's own (TORCHINDUCTOR_CACHE_DIR, set by _tiny_transformer.compiled_setup unless
given), so every run after the first takes the same kernels: two eager runs print the same bits.
stdout: the loss of every step, then a checksum of the parameters; stderr: "compiled_train:
median_us=<x>"."""
from _common import Timer, f32, param_checksum, pinned, steps
from _tiny_transformer import BATCH, SEQ, VOCAB, compiled_setup, model_class

torch, dev = compiled_setup("torch.compile's GPU code is what this program checks")

F = torch.nn.functional


class Model(model_class(torch)):
    def forward(self, idx, targets):
        logits = super().forward(idx)
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


model = Model().to(dev).train()
step_fn = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=True)
gen = torch.Generator().manual_seed(1)
timer = Timer("compiled_train")
for step in range(steps(40)):
    with timer:
        x = pinned(torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)).to(dev, non_blocking=True)
        loss = step_fn(x[:, :-1], x[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
    print(f"step {step}: loss {f32(value)}")
print(f"parameters sum {param_checksum(torch, model)}")
timer.report(skip=3)
