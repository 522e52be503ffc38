"""``ember.backends.cuda``: the cuda device's switches (``matmul.allow_tf32``: cupy's matmul does
not read it; kept with PyTorch's default)."""


class _Matmul:
    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _Matmul()


def is_built():
    """Whether ember's cuda device can run here (cupy and a GPU)."""
    from .. import cuda
    return cuda.is_available()
