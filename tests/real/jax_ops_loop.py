#!/usr/bin/env python3
"""jax_ops_loop — a 2D heat simulation written with jax.numpy op by op, without jax.jit, as
people first write JAX: every jnp call dispatches its own small XLA computation (a launch or
two each, the host between them), jnp.roll for the neighbours, a source whose strength changes
every iteration (a Python float passed in), the total heat read back with float() every 10 of
200 iterations. Launch-bound: cgjit's case. stdout: the total heat of every 10th iteration,
then a checksum of the grid; stderr: "jax_ops_loop: median_us=<x>" (per 10 iterations and their
read-back)."""
import math
import time

from _common import Timer, f32, jax_setup, steps

jax, jnp = jax_setup(preallocate=False)

N, ITERS, EVERY, ALPHA = 256, steps(200), 10, 0.2
u = jax.random.uniform(jax.random.PRNGKey(2), (N, N), jnp.float32)
mask = jnp.zeros((N, N), jnp.float32).at[N // 2 - 4:N // 2 + 4, N // 2 - 4:N // 2 + 4].set(1.0)
timer = Timer("jax_ops_loop")
t0 = time.perf_counter()
for it in range(ITERS):
    lap = jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1) - 4.0 * u
    u = u + ALPHA * lap + mask * (0.01 * (1.0 + math.sin(0.1 * it)))
    u = jnp.clip(u, 0.0, 10.0)
    if (it + 1) % EVERY == 0:
        heat = float(jnp.sum(u))
        timer.add((time.perf_counter() - t0) * 1e6)
        print(f"iter {it + 1}: heat {f32(heat)}")
        t0 = time.perf_counter()
print(f"grid sum {float(jnp.sum(u.astype(jnp.float32))).hex()}")
timer.report()
