"""ember: a PyTorch-style deep-learning framework with its own compiler.

``import ember as torch`` gives the torch-like top level: tensors and their
factories, every registry op as a function, grad-mode switches, autograd,
nn, optim, fx, and (as they land) ``ember.compile``.
"""
from __future__ import annotations

# first, before anything could load an OpenMP runtime: the compiled kernels' wait policy
# (see ember/_openmp.py; a value the user exported wins)
from . import _openmp
_openmp.at_import()
# big arrays stay in glibc's heap between calls (no page faults per output; ember/_malloc.py)
from . import _malloc
_malloc.at_import()
# numpy's OpenBLAS runs its threaded jobs on the OpenMP pool of ember's kernels (ember/_blas_threads.py)
from . import _blas_threads
_blas_threads.install()

from . import types as _types
from .types import (Size, bfloat16, bool_ as bool, device, dtype, float16, float32, float64, int8, int16,
                    int32, int64, uint8, get_default_dtype, set_default_dtype, promote_types,
                    complex64, complex128)
# torch's partially supported dtypes (ember/ops/limited_dtypes.py says which ops run on them)
from .types import (uint16, uint32, uint64, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz,  # noqa: E402
                    float8_e5m2fnuz, float8_e8m0fnu)
# torch's sub-byte / bit-container dtypes: made, viewed and moved only (ember/types.py, SUBBYTE_DTYPES)
from .types import (uint1, uint2, uint3, uint4, uint5, uint6, uint7, int1, int2, int3, int4, int5, int6,  # noqa: E402
                    int7, bits1x8, bits2x4, bits4x2, bits8, bits16, float4_e2m1fn_x2)
from .tensor import Parameter, Tensor
from . import ops as _ops
from .ops import api as _api
from .random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, \
    set_rng_state
from . import autograd
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .autograd.grad_mode import is_inference_mode_enabled
from . import cpu, cuda  # noqa: E402  (torch.cpu / torch.cuda device modules)
from . import amp
from .amp import autocast, get_autocast_dtype, is_autocast_available, is_autocast_enabled
from .amp.autocast_mode import (set_autocast_enabled, set_autocast_dtype, is_autocast_cpu_enabled,  # noqa: E402
                                set_autocast_cpu_enabled, get_autocast_cpu_dtype, set_autocast_cpu_dtype,
                                get_autocast_gpu_dtype, set_autocast_gpu_dtype, is_autocast_cache_enabled,
                                set_autocast_cache_enabled, clear_autocast_cache, autocast_increment_nesting,
                                autocast_decrement_nesting)
from ._settings import *  # noqa: F401,F403  (set_num_threads, use_deterministic_algorithms, ...)
from . import storage as _storage_mod   # Tensor.untyped_storage/storage/set_ (ember/storage.py)
from .storage import UntypedStorage, TypedStorage, is_storage, from_file
globals().update(_storage_mod.LEGACY_STORAGE_TYPES)    # FloatStorage, LongStorage, ...

half = float16
float = float32
double = float64
short = int16
int = int32
long = int64
cfloat = complex64
cdouble = complex128
from ._layout import layout, strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc  # noqa: E402
from ._memory_format import (memory_format, contiguous_format, preserve_format, channels_last,  # noqa: E402
                             channels_last_3d)


def _export_api():
    g = globals()
    for name in dir(_api):
        if name.startswith("__"):
            continue
        if name.startswith("_") and name not in ("_to_copy_if_needed", "_conj_copy", "_neg_view_copy",
                                                 "_reshape_alias_copy"):
            continue
        val = getattr(_api, name)
        # api functions win over submodules of the same name (ember.tensor is the
        # factory function, as in torch; the module stays importable as ember.tensor).
        if name not in g or type(g[name]).__name__ == "module" or name in ("range",):
            g[name] = val


_export_api()

# sparse tensors: methods, factories, and ember.mm/matmul/add/... routing sparse arguments (ember/sparse)
from .sparse import _install as _sparse_install  # noqa: E402
from .ops import _binding_cache as _bc  # noqa: E402
with _bc.group("sparse_routing"):     # the routing's generated code, cached as the bindings' is
    _sparse_install.install(__import__("sys").modules[__name__])
del _sparse_install

# quantized tensors: ember.qint8/quint8/qint32, quantize_per_tensor, the qschemes, Tensor.dequantize (ember/_quantized)
from ._quantized import install as _q_install  # noqa: E402
_q_install.install(globals())
del _q_install

# torch's out= on the hand-written top-level functions (after the sparse routing, which swaps
# some of their code objects); the generated op bindings take out= themselves (ember/ops/_out.py)
from .ops import _out as _out_mod  # noqa: E402
_out_mod.install(globals(), _out_mod.TOP_LEVEL)
del _out_mod


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(t):
    return t.dtype.is_floating_point


def is_complex(t):
    return t.dtype.is_complex


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    if not isinstance(input, Tensor):
        raise TypeError(f"allclose(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input.allclose(other, rtol, atol, equal_nan)


def equal(input, other):
    if not isinstance(input, Tensor):
        raise TypeError(f"equal(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input.equal(other)


def numel(t):
    return t.numel()


def result_type(a, b):
    from .ops._helpers import result_dtype
    arrs = [x._data if isinstance(x, Tensor) else x for x in (a, b)]
    return result_dtype(*arrs)


def can_cast(from_, to):
    return _types.can_cast(from_, to)


def set_printoptions(**kwargs):
    from ._tensor_str import set_printoptions as _sp
    _sp(**kwargs)


def _lazy(name):
    import importlib
    return importlib.import_module(f"ember.{name}")


# torch names with no better home: OutOfMemoryError, AcceleratorError, GradScaler, is_distributed and the
# Tensor methods dim_order / const_data_ptr / module_load (ember/_api_gaps.py)
from ._api_gaps import install as _gaps_install  # noqa: E402
_gaps_install(globals())
del _gaps_install
from ._assertions import _assert, _assert_async  # noqa: E402,F401  (plain Python: traced through by dynamo)


# top-level torch names whose implementations live in a module of their own, loaded on first use
_TOP_LEVEL_FROM = {
    **dict.fromkeys(("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell",
                     "rnn_relu_cell"), "_rnn_functions"),
    # small ATen entry points, SyncBatchNorm kernels, sparse x dense products (ember/_torch_level_gaps.py)
    **dict.fromkeys(__import__("ember._torch_level_gaps", fromlist=["__all__"]).__all__, "_torch_level_gaps"),
    **dict.fromkeys(("has_lapack", "has_mkl", "has_openmp", "has_spectral", "legacy_contiguous_format", "fork",
                     "wait", "Storage", "StorageBase", "QInt8Storage", "QUInt8Storage", "QInt32Storage",
                     "QUInt4x2Storage", "QUInt2x4Storage"), "_torch_level_gaps"),
    **dict.fromkeys(("parse_schema", "FunctionSchema", "Argument"), "_function_schema"),   # torch's schema objects
    **dict.fromkeys(("Stream", "Event", "SymFloat", "Tag"), "_generic_stream"),   # CPU streams/events, SymFloat, Tag
    "Future": "futures",                    # torch.Future: the futures' class (ember/futures.py)
}
_LAZY_MODULES_EXTRA = ("futures", "hub", "quasirandom", "functional",    # torch.futures, .hub, .quasirandom, .functional
                       "mps", "xpu", "mtia", "torch_version",    # absent backends (ember/_absent_backend.py), versions
                       "_functorch", "_inductor", "_subclasses", "_decomp",   # torch's private modules custom backends use
                       "package", "monitor", "_logging")       # torch.package, torch.monitor, torch._logging


def __getattr__(name):
    # Subpackages that import heavy things load on first use.
    if name in ("nn", "optim", "fx", "utils", "dynamo", "aot", "prims", "inductor", "compiler",
                "serialization", "testing", "random", "linalg", "backends", "special", "distributions", "jit", "profiler", "func", "_dynamo",
                "library", "fft", "export", "_higher_order_ops", "signal", "multiprocessing",
                "distributed", "accelerator", "version", "overrides", "_C", "masked"):
        mod = _lazy(name)
        globals()[name] = mod
        return mod
    if name == "__version__":               # ember/version.py: the package metadata's version, a comparable str
        from .version import __version__
        return __version__
    if name == "get_device_module":         # torch.get_device_module (ember/accelerator.py)
        from .accelerator import get_device_module
        return get_device_module
    if name in ("ao", "quantization"):     # ember.ao.quantization, and its deprecated alias ember.quantization
        mod = _lazy(name)
        globals()[name] = mod
        return mod
    if name in ("save", "load"):
        mod = _lazy("serialization")
        return getattr(mod, name)
    if name in ("cond", "while_loop"):      # torch.cond / torch.while_loop (ember/_higher_order_ops.py)
        return getattr(_lazy("_higher_order_ops"), name)
    if name in ("DisableTorchFunction", "DisableTorchFunctionSubclass"):   # ember/_torch_function.py
        from . import _torch_function
        return getattr(_torch_function, name)
    if name == "compile":
        from .dynamo import compile as _compile
        return _compile
    if name in ("complex32", "chalf"):
        raise _types._complex32_error()
    if name in ("SymInt", "SymBool"):    # ember's symbolic sizes (no SymFloat: ember has no symbolic floats)
        return getattr(_lazy("fx.experimental.symbolic_shapes"), name)
    if name == "vmap":
        from .func import vmap as _vmap
        return _vmap
    if name in _TOP_LEVEL_FROM:             # torch names kept in their own modules (see _TOP_LEVEL_FROM)
        return getattr(_lazy(_TOP_LEVEL_FROM[name]), name)
    if name in _LAZY_MODULES_EXTRA:
        mod = _lazy(name)
        globals()[name] = mod
        return mod
    if name == "onnx":                      # ember.onnx (imports the onnx package only when exporting)
        mod = _lazy("onnx")
        globals()[name] = mod
        return mod
    if not name.startswith("_") and hasattr(_api, name):
        return getattr(_api, name)
    aliases = _lazy("_aten_aliases")
    if name in aliases.NAMES:     # torch.max_pool2d, torch.kl_div(..., reduction=1), ...
        return getattr(aliases, name)
    raise AttributeError(f"module 'ember' has no attribute '{name}'")


def __dir__():
    """``dir(ember)``: the module's names and the ones ``__getattr__`` resolves on first use
    (``ember.nn``, ``ember.compile``, ``ember.max_pool2d``, ...), so tab completion lists them."""
    names = set(globals())
    names.update(("nn", "optim", "fx", "utils", "dynamo", "aot", "prims", "inductor", "compiler",
                  "serialization", "testing", "random", "linalg", "backends", "special", "distributions", "jit",
                  "profiler", "func", "_dynamo", "library", "fft", "export", "_higher_order_ops", "signal",
                  "multiprocessing", "distributed", "accelerator", "version", "overrides", "_C", "masked",
                  "__version__", "get_device_module", "ao", "quantization", "save", "load", "cond", "while_loop",
                  "DisableTorchFunction", "DisableTorchFunctionSubclass", "compile", "SymInt", "SymBool", "vmap",
                  "onnx"))
    names.update(_TOP_LEVEL_FROM)
    names.update(_LAZY_MODULES_EXTRA)
    names.update(n for n in dir(_api) if not n.startswith("_"))
    names.update(_lazy("_aten_aliases").NAMES)
    return sorted(names)


# ops refuse the dtypes torch runs few kernels on (uint16/32/64, float8) as torch does; once every
# op is registered (ember/ops/limited_dtypes.py)
from .ops import limited_dtypes as _limited_dtypes  # noqa: E402
_limited_dtypes.install()


# nested tensors: methods and the routing of matmul/bmm/cat/F.linear/... for them (ember/nested);
# last, so that no later regeneration of an op binding (refresh_binding) drops the routing
from ._layout import jagged  # noqa: E402
from .nested import _install as _nested_install  # noqa: E402
_nested_install.install(__import__("sys").modules[__name__])
del _nested_install, _bc

# TORCH_LOGS: torch's spelling of EMBER_LOGS, applied through ember._logging (only when set)
if "TORCH_LOGS" in __import__("os").environ or "TORCH_TRACE" in __import__("os").environ:
    _lazy("_logging")._internal._init_from_env()

# torch._foreach_add_, _foreach_norm, ...: list versions of per-tensor ops (ember/_foreach.py)
from ._foreach import *  # noqa: E402,F401,F403

# the private entry functions behind public names carry those names (Python's own binding errors
# name them as torch's do): last, once every public function and method is installed
from . import _public_names as _pn  # noqa: E402
_pn.install(__import__("sys").modules[__name__])
del _pn
