#!/usr/bin/env python3
"""resnet_infer — inference with torchvision's ResNet-18 (random init, no weights), eval mode
under torch.inference_mode(): 50 batches of 8 random 3x112x112 images (a new batch each
iteration, made on the CPU, pinned and copied with non_blocking=True), cuDNN convolutions without
autotuning. stdout: per iteration, the sum of the logits in float64 and the first 4 logits, as
hex (one read-back); stderr: "resnet_infer: median_us=<x>"."""
from _common import Timer, f64, need, pinned, setup, steps

torch, dev = setup()
torchvision = need("torchvision")
model = torchvision.models.resnet18(weights=None).to(dev).eval()
gen = torch.Generator().manual_seed(1)
timer = Timer("resnet_infer")
with torch.inference_mode():
    for it in range(steps(50)):
        with timer:
            x = pinned(torch.randn(8, 3, 112, 112, generator=gen)).to(dev, non_blocking=True)
            logits = model(x).double()
            values = torch.cat([logits.sum().view(1), logits[0, :4]]).tolist()
        print(f"iter {it}: sum {f64(values[0])} first " + " ".join(f64(v) for v in values[1:]))
timer.report()
