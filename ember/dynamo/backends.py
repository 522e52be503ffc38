"""Backends: what a captured FX graph is handed to.

A backend is ``backend(gm, example_inputs) -> callable``. Names resolve here:
``"eager"`` runs the GraphModule as is; ``"aot_eager"`` is
``ember.aot.aot_eager``; ``"inductor"`` is ``ember.aot.aot_autograd`` with
``ember.inductor.compile_fx`` compiling the forward and backward graphs (as
in PyTorch).

Dynamic shapes through the AOT backends. A graph with symbolic sizes
(``gm.meta["dynamic"]``: ``dynamic=True``, ``mark_dynamic``, or automatic
dynamic after a size change) is compiled **once** for every size dynamo's
guards admit: aot traces it on dynamo's fakes in dynamo's ShapeEnv (same
symbols), so every guard aot or inductor adds is in the entry's guard function
and a call breaking one recompiles here (``ember/aot/backends.py``); inductor
compiles the forward and backward graphs with the sizes as kernel arguments
(``ember/inductor/dynamic.py``). What stays symbolic, as in torch.compile:
sizes flowing into views, reshapes, expands, slices, splits, factories
(``ember.ones(x.shape)``, ``x.new_zeros(x.size(0), 3)``, ``ember.arange(n)``)
size arithmetic with ints, and sizes as tensor operands (``t * x.size(1)``,
``x.size(1) - t``: a 0-d int64 tensor computed from the size). What
specialises, with a guard (so it is exact, and a new value recompiles): floats
computed from sizes (``x.size(-1) ** -0.5``, ``math.sqrt(x.size(-1))``, like
torch's default ``specialize_float``), a size passed where an operator takes
only a number (``alpha=``, ``clamp(max=)``, ``masked_fill`` values),
``int()``/f-strings of sizes, and Python branches on sizes. If aot
cannot trace on the symbolic sizes, the graph is compiled once per input
shape instead, logged on ``ember.dynamo.recompiles``.
A name whose package cannot be imported raises
NotImplementedError naming what is missing, when ``ember.compile`` is called."""
from __future__ import annotations

from typing import Callable



def eager(gm, example_inputs):
    """Run the captured graph with ember's eager ops."""
    return gm.forward


def _aot_eager(gm, example_inputs):
    from ..aot import aot_eager as impl
    return impl(gm, example_inputs)


def _inductor(gm, example_inputs):
    """AOT with inductor compiling the forward and backward graphs. A graph dynamo captured with
    symbolic sizes reaches the graph compiler with fake inputs of dynamo's symbols: compiled once,
    symbolically (``ember.inductor.dynamic``)."""
    from ..aot import aot_autograd
    from ..inductor.dynamic import compile_fx_maybe_symbolic
    return aot_autograd(fw_compiler=compile_fx_maybe_symbolic, bw_compiler=compile_fx_maybe_symbolic)(
        gm, example_inputs)


_REGISTRY: dict[str, Callable] = {"eager": eager, "aot_eager": _aot_eager, "inductor": _inductor}


# PyTorch's tags: the eager backends are for debugging, and list_backends() hides them by default
_TAGS: dict[str, tuple] = {"eager": ("debug",), "aot_eager": ("debug",)}


_DEFAULT = "inductor"


def get_default_backend():
    """The backend ``ember.compile`` uses when none is given (``"inductor"`` unless changed)."""
    return _DEFAULT


def set_default_backend(backend):
    """Make ``backend`` (a registered name or a callable ``backend(gm, example_inputs)``) what
    ``ember.compile`` uses when no ``backend=`` is given; None restores ``"inductor"``. A name is
    checked now (an unknown one raises here, not at the first compile)."""
    global _DEFAULT
    if backend is None:
        _DEFAULT = "inductor"
        return
    if isinstance(backend, str):
        lookup(backend)
    elif not callable(backend):
        raise TypeError(f"set_default_backend: expected a backend name or a callable, got {type(backend).__name__}")
    _DEFAULT = backend


def register_backend(name: str = None, fn: Callable = None, tags=()):
    """``register_backend("name", fn)``, or as a decorator (``@register_backend`` /
    ``@register_backend(name=..., tags=...)``) as ``torch._dynamo.register_backend``."""
    if callable(name) and fn is None:          # @register_backend
        name, fn = name.__name__, name
    if fn is None:
        return lambda f: register_backend(name or f.__name__, f, tags)
    _REGISTRY[name] = fn
    _TAGS[name] = tuple(tags)
    return fn


def list_backends(exclude_tags=("debug", "experimental")):
    """Registered backend names, without those tagged with one of ``exclude_tags`` (PyTorch's
    default hides the debugging backends ``eager`` and ``aot_eager``; pass ``None`` for all)."""
    excluded = set(exclude_tags or ())
    return sorted(n for n in _REGISTRY if not excluded.intersection(_TAGS.get(n, ())))


def lookup(backend) -> Callable:
    """Resolve ``backend`` (a name or a callable); unknown or unavailable names raise now, not at first call."""
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string or a callable, got {type(backend).__name__}")
    if backend not in _REGISTRY:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(list_backends(None))}")
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
