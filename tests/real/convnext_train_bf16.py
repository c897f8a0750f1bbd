#!/usr/bin/env python3
"""convnext_train_bf16 — training timm's ConvNeXt-Atto (convnext_atto: depthwise 7x7
convolutions, LayerNorm, GELU, layer scale; random init, 10 classes) at 64x64 under bf16
autocast, channels-last memory format, SGD with Nesterov momentum and weight decay, a step
learning-rate schedule, batches of 32 random images made on the CPU, pinned and copied with
non_blocking=True, 30 steps. stdout: the loss of every step, then a checksum of the parameters;
stderr: "convnext_train_bf16: median_us=<x>"."""
from _common import Timer, f32, need, param_checksum, pinned, setup, steps

torch, dev = setup(strict=True)
timm = need("timm")
model = timm.create_model("convnext_atto", pretrained=False, num_classes=10).to(dev)
model = model.to(memory_format=torch.channels_last).train()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
gen = torch.Generator().manual_seed(1)
timer = Timer("convnext_train_bf16")
for step in range(steps(30)):
    with timer:
        x = pinned(torch.randn(32, 3, 64, 64, generator=gen)).to(dev, non_blocking=True)
        x = x.contiguous(memory_format=torch.channels_last)
        y = pinned(torch.randint(0, 10, (32,), generator=gen)).to(dev, non_blocking=True)
        with torch.autocast("cuda" if dev.type == "cuda" else "cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
    print(f"step {step}: loss {f32(value)}")
print(f"parameters sum {param_checksum(torch, model)}")
timer.report()
