"""fakegpu.py — GPU work for the Python tests, through the project's fake CUDA driver
(tests/fakecuda, $CGJIT_DRIVER) called with ctypes: under the preload, ctypes' symbol lookups
go through libcgjit's dlsym, so these calls are the program's as cgjit sees them."""
import ctypes
import os

_cu = ctypes.CDLL(os.environ["CGJIT_DRIVER"])
u64, u32 = ctypes.c_uint64, ctypes.c_uint32


def check(r, what):
    if r != 0:
        raise RuntimeError("%s failed: CUresult %d" % (what, r))


class Gpu:
    """One context, one stream, buffers of n 32-bit words."""

    def __init__(self):
        check(_cu.cuInit(0), "cuInit")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        check(_cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        check(_cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        check(_cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.stream = ctypes.c_void_p()
        check(_cu.cuStreamCreate(ctypes.byref(self.stream), 1), "cuStreamCreate")  # non-blocking

    def alloc(self, n):
        p = u64()
        check(_cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(4 * n)), "cuMemAlloc_v2")
        return p.value

    def fill(self, buf, value, n):
        """cuMemsetD32Async on the stream: absorbed and patched when a step replays."""
        check(_cu.cuMemsetD32Async(u64(buf), u32(value), ctypes.c_size_t(n), self.stream), "cuMemsetD32Async")

    def read(self, buf, n):
        """The buffer's words, after the stream's work (a host synchronization)."""
        check(_cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
        out = (u32 * n)()
        check(_cu.cuMemcpyDtoH_v2(out, u64(buf), ctypes.c_size_t(4 * n)), "cuMemcpyDtoH_v2")
        return list(out)
