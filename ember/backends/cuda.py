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


# Which scaled-dot-product-attention kernels may run (``ember.nn.attention.sdpa_kernel``
# sets these, as PyTorch's does). ember's single implementation counts as MATH and, as on
# PyTorch's CPU build, FLASH_ATTENTION: F.scaled_dot_product_attention refuses to run when
# both are off.
_SDP = {"math": True, "flash": True, "mem_efficient": True, "cudnn": True, "overrideable": True}


def _sdp_flags():
    return dict(_SDP)


def _set_sdp_flags(flags):
    _SDP.update(flags)


def _sdp_runnable():
    return _SDP["math"] or _SDP["flash"]


def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """The deprecated context manager choosing the attention kernels (PyTorch's, superseded by
    ``ember.nn.attention.sdpa_kernel``): the switches hold inside the ``with`` block and are
    restored after it."""
    import contextlib
    import warnings
    warnings.warn("ember.backends.cuda.sdp_kernel() is deprecated; use ember.nn.attention.sdpa_kernel() "
                  "instead.", FutureWarning, stacklevel=2)

    @contextlib.contextmanager
    def ctx():
        saved = _sdp_flags()
        _set_sdp_flags({"flash": bool(enable_flash), "math": bool(enable_math),
                        "mem_efficient": bool(enable_mem_efficient), "cudnn": bool(enable_cudnn)})
        try:
            yield
        finally:
            _set_sdp_flags(saved)
    return ctx()


def math_sdp_enabled():
    return _SDP["math"]


def enable_math_sdp(enabled: bool):
    _SDP["math"] = bool(enabled)


def flash_sdp_enabled():
    return _SDP["flash"]


def enable_flash_sdp(enabled: bool):
    _SDP["flash"] = bool(enabled)


def mem_efficient_sdp_enabled():
    return _SDP["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool):
    _SDP["mem_efficient"] = bool(enabled)


def cudnn_sdp_enabled():
    return _SDP["cudnn"]


def enable_cudnn_sdp(enabled: bool):
    _SDP["cudnn"] = bool(enabled)
