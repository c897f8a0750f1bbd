#!/usr/bin/env python3
"""detect_infer — object detection with torchvision: Faster R-CNN on a MobileNetV3 backbone with
FPN at 320 pixels (fasterrcnn_mobilenet_v3_large_320_fpn, random init, no pretrained weights),
inference_mode, batches of 2 random images of 320x320, 20 batches. The number of proposals and
detections follows the data (non-maximum suppression, score thresholds): steps whose shapes
change from one batch to the next. stdout: each image's detection count and a checksum of its
boxes, scores and labels; stderr: "detect_infer: median_us=<x>"."""
from _common import Timer, f64, need, setup, steps

torch, dev = setup()
tv = need("torchvision")
torch.manual_seed(0)
model = tv.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
    weights=None, weights_backbone=None, num_classes=11, box_score_thresh=0.0).to(dev).eval()
gen = torch.Generator().manual_seed(1)
timer = Timer("detect_infer")
for step in range(steps(20)):
    images = [torch.rand(3, 320, 320, generator=gen).to(dev) for _ in range(2)]
    with timer, torch.inference_mode():
        dets = model(images)
        rows = [(len(d["boxes"]), d["boxes"].double().sum().item(), d["scores"].double().sum().item(),
                 int(d["labels"].sum().item())) for d in dets]
    for i, (n, boxes, scores, labels) in enumerate(rows):
        print(f"step {step} image {i}: {n} detections, boxes {f64(boxes)} scores {f64(scores)} labels {labels}")
timer.report()
