"""torch_common — what the PyTorch sample programs share: torch on a CUDA device, or a line
saying there is nothing to do (exit 0), and deterministic arithmetic (deterministic algorithms,
no TF32, cuDNN deterministic without autotuning, seed 0), so that two eager runs of a script
print the same bits and a run under cgjit can be compared with one without it."""
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
try:
    import torch
except ImportError:
    print("torch is not installed: nothing to do")
    sys.exit(0)
if not torch.cuda.is_available():
    print("no CUDA device: nothing to do")
    sys.exit(0)


def deterministic_cuda():
    """The CUDA device, with deterministic arithmetic and the seed set."""
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    return torch.device("cuda")
