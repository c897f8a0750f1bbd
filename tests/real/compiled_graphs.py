#!/usr/bin/env python3
"""compiled_graphs — the small transformer of compiled_train.py (_tiny_transformer.py) under
torch.compile(mode="reduce-overhead"): Inductor's kernels replayed through PyTorch's own CUDA
graphs (cudagraph trees: stream capture on a side stream, a private memory pool, graph launches
each step), as users write it to cut launch overhead themselves. Under cgjit the program's own
graphs must come through exactly as they are. 30 training steps (AdamW foreach left eager, the
loss read with .item() every step), then 20 steps of greedy decoding over a sliding window of
fixed length under inference_mode, the compiled forward replayed by PyTorch's graphs, each token
read back. Inductor's cache in a directory of this program's own, as compiled_train.py.
stdout: each step's loss, each token, a parameter checksum; stderr:
"compiled_graphs: median_us=<x>" (the training steps)."""
from _common import Timer, f32, param_checksum, steps
from _tiny_transformer import BATCH, SEQ, VOCAB, compiled_setup, model_class

torch, dev = compiled_setup("torch.compile's CUDA graphs are what this program checks")

F = torch.nn.functional
Model = model_class(torch)


def loss_of(model, x):
    logits = model(x[:, :-1])
    return F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))


model = Model().to(dev).train()
train_step = torch.compile(loss_of, mode="reduce-overhead")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=True)
gen = torch.Generator().manual_seed(1)
timer = Timer("compiled_graphs")
for step in range(steps(30)):
    with timer:
        x = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen).to(dev)
        torch.compiler.cudagraph_mark_step_begin()
        loss = train_step(model, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
    print(f"step {step}: loss {f32(value)}")

model.eval()
forward = torch.compile(model, mode="reduce-overhead")
window = torch.randint(0, VOCAB, (1, SEQ), generator=gen).to(dev)
with torch.inference_mode():
    for i in range(steps(20, loop=False)):
        torch.compiler.cudagraph_mark_step_begin()
        token = forward(window)[0, -1].argmax()
        window = torch.cat([window[:, 1:], token.view(1, 1)], dim=1)
        print(f"token {i}: {token.item()}")
print(f"parameters sum {param_checksum(torch, model)}")
timer.report(skip=3)
