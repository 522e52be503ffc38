"""``ember.library``: user-defined operators (torch's ``torch.library.custom_op`` API).

A custom op wraps a Python function -- which may do anything, numpy included -- into an
operator of ember's dispatcher::

    @ember.library.custom_op("mylib::numpy_sin", mutates_args=())
    def numpy_sin(x: Tensor) -> Tensor:
        return ember.from_numpy(np.sin(x.numpy()))

    @numpy_sin.register_fake                 # shapes only: what ember.compile traces
    def _(x):
        return ember.empty_like(x)

    numpy_sin.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(),
                                setup_context=lambda ctx, inputs, out: ctx.save_for_backward(inputs[0]))

Eagerly the function runs; with ``register_autograd`` gradients flow through it.
Under ``ember.compile`` the call is **one opaque graph node**: dynamo records it without
tracing into the function (``ember/dynamo/variables/custom_op.py``), aot traces it with
the fake implementation and puts the registered backward (traced through: it is written
in ember ops) into the joint graph, and inductor runs the node as an extern call of the
function (``ember/inductor/custom_ops.py``). Where that cannot be done ember falls back to
eager and says why: a call of an op without a fake impl is a graph break naming the op,
and so is a call of a mutating op (``mutates_args``), which ember does not functionalize.

The schema is inferred from the annotations (``_schema.py``); the dispatcher record is
``_record.py``, autograd ``_autograd.py``, the user-facing object ``_custom_op.py``,
consistency checks ``_opcheck.py``.

Below ``custom_op`` is torch's low-level layer: ``Library(ns, kind)`` with ``define(schema)``
and ``impl(name, fn, dispatch_key)``, the module-level ``define``/``impl``/``impl_abstract``/
``get_kernel`` (``_library.py``), the per-dispatch-key kernels of ops defined that way
(``_defined.py``), ``get_ctx`` (``_fake_ctx.py``) and the per-op rules ``register_autocast``,
``register_vmap``, ``register_torch_dispatch`` plus ``triton_op``/``wrap_triton``
(``_extensions.py``).
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence, Union

from ._autograd import AutogradNotImplemented
from ._custom_op import CustomOpDef, lookup
from ._opcheck import OpCheckError, opcheck
from ._record import MissingFakeImpl
from ._schema import infer_schema as _infer, parse_schema as _parse
from ._defined import fallthrough_kernel
from ._extensions import register_autocast, register_torch_dispatch, register_vmap, triton_op, wrap_triton
from ._fake_ctx import get_ctx
from ._library import Library, define, get_kernel, impl, impl_abstract

__all__ = ["Library", "impl", "define", "fallthrough_kernel", "impl_abstract", "register_autocast", "register_fake",
           "register_torch_dispatch", "register_vmap", "get_ctx", "get_kernel", "custom_op", "triton_op",
           "wrap_triton", "infer_schema", "CustomOpDef", "register_autograd", "register_kernel", "opcheck",
           "OpCheckError", "MissingFakeImpl", "AutogradNotImplemented"]


def custom_op(name: str, fn: Optional[Callable] = None, /, *, mutates_args: Union[str, Iterable[str]],
              device_types: Union[None, str, Sequence[str]] = None, schema: Optional[str] = None):
    """Wrap ``fn`` into the custom operator ``name`` ("namespace::opname"); a decorator when
    ``fn`` is omitted.

    ``mutates_args``: the names of the tensor arguments ``fn`` writes to, ``()`` for none, or
    ``"unknown"`` (every tensor argument). ``device_types``: the device type(s) ``fn``
    serves (default: all). ``schema``: torch's schema string, instead of inferring it from
    ``fn``'s annotations (Tensor, Optional[Tensor], list[Tensor], int, float, bool, str,
    list[int]/list[float]/list[bool], ember.dtype, ember.device, Optional of those; returns
    Tensor, tuple[Tensor, ...], list[Tensor] or None)."""
    def inner(f: Callable) -> CustomOpDef:
        if not callable(f):
            raise TypeError(f"custom_op({name!r}): expected a function, got {type(f).__name__}")
        if schema is None:
            sch = _infer(f, mutates_args=mutates_args, op_name=name)
        else:
            sch = _parse(f, schema, mutates_args=mutates_args, op_name=name)
        return CustomOpDef(sch, f, device_types)
    return inner(fn) if fn is not None else inner


def register_fake(op: Union[str, CustomOpDef], func: Optional[Callable] = None, /, *, lib=None,
                  _stacklevel: int = 1, allow_override: bool = True):
    """``op.register_fake(func)`` for an op given by object or name (``custom_op``'s or
    ``Library.define``'s); a decorator without ``func``. ``lib`` is accepted for torch's
    signature (the registration lives on the op)."""
    custom = lookup(op)
    if func is None:
        return custom.register_fake
    return custom.register_fake(func)


def register_autograd(op: Union[str, CustomOpDef], backward: Callable, /, *,
                      setup_context: Optional[Callable] = None, lib=None) -> None:
    """``op.register_autograd(backward, setup_context=...)`` for an op given by object or name."""
    lookup(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op: Union[str, CustomOpDef], device_types: Union[str, Sequence[str]],
                    func: Optional[Callable] = None, /, *, lib=None):
    """``op.register_kernel(device_types, func)`` for an op given by object or name."""
    return lookup(op).register_kernel(device_types, func)


def infer_schema(fn: Callable, /, *, mutates_args: Union[str, Iterable[str]], op_name: Optional[str] = None) -> str:
    """The schema ``custom_op`` would infer for ``fn``, in torch's spelling (``(Tensor x) -> Tensor``;
    with the name in front when ``op_name`` is given)."""
    sch = _infer(fn, mutates_args=mutates_args, op_name=op_name or "mylib::op")
    text = sch.text
    return text if op_name else text[text.index("("):]


import enum as _enum  # noqa: E402

from ..ops._aten_namespace import OpOverload  # noqa: E402,F401 - torch.library's name for an op overload


class EffectType(_enum.Enum):
    """Side-effect kinds an op can be registered with (torch.library.EffectType): ORDERED ops
    must run in program order relative to each other."""
    ORDERED = "Ordered"
