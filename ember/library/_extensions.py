"""Per-op rules for other subsystems: ``register_autocast``, ``register_vmap``,
``register_torch_dispatch``; and ``triton_op`` / ``wrap_triton``.

Each rule is stored on the op (a ``CustomOpDef``, which ``Library.define`` ops are too) and
read where that subsystem meets the op:

* autocast: a call inside an ``ember.autocast`` region for the rule's device casts the
  floating tensors on that device (float64 excepted, as torch) to the rule's dtype and runs
  the op with that region's autocast off (``CustomOpDef._autocast_call``);
* vmap: ``ember.func.vmap(op, in_dims, out_dims)`` of the op itself calls the rule once on the
  whole batch, ``rule(info, in_dims, *args, **kwargs) -> (output, out_dims)``, instead of
  looping over slices (:func:`vmap_with_rule`). A function that *calls* the op inside a vmap
  still runs per slice (ember's vmap is a loop, it has no batched tensors to hand the rule);
* torch_dispatch: a ``TorchDispatchMode`` of exactly the rule's class that sees the op
  calls ``rule(mode, func, types, args, kwargs)`` instead of its ``__torch_dispatch__``
  (``CustomOpRecord._torch_dispatch``). Rules for Tensor subclasses are refused: ember has no
  ``__torch_dispatch__`` subclasses.

``triton_op`` has a natural CPU meaning -- a custom op whose body is traceable Python -- and is
that; ``wrap_triton`` needs Triton and a GPU, and says so.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple, Optional, Union

from ._custom_op import lookup

_AUTOCAST_DEVICES = ("cpu", "cuda")


def register_autocast(op: Any, device_type: str, cast_inputs: Any, /, *, lib: Any = None) -> None:
    """Inside ``ember.autocast(device_type)``, cast the op's floating inputs on that device to
    ``cast_inputs`` and run it with autocast off for that device."""
    from ..types import as_dtype
    custom = lookup(op)
    if not isinstance(device_type, str) or device_type not in _AUTOCAST_DEVICES:
        raise ValueError(f"Device type '{device_type}' does not support autocast.")
    try:
        dtype = as_dtype(cast_inputs)
    except (TypeError, ValueError):
        raise TypeError(f"register_autocast({custom._qualname!r}, {device_type!r}, ...): cast_inputs must be an "
                        f"ember dtype, got {cast_inputs!r}") from None
    if not dtype.is_floating_point:
        raise ValueError(f"register_autocast({custom._qualname!r}, {device_type!r}, ...): cast_inputs must be a "
                         f"floating dtype, got {dtype}")
    custom._autocast_rules[device_type] = dtype


def autocast_cast(value: Any, device_type: str, dtype: Any) -> Any:
    """``value`` with every floating tensor on ``device_type`` (except float64) cast to ``dtype``."""
    from ..tensor import Tensor
    from .. import types as _t
    if isinstance(value, Tensor):
        ok = value.dtype.is_floating_point and value.device.type == device_type and value.dtype is not _t.float64
        return value.to(dtype) if ok else value
    if isinstance(value, (list, tuple)):
        return type(value)(autocast_cast(v, device_type, dtype) for v in value)
    return value


# ---------------------------------------------------------------------------- vmap
class VmapInfo(NamedTuple):
    """What a vmap rule learns about the vmap it serves (torch's ``VmapInfo``)."""
    batch_size: int
    randomness: str


def register_vmap(op: Any, func: Optional[Callable] = None, /, *, lib: Any = None):
    """Register ``func(info, in_dims, *args, **kwargs) -> (output, out_dims)`` as the batching
    rule ``ember.func.vmap(op)`` uses; a decorator without ``func``."""
    custom = lookup(op)
    if any(p.kwonly and p.is_tensor for p in custom._schema.params):
        raise NotImplementedError(f"register_vmap with kwarg-only Tensor args. In the original definition of the "
                                  f"op, please make your tensors not kwarg-only. Got: {custom.schema}")

    def register(f: Callable) -> Callable:
        if not callable(f):
            raise TypeError(f"register_vmap({custom._qualname!r}): expected a function, got {type(f).__name__}")
        custom._vmap_rule = f
        return f
    return register(func) if func is not None else register


def vmap_rule_for(func: Any) -> Optional[Callable]:
    """The vmap rule when ``func`` is a custom op that has one (ember.func.vmap asks)."""
    from ._custom_op import CustomOpDef
    if isinstance(func, CustomOpDef):
        return func._vmap_rule
    return None


def vmap_with_rule(op: Any, batch_size: int, flat_in_dims, flat_args, args_spec, out_dims, randomness: str,
                   kwargs) -> Any:
    """``vmap(op)(*args)`` by the op's rule: one call on the whole batch, then each output's
    batch dimension moved from where the rule says it is to ``out_dims``."""
    from ..tensor import Tensor
    from ..ops import api
    from ..utils._pytree import tree_flatten, tree_unflatten
    args = tree_unflatten(list(flat_args), args_spec)
    in_dims = tuple(tree_unflatten(list(flat_in_dims), args_spec))
    in_dims = tuple(_normalized_in_dim(d, a) for d, a in zip(in_dims, args))
    res = op._vmap_rule(VmapInfo(batch_size, randomness), in_dims, *args, **kwargs)
    if not (isinstance(res, tuple) and len(res) == 2):
        raise RuntimeError(f"register_vmap rule of {op._qualname}: expected it to return (output, out_dims), got "
                           f"{type(res).__name__}")
    out, rule_dims = res
    flat_out, spec = tree_flatten(out)
    rule_flat = _per_output(rule_dims, len(flat_out))
    if rule_flat is None:
        raise RuntimeError(f"register_vmap rule of {op._qualname}: its out_dims {rule_dims!r} do not match the "
                           f"{len(flat_out)} output(s) it returned")
    want_flat = _per_output(out_dims, len(flat_out))
    if want_flat is None:
        raise ValueError(f"vmap({op._qualname}, ...): out_dims {out_dims!r} do not match the op's "
                         f"{len(flat_out)} output(s)")
    result = []
    for o, have, want in zip(flat_out, rule_flat, want_flat):
        if not isinstance(o, Tensor):
            result.append(o)
            continue
        if have is None:            # the rule says: not batched -- every slice equals o
            o = api.stack([o] * batch_size, dim=0) if batch_size else o.unsqueeze(0)[:0]
            have = 0
        if want is None:
            raise ValueError(f"vmap({op._qualname}, ...): `{op._qualname}` can not return a BatchedTensor when "
                             f"out_dim is None")
        n = o.dim()
        result.append(o.movedim(have % n, want % n) if have % n != want % n else o)
    return tree_unflatten(result, spec)


def _per_output(dims: Any, n: int) -> Optional[list]:
    """One dim (int or None) per output: a single int/None applies to all; a structure must
    flatten to exactly ``n`` entries (None when it does not)."""
    from ..utils._pytree import tree_flatten
    if dims is None or isinstance(dims, int):
        return [dims] * n
    flat = list(tree_flatten(dims)[0])
    return flat if len(flat) == n else None


def _normalized_in_dim(d: Any, a: Any) -> Any:
    from ..tensor import Tensor
    if isinstance(d, int) and isinstance(a, Tensor):
        return d % a.dim()
    return d


# ---------------------------------------------------------------------------- torch_dispatch
def register_torch_dispatch(op: Any, torch_dispatch_class: Any, func: Optional[Callable] = None, /, *,
                            lib: Any = None):
    """When a ``TorchDispatchMode`` of ``torch_dispatch_class`` sees ``op``, call
    ``func(mode, func, types, args, kwargs)`` instead of its ``__torch_dispatch__``."""
    from ..utils._python_dispatch import TorchDispatchMode
    custom = lookup(op)
    if not (isinstance(torch_dispatch_class, type) and issubclass(torch_dispatch_class, TorchDispatchMode)):
        raise NotImplementedError(f"ember.library.register_torch_dispatch: only TorchDispatchMode subclasses are "
                                  f"supported (ember has no __torch_dispatch__ Tensor subclasses); got "
                                  f"{torch_dispatch_class!r}")

    def register(f: Callable) -> Callable:
        if not callable(f):
            raise TypeError(f"register_torch_dispatch({custom._qualname!r}): expected a function, got "
                            f"{type(f).__name__}")
        custom._dispatch_rules[torch_dispatch_class] = f
        return f
    return register(func) if func is not None else register


def torch_dispatch_rule(custom: Any, mode_cls: type) -> Optional[Callable]:
    """The rule registered for exactly ``mode_cls`` (as torch: a subclass of the registered mode
    class gets its own ``__torch_dispatch__``, not the rule)."""
    rules = custom._dispatch_rules
    return rules.get(mode_cls) if rules else None


# ---------------------------------------------------------------------------- triton
def triton_op(name: str, fn: Optional[Callable] = None, /, *, mutates_args: Union[str, Iterable[str]],
              schema: Optional[str] = None):
    """A custom op whose body is Python over ember ops (in torch: ops plus ``wrap_triton``
    kernels). ember's natural meaning: ``custom_op`` with the body itself as the fake impl
    (it runs on fake tensors too), so ``ember.compile`` captures it as one node. Calling
    ``wrap_triton`` inside raises: there is no Triton here."""
    from . import custom_op

    def inner(f: Callable):
        op = custom_op(name, f, mutates_args=mutates_args, schema=schema)
        op.register_fake(f)
        return op
    return inner(fn) if fn is not None else inner


def wrap_triton(triton_kernel: Callable, /) -> Any:
    """torch: make a Triton kernel callable from a ``triton_op``. ember compiles no Triton kernels
    (no GPU backend here), so this always raises, naming the feature."""
    raise NotImplementedError(f"ember.library.wrap_triton: Triton kernels are not supported (ember has no Triton "
                              f"backend); got {getattr(triton_kernel, '__name__', type(triton_kernel).__name__)}. "
                              f"Write the op's body with ember ops instead")
