"""``ember.backends``: PyTorch's backend switches, answered for ember's backends.

Scripts set these at the top (``torch.backends.cudnn.benchmark = True``, often after
``import torch.backends.cudnn as cudnn``) and ask them (``torch.backends.mps.is_available()``).
ember's kernels are numpy/OpenBLAS and its own C++ (cpu) and cupy (cuda): there is no cuDNN,
MKL-DNN, MPS or MKL backend, so ``is_available()`` says False for those, and their switches
are module attributes with PyTorch's defaults, settable and readable, that do not change what
ember runs. ``openmp.is_available()`` is True when ember's compiled kernels (OpenMP loops)
can build: a C++ compiler is there. ``mha`` holds the MultiheadAttention/TransformerEncoder
fast-path switch, which ember's modules do consult.
"""
from . import cpu, cuda, cudnn, mha, mkl, mkldnn, mps, openmp, quantized  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mha", "mkl", "mkldnn", "mps", "openmp", "quantized"]
