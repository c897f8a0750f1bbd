#!/usr/bin/env python3
"""jax_mlp_train — an MLP classifier trained with JAX as its users write one: the training step
under jax.jit (XLA's fused kernels, cuBLAS GEMMs, XLA's own streams, events and allocator, which
takes most of the GPU's memory at start), Adam written by hand with its bias corrections, each
step's batch drawn on the device from a key split off the last, the loss read back with float()
every step; 60 steps. XLA runs deterministic ops (--xla_gpu_deterministic_ops), so two eager runs
print the same bits. stdout: every step's loss, then a checksum of the parameters; stderr:
"jax_mlp_train: median_us=<x>"."""
from _common import Timer, f32, jax_setup, steps

jax, jnp = jax_setup()

IN, HID, OUT, BATCH = 256, 512, 10, 64
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def init(key):
    sizes = [(IN, HID), (HID, HID), (HID, OUT)]
    keys = jax.random.split(key, len(sizes))
    return [(jax.random.normal(k, s, jnp.float32) * (2.0 / s[0]) ** 0.5, jnp.zeros((s[1],), jnp.float32))
            for k, s in zip(keys, sizes)]


def loss_fn(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.gelu(h @ w + b)
    w, b = params[-1]
    logits = h @ w + b
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@jax.jit
def train_step(params, m, v, t, key):
    key, kx, ky = jax.random.split(key, 3)
    x = jax.random.normal(kx, (BATCH, IN), jnp.float32)
    y = jax.random.randint(ky, (BATCH,), 0, OUT)
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    t = t + 1
    m = jax.tree_util.tree_map(lambda a, g: B1 * a + (1 - B1) * g, m, grads)
    v = jax.tree_util.tree_map(lambda a, g: B2 * a + (1 - B2) * g * g, v, grads)
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    params = jax.tree_util.tree_map(lambda p, a, b: p - LR * (a / c1) / (jnp.sqrt(b / c2) + EPS), params, m, v)
    return params, m, v, t, key, loss


params = init(jax.random.PRNGKey(0))
m = jax.tree_util.tree_map(jnp.zeros_like, params)
v = jax.tree_util.tree_map(jnp.zeros_like, params)
t = jnp.zeros((), jnp.float32)
key = jax.random.PRNGKey(1)
timer = Timer("jax_mlp_train")
for step in range(steps(60)):
    with timer:
        params, m, v, t, key, loss = train_step(params, m, v, t, key)
        value = float(loss)
    print(f"step {step}: loss {f32(value)}")
total = sum(float(jnp.sum(w)) + float(jnp.sum(b)) for w, b in params)
print(f"param sum {float(total).hex()}")
timer.report()
