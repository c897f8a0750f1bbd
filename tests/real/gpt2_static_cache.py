#!/usr/bin/env python3
"""gpt2_static_cache — sampling with transformers' generate() and a static key/value cache
(cache_implementation="static": preallocated, written in place, so every decoding step has the
same shapes), top-p 0.9, the global generator seeded with torch.manual_seed before each call,
64 new tokens for a batch of 2 fixed prompts of 12 tokens, four calls. generate's own
torch.compile of the forward is turned off (disable_compile=True): this is eager PyTorch. The model
is GPT2LMHeadModel in the shape of GPT-2 small (random init, fp16); where the installed
transformers cannot generate with GPT-2 and a static cache, a LlamaForCausalLM of about the same
size instead (the first line says which). stdout: the tokens of each sequence of each call and a
checksum of the logits of each call; stderr: "gpt2_static_cache: median_us=<x>" (a call's time per
new token). Under REAL_STEP=1 each forward pass generate makes is a step of its own (cgjit.step as
a decorator): the static cache is what docs/python.md tells a decode step that grows its cache
(gpt2_greedy) to take."""
from _common import Timer, f64, marked, need, setup, steps

torch, dev = setup()
need("transformers")
import transformers  # noqa: E402

NEW, CALLS = steps(64, loop=False), steps(4)


def build(kind):
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024)
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                                       num_attention_heads=12, num_key_value_heads=12, vocab_size=50257,
                                       max_position_embeddings=1024)
        model = transformers.LlamaForCausalLM(cfg)
    model = model.to(dev, torch.float16).eval()
    model.forward = marked("gpt2_static_cache.forward", model.forward)
    return model


def sample(model, prompt, seed):
    torch.manual_seed(seed)
    return model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                          top_p=0.9, top_k=0, max_new_tokens=NEW, min_new_tokens=NEW,
                          cache_implementation="static", disable_compile=True,
                          pad_token_id=model.config.eos_token_id, return_dict_in_generate=True,
                          output_logits=True)


prompt = torch.randint(0, 50257, (2, 12), generator=torch.Generator().manual_seed(1)).to(dev)
timer = Timer("gpt2_static_cache")
results = []
for kind in ("gpt2", "llama"):
    torch.manual_seed(0)
    model = build(kind)
    try:
        with timer:
            results.append(sample(model, prompt, 100))
        break
    except (ValueError, TypeError, NotImplementedError, AttributeError) as e:
        if kind == "llama":
            raise
        print(f"gpt2 cannot generate with a static cache here ({type(e).__name__})")
        timer.us.clear()
print(f"model {kind}")
for call in range(1, CALLS):
    with timer:
        results.append(sample(model, prompt, 100 + call))
for call, out in enumerate(results):
    for b, seq in enumerate(out.sequences.tolist()):
        print(f"call {call} sequence {b}: " + " ".join(str(t) for t in seq))
    total = torch.stack([x.double().nan_to_num(posinf=0.0, neginf=0.0).sum() for x in out.logits]).sum()
    print(f"call {call} logits sum {f64(total.item())}")
timer.us = [us / NEW for us in timer.us]
timer.report(skip=1)
