#!/usr/bin/env python3
"""cupy_libs — a CuPy program that leans on the CUDA libraries cgjit does not absorb as library
calls, so their kernels reach it as the program's own: every step draws a batch from cuRAND
(CuPy's legacy RandomState: its generator's offset moves each call), filters it through cuFFT
(rfft2 and irfft2 of 256x256, the plans cached by CuPy), solves a 128x128 system with cuSOLVER
(getrf, getrs; CuPy reads the solver's status back to the host), multiplies a CSR matrix with
cuSPARSE (SpMV with its buffer), sorts and scans with CUB, and ends with a cuBLAS GEMM; the
checksums read back with .item(); 40 steps. stdout: each step's checksums as hex floats;
stderr: "cupy_libs: median_us=<x>"."""
import time

from _common import Timer, cupy_setup, f64, nothing

cp = cupy_setup()
try:
    import cupyx.scipy.sparse as sparse
except ImportError as e:
    nothing(f"cupyx.scipy.sparse is not available ({e})")

N, M, STEPS = 256, 128, 40
rs = cp.random.RandomState(seed=7)  # cuRAND's host API
# A fixed low-pass filter in the frequency domain, a well-conditioned system and a sparse band.
ky = cp.fft.fftfreq(N)[:, None]
kx = cp.fft.rfftfreq(N)[None, :]
filt = cp.exp(-40.0 * (kx * kx + ky * ky)).astype(cp.complex64)
g = rs.standard_normal((M, M), dtype=cp.float32)
a_sys = g @ g.T + M * cp.eye(M, dtype=cp.float32)
band = sparse.diags([cp.full(N * 4 - 1, -1.0, cp.float32), cp.full(N * 4, 2.5, cp.float32),
                     cp.full(N * 4 - 1, -1.0, cp.float32)], [-1, 0, 1], format="csr")
w = rs.standard_normal((N, N), dtype=cp.float32)
cp.cuda.Device().synchronize()

timer = Timer("cupy_libs")
for step in range(STEPS):
    t0 = time.perf_counter()
    x = rs.standard_normal((N, N), dtype=cp.float32)
    smooth = cp.fft.irfft2(cp.fft.rfft2(x) * filt, s=(N, N))
    rhs = smooth[:M, :4].copy()
    sol = cp.linalg.solve(a_sys, rhs)
    v = band @ smooth.ravel()[: N * 4]
    order = cp.sort(smooth.ravel())
    scan = cp.cumsum(order, dtype=cp.float64)
    mixed = smooth @ w
    sums = [smooth.sum(dtype=cp.float64), sol.sum(dtype=cp.float64), v.sum(dtype=cp.float64),
            scan[-1], order[N * N // 2].astype(cp.float64), mixed.sum(dtype=cp.float64)]
    values = [s.item() for s in sums]
    timer.add((time.perf_counter() - t0) * 1e6)
    print(f"step {step}: " + " ".join(f64(s) for s in values))
timer.report()
