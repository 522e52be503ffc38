"""Backends: what a captured FX graph is handed to.

A backend is ``backend(gm, example_inputs) -> callable``. Names resolve here:
``"eager"`` runs the GraphModule as is; ``"aot_eager"`` is
``ember.aot.aot_eager``; ``"inductor"`` is ``ember.aot.aot_autograd`` with
``ember.inductor.compile_fx`` compiling the forward and backward graphs (as
in PyTorch). A name whose package cannot be imported raises
NotImplementedError naming what is missing, when ``ember.compile`` is called."""
from __future__ import annotations

from typing import Callable

from . import logs


def eager(gm, example_inputs):
    """Run the captured graph with ember's eager ops."""
    return gm.forward


def _per_shape(compile_one, gm, example_inputs, name):
    """A graph with symbolic sizes (``gm.meta["dynamic"]``) for an AOT backend: compiled once per
    distinct input layout (shapes and strides), each compilation static.

    AOT's own symbolic tracing records shape guards that nothing would check when dynamo reuses
    the entry for other sizes, so specialising inside the backend is what keeps answers exact."""
    if not gm.meta.get("dynamic"):
        return compile_one(gm, example_inputs)
    logs.get("recompiles").info("backend %s: graph has symbolic sizes; the AOT pipeline compiles it once "
                                "per input shape (its own shape guards would go unchecked)", name)
    from ..tensor import Tensor
    compiled = {}

    def key(inputs):
        return tuple((tuple(t._data.shape), t._data.strides) if isinstance(t, Tensor) else None
                     for t in inputs)

    compiled[key(example_inputs)] = compile_one(gm, list(example_inputs))

    def run(*inputs):
        k = key(inputs)
        fn = compiled.get(k)
        if fn is None:
            fn = compiled[k] = compile_one(gm, list(inputs))
        return fn(*inputs)
    return run


def _aot_eager(gm, example_inputs):
    from ..aot import aot_eager as impl
    return _per_shape(impl, gm, example_inputs, "aot_eager")


def _inductor(gm, example_inputs):
    from ..aot import aot_autograd
    from ..inductor import compile_fx
    return _per_shape(aot_autograd(fw_compiler=compile_fx, bw_compiler=compile_fx), gm, example_inputs,
                      "inductor")


_REGISTRY: dict[str, Callable] = {"eager": eager, "aot_eager": _aot_eager, "inductor": _inductor}


def register_backend(name: str, fn: Callable):
    _REGISTRY[name] = fn
    return fn


def list_backends():
    return sorted(_REGISTRY)


def lookup(backend) -> Callable:
    """Resolve ``backend`` (a name or a callable); unknown or unavailable names raise now, not at first call."""
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string or a callable, got {type(backend).__name__}")
    if backend not in _REGISTRY:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(list_backends())}")
    if backend == "aot_eager":
        try:
            from ..aot import aot_eager  # noqa: F401
        except ImportError as e:
            raise NotImplementedError(
                f"backend='aot_eager' needs ember.aot.aot_eager, which is not available ({e}); "
                "use backend='eager'") from e
    if backend == "inductor":
        try:
            from ..aot import aot_autograd  # noqa: F401
            from ..inductor import compile_fx  # noqa: F401
        except ImportError as e:
            raise NotImplementedError(
                f"backend='inductor' needs ember.aot.aot_autograd and ember.inductor.compile_fx, which are "
                f"not available ({e}); use backend='eager'") from e
    return _REGISTRY[backend]
