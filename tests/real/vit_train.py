#!/usr/bin/env python3
"""vit_train — training timm's ViT-Tiny (vit_tiny_patch16_224 made for 64x64 images and 10
classes: 16 patches of 16x16 and a class token, 12 blocks, 192 wide, 3 heads; random init, no
pretrained weights) with AdamW: batches of 16 random images and labels made on the CPU, pinned
and copied with non_blocking=True, cross-entropy, the loss read with .item() every step, 30
steps. stdout: the loss of every step, then a checksum of the parameters; stderr:
"vit_train: median_us=<x>"."""
from _common import Timer, cgjit_step, f32, need, param_checksum, pinned, setup, steps

torch, dev = setup(strict=True)
timm = need("timm")
model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=64).to(dev).train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
gen = torch.Generator().manual_seed(1)
timer = Timer("vit_train")
for step in range(steps(30)):
    with timer:
        x = pinned(torch.randn(16, 3, 64, 64, generator=gen)).to(dev, non_blocking=True)
        y = pinned(torch.randint(0, 10, (16,), generator=gen)).to(dev, non_blocking=True)
        with cgjit_step("vit_train.step"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        value = loss.item()
    print(f"step {step}: loss {f32(value)}")
print(f"parameters sum {param_checksum(torch, model)}")
timer.report()
