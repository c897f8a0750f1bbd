#!/usr/bin/env python3
"""t5_generate — an encoder-decoder: transformers' T5ForConditionalGeneration (4 encoder and 4
decoder layers, 256 wide, 4 heads, relative position buckets; random init, fp32) decoding with
model.generate: greedy, 48 new tokens for a batch of 2 fixed inputs of 20 tokens, the decoder's
self-attention and cross-attention keys and values cached, eight calls on different inputs.
stdout: the tokens of each sequence of each call and a checksum of the scores of each call;
stderr: "t5_generate: median_us=<x>" (a call's time per new token)."""
from _common import Timer, f64, marked, need, setup, steps

torch, dev = setup()
need("transformers")
import transformers  # noqa: E402

NEW, CALLS = steps(48, loop=False), steps(8)
cfg = transformers.T5Config(vocab_size=4096, d_model=256, d_kv=64, d_ff=1024, num_layers=4, num_decoder_layers=4,
                            num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
torch.manual_seed(0)
model = transformers.T5ForConditionalGeneration(cfg).to(dev).eval()
# Each forward pass generate makes (one per new token) is a step of its own under REAL_STEP=1.
model.forward = marked("t5_generate.forward", model.forward)
gen = torch.Generator().manual_seed(1)
timer = Timer("t5_generate")
for call in range(CALLS):
    x = torch.randint(2, 4096, (2, 20), generator=gen).to(dev)
    with timer:
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=NEW,
                             min_new_tokens=NEW, return_dict_in_generate=True, output_scores=True)
        seqs = out.sequences.tolist()
    for b, seq in enumerate(seqs):
        print(f"call {call} sequence {b}: {' '.join(map(str, seq))}")
    print(f"call {call} scores {f64(torch.stack(out.scores).double().sum().item())}")
timer.us = [us / NEW for us in timer.us]
timer.report(skip=1)
