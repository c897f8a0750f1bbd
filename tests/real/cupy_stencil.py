#!/usr/bin/env python3
"""cupy_stencil — a 2D Jacobi solver written with CuPy, as people write one without a framework:
a 512x512 float32 grid, random inside, its top edge held at a temperature that changes every
iteration (a cp.RawKernel whose scalar argument differs from launch to launch), the 5-point
stencil as a cp.ElementwiseKernel with a raw input, the two grids swapped after each iteration;
every 10 iterations the residual max|new - old| (a CuPy reduction) read back with .item(); 300
iterations. stdout: the residual of every 10th iteration, then a checksum of the grid; stderr:
"cupy_stencil: median_us=<x>" (per 10 iterations and their read-back)."""
import math
import time

from _common import Timer, cupy_setup, f32, f64

cp = cupy_setup()

N, ITERS, EVERY = 512, 300, 10
jacobi = cp.ElementwiseKernel(
    "raw float32 a, int32 n", "float32 b",
    """
    int r = (int)(i / n), c = (int)(i % n);
    if (r == 0 || c == 0 || r == n - 1 || c == n - 1) b = a[i];
    else b = 0.25f * (a[i - 1] + a[i + 1] + a[i - n] + a[i + n]);
    """,
    "jacobi5")
hot_edge = cp.RawKernel(r"""
extern "C" __global__ void hot_edge(float *a, int n, float t) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < n) a[c] = t;
}
""", "hot_edge")

a = cp.random.RandomState(seed=1).random_sample(N * N, dtype=cp.float32)  # row-major N x N
b = cp.empty_like(a)
timer = Timer("cupy_stencil")
t0 = time.perf_counter()
for it in range(ITERS):
    hot_edge(((N + 127) // 128,), (128,), (a, cp.int32(N), cp.float32(1.0 + 0.5 * math.sin(0.05 * it))))
    jacobi(a, N, b)
    if (it + 1) % EVERY == 0:
        residual = cp.abs(b - a).max().item()
        timer.add((time.perf_counter() - t0) * 1e6)
        print(f"iter {it + 1}: residual {f32(residual)}")
        t0 = time.perf_counter()
    a, b = b, a
print(f"grid sum {f64(a.astype(cp.float64).sum().item())}")
timer.report()
