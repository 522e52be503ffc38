"""ember.ops: the operator registry (the dispatcher) and every op record.

Importing this package imports each op-family module, which registers its
records; see registry.py for what a record holds and how a call is
dispatched.
"""
import warnings as _warnings

from . import api, registry

# numpy reports IEEE special values its ufuncs produce (inf - inf, 0/0, exp(1000)) as
# RuntimeWarnings attributed to the calling module; PyTorch's kernels produce the same
# NaN/inf silently. Ignored for ember's op kernels only -- a filter, not an errstate around
# every kernel (1.7 us each on the eager hot path) and not np.seterr (the user's numpy)
_warnings.filterwarnings("ignore", r"(invalid value|divide by zero|overflow|underflow) encountered",
                         RuntimeWarning, r"ember\.ops\.")
from .registry import OPS, defop, defcomposite, dispatch

# Op families. Each module registers its records on import; order matters only
# in that later modules may use bindings of earlier ones at import time. Their
# generated bindings' code objects come from the on-disk cache (_binding_cache.py).
from . import _binding_cache  # noqa: E402

with _binding_cache.group("ops"):
    from . import creation  # noqa: F401
    from . import sampling  # noqa: F401
    from . import pointwise  # noqa: F401
    from . import reduction  # noqa: F401
    from . import shape  # noqa: F401
    from . import dtype_view  # noqa: F401  (Tensor.view(dtype): torch's view.dtype)
    from . import shape_inplace  # noqa: F401
    from . import indexing  # noqa: F401
    from . import linalg  # noqa: F401
    from . import nn_ops  # noqa: F401
    from . import copy  # noqa: F401
    from . import search  # noqa: F401
    from . import shape_extra  # noqa: F401
    from . import lapack  # noqa: F401
    from . import more_pointwise  # noqa: F401
    from . import more_api  # noqa: F401
    from . import linalg_api, scatter_views, windows, misc_api  # noqa: F401
    from . import sampling_extra  # noqa: F401
    from . import linalg_extra  # noqa: F401
    from . import linalg_legacy  # noqa: F401  (geqrf/orgqr/ormqr; the removed solve/lstsq/eig/symeig/matrix_rank)
    from . import complex_ops  # noqa: F401
    from . import special_extra, special_bessel  # noqa: F401
    from . import torch_compat  # noqa: F401  (legacy tensor types, sym_*, nonzero_static, ...)
    from . import lowrank  # noqa: F401  (svd_lowrank, pca_lowrank, lobpcg)
    from . import top_level_gaps  # noqa: F401  (detach_, *_copy, embedding_bag, segment_reduce, ...)


def __getattr__(name):
    """``ember.ops.<namespace>``: the custom operators of that namespace (``ember.library``),
    as ``torch.ops.mylib.foo``. Only names that are not attributes of this package get here."""
    import sys
    if name == "aten":                  # torch.ops.aten's spelling of ember's ops (_aten_namespace.py)
        from ._aten_namespace import aten
        return aten
    if name == "higher_order":          # torch.ops.higher_order (cond: ember/_higher_order_ops/cond_op.py)
        import importlib
        return importlib.import_module(__name__ + ".higher_order")
    lib = sys.modules.get("ember.library._custom_op")
    ns = lib.namespace(name) if lib is not None and not name.startswith("__") else None
    if ns is None:
        raise AttributeError(f"module 'ember.ops' has no attribute '{name}'")
    return ns


# Ops whose torch backward is one fused kernel computing float16/bfloat16 in float32
# (``OpDef.opmath_backward``: the dtypes it applies to); the in-place variants share the formula.
# Measured against torch 2.13's CPU kernels, element for element: sigmoid's float16 backward runs
# in half steps ((g * (1 - y)) * y, each rounded), its bfloat16 one in float. Not listed (torch
# composes half ops there, or ember's formula already rounds as torch): mse/huber/bce losses,
# pow, rsqrt, the norms' backward (their remaining differences are noted in the session notes).
from ..types import bfloat16 as _bf16, float16 as _f16  # noqa: E402
for _name, _dts in (("sigmoid", (_bf16,)),) + tuple((n, (_f16, _bf16)) for n in (
        "tanh", "gelu", "silu", "mish", "elu", "celu", "softplus", "hardswish", "hardsigmoid", "logsigmoid",
        "leaky_relu", "hardtanh", "smooth_l1_loss", "_softmax", "_log_softmax")):
    _op = OPS[_name]
    _op.opmath_backward = _dts
    if _op.inplace_variant is not None:
        _op.inplace_variant.opmath_backward = _dts
del _name, _dts, _op
