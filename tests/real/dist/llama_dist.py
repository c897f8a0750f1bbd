#!/usr/bin/env python3
"""llama_dist — data-parallel pre-training of llama_train.py's Llama, started the way PyTorch's
users start it: `python3 -m torch.distributed.run --standalone --nproc_per_node=2 llama_dist.py
LAYOUT`, LAYOUT one of
  ddp   DistributedDataParallel over the whole model (gradients all-reduced in buckets);
  fsdp  FSDP2 (`fully_shard` on each decoder layer, then on the model: parameters all-gathered
        before use, gradients reduce-scattered).
Each rank trains on its own batches (8x128 random tokens, made on the CPU from a generator seeded
by the rank, pinned, copied with non_blocking=True) with AdamW (foreach), gradient clipping at 1.0
and a cosine schedule with warm-up; each step all-reduces the loss (mean over the ranks) and reads
it with .item(), as training scripts log it.

stdout (rank 0 alone, so that the order is fixed): each step's loss on rank 0 and its mean over
the ranks, then every rank's parameter checksum (for fsdp, of the shard the rank holds), gathered
to rank 0. stderr: "llama_LAYOUT.rR: median_us=X" for each rank R, and "rank R pid P" (which
process is which rank, for the reports written per process)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _common import Timer, f32, f64, llama_step, need, nothing, pinned, setup, steps  # noqa: E402

LAYOUTS = ("ddp", "fsdp")
layout = sys.argv[1] if len(sys.argv) == 2 else ""
if layout not in LAYOUTS:
    print(f"usage: torchrun --nproc_per_node=N {sys.argv[0]} {{{'|'.join(LAYOUTS)}}}", file=sys.stderr)
    sys.exit(2)
if "LOCAL_RANK" not in os.environ:
    nothing("not started by torchrun (python3 -m torch.distributed.run)")
rank, world, local = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))

# Every rank builds the same model from the same seed.
torch, dev = setup(strict=True)
need("transformers")
import torch.distributed as dist  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, get_cosine_schedule_with_warmup  # noqa: E402

if torch.cuda.device_count() <= local:
    nothing(f"rank {rank} needs GPU {local}; {torch.cuda.device_count()} visible")
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
dist.init_process_group("nccl", device_id=dev)
print(f"rank {rank} pid {os.getpid()}", file=sys.stderr, flush=True)

cfg = LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=4, vocab_size=1024, max_position_embeddings=256,
                  attn_implementation="sdpa")
model = LlamaForCausalLM(cfg).to(dev).train()
if layout == "ddp":
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(model, device_ids=[local])
else:
    from torch.distributed.fsdp import fully_shard
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)

n = steps(200)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=True)
sched = get_cosine_schedule_with_warmup(opt, num_warmup_steps=10, num_training_steps=n)
gen = torch.Generator().manual_seed(1 + rank)
timer = Timer(f"llama_{layout}.r{rank}")
for step in range(n):
    with timer:
        x = pinned(torch.randint(0, cfg.vocab_size, (8, 128), generator=gen)).to(dev, non_blocking=True)
        loss = llama_step(torch, model, opt, sched, x)
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        both = torch.stack([loss.detach(), mean]).tolist()
    if rank == 0:
        print(f"step {step}: loss {f32(both[0])} mean {f32(both[1])} lr {sched.get_last_lr()[0]:.9e}", flush=True)

# Each rank's checksum: of the whole replica (ddp), of its shard (fsdp); gathered on rank 0.
with torch.no_grad():
    local_params = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
    mine = torch.stack([p.detach().double().sum() for p in local_params]).sum().reshape(1)
sums = [torch.zeros_like(mine) for _ in range(world)]
dist.all_gather(sums, mine)
if rank == 0:
    for r, s in enumerate(sums):
        print(f"rank {r} parameters sum {f64(s.item())}")
timer.report()
dist.destroy_process_group()
