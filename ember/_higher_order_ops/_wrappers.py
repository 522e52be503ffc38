"""The call-through higher-order ops: ``invoke_subgraph``, ``wrap``, ``hints_wrapper``,
``tag_activation_checkpoint``, ``run_const_graph``, ``foreach_map``, ``out_dtype`` and ``print``
(torch's ``torch._higher_order_ops`` names).

Why they exist: torch uses them to mark a region of a traced program (a subgraph to reuse, a
checkpointed block, compiler hints) or to give a graph an effect (``print``). Their value is
always the value of calling the body, so ember implements each as that call after torch's
argument checks. ``ember.compile`` traces the body inline (the marks carry no meaning for
ember's compiler, which sees the whole graph anyway).
"""
from __future__ import annotations

import builtins

import ember

from ..utils._pytree import tree_leaves

__all__ = ["invoke_subgraph", "wrap", "hints_wrapper", "tag_activation_checkpoint", "run_const_graph",
           "foreach_map", "out_dtype", "print"]


def _is_tensor(x):
    from ..tensor import Tensor
    return isinstance(x, Tensor)


def invoke_subgraph(subgraph, identifier, *operands):
    """``subgraph(*operands)``: one call of a region marked for reuse (what
    ``ember.compiler.nested_compile_region`` marks; torch compiles such a region once)."""
    if identifier is not None and not isinstance(identifier, str):
        raise AssertionError(f"identifier must be None or a string, got {type(identifier)}")
    if not all(o is None or _is_tensor(o) or isinstance(o, (int, ember.SymInt, ember.Generator))
               for o in operands):
        raise AssertionError(f"invoke_subgraph operands must be a list of tensors/ints/SymInts/Generator, got "
                             f"{operands}")
    if not callable(subgraph):
        raise TypeError(f"invoke_subgraph: subgraph must be callable, got {type(subgraph).__name__}")
    return subgraph(*operands)


def wrap(func, *args, **kwargs):
    """``func(*args, **kwargs)`` (torch's ``wrap``: a body kept as one subgraph)."""
    if not callable(func):
        raise TypeError(f"wrap: func must be callable, got {type(func).__name__}")
    return func(*args, **kwargs)


def hints_wrapper(body_fn, args, kwargs, hints):
    """``body_fn(*args)`` with compiler ``hints`` attached (``torch._higher_order_ops.hints_wrapper``).
    ember's compiler takes no hints: they are checked as torch checks them and otherwise ignored."""
    if not isinstance(args, tuple):
        args = tuple(args)
    if not all(_is_tensor(t) or isinstance(t, (int, float, bool)) for t in args):
        raise RuntimeError(f"args must be a tuple of tensors, ints, floats, or bools, got {args}")
    if not isinstance(kwargs, dict):
        raise RuntimeError(f"kwargs must be a dict, got {type(kwargs)}")
    if len(kwargs) > 0:
        raise RuntimeError(f"kwargs except for hints are not supported, got {kwargs}")
    if not isinstance(hints, dict):
        raise RuntimeError(f"hints must be a dict, got {type(hints)}")
    for k, v in hints.items():
        if not isinstance(k, str):
            raise RuntimeError(f"hints key must be a str, got {k}.")
        if not isinstance(v, (int, float, bool, str)):
            raise RuntimeError(f"hints must be a dict containing int, float, bool or str value, got value {v} for "
                               f"key {k}.")
    return body_fn(*args)


_CHECKPOINT_KEYS = ("use_reentrant", "context_fn", "determinism_check", "debug", "preserve_rng_state")


def tag_activation_checkpoint(function, *args, **kwargs):
    """``ember.utils.checkpoint.checkpoint(function, *args, ...)``: torch's name for a checkpointed
    region in a traced program. Keyword arguments that are checkpoint options go to
    ``checkpoint`` (``use_reentrant`` defaults to False, as in torch's traced regions); the rest
    to ``function``."""
    from ..utils.checkpoint import checkpoint
    ckpt = {k: kwargs.pop(k) for k in _CHECKPOINT_KEYS if k in kwargs}
    ckpt.setdefault("use_reentrant", False)
    return checkpoint(function, *args, **ckpt, **kwargs)


def run_const_graph(graph, args):
    """``graph(*args)``: a graph computing constants (torch's export keeps it as one node)."""
    if not callable(graph):
        raise TypeError(f"run_const_graph: graph must be callable (a GraphModule), got {type(graph).__name__}")
    return graph(*args)


def foreach_map(op, *operands, **kwargs):
    """``[op(*column) for column in zip(*operands)]`` where list/tuple operands are zipped and other
    operands (scalars, tensors) repeat for every element -- torch's ``foreach_map`` (the basis of
    its fused ``_foreach_*`` polyfills). With no list operand: ``op(*operands)``."""
    if not callable(op):
        raise TypeError(f"foreach_map: op must be callable, got {type(op).__name__}")
    lists = [o for o in operands if isinstance(o, (list, tuple))]
    if not lists:
        return op(*operands, **kwargs)
    n = len(lists[0])
    if any(len(o) != n for o in lists):
        raise ValueError(f"foreach_map: list operands must have the same length, got lengths "
                         f"{[len(o) for o in lists]}")
    return [op(*[o[i] if isinstance(o, (list, tuple)) else o for o in operands], **kwargs) for i in range(n)]


def _allowed_out_dtype_ops():
    """The ATen overloads ``out_dtype`` accepts (torch's list, as far as ember's ``aten`` has them)."""
    from ..ops import aten
    found = []
    for name, overload in (("mm", "default"), ("conv2d", "default"), ("convolution", "default"),
                           ("mul", "Tensor"), ("mul", "Scalar"), ("div", "Tensor"), ("div", "Scalar")):
        try:
            found.append(getattr(getattr(aten, name), overload))
        except AttributeError:
            pass
    return found


def _check_out_dtype_op(op):
    """torch's checks on ``op`` (run while tracing: ``op`` is a constant of the frame)."""
    from ..ops._aten_namespace import OpOverload
    if not isinstance(op, OpOverload):
        raise ValueError("out_dtype's first argument must be an OpOverload")
    allowed = _allowed_out_dtype_ops()
    if op not in allowed:
        raise ValueError(f"out_dtype only allows the following operators: {allowed}.")
    return True


_check_out_dtype_op._ember_assume_constant = True


def out_dtype(op, output_dtype, *args):
    """``op(*args)`` computed in the dtype promoted from the arguments and ``output_dtype``, cast to
    ``output_dtype`` (``torch._higher_order_ops.out_dtype``: e.g. an int8 ``mm`` accumulating in
    int32). ``op`` is an ``ember.ops.aten`` overload from torch's short list."""
    _check_out_dtype_op(op)
    promoted = output_dtype
    for leaf in tree_leaves(args):
        if _is_tensor(leaf) or isinstance(leaf, (bool, int, float, complex)):
            promoted = ember.result_type(leaf, ember.ones(1, dtype=promoted))
    cast = [a.to(dtype=promoted) if _is_tensor(a) else a for a in args]
    return op(*cast).to(dtype=output_dtype)


def print(format_str, *args, **kwargs):  # noqa: A001 - torch's name
    """``builtins.print(format_str.format(*args, **kwargs))`` (``torch._higher_order_ops.print``)."""
    if not isinstance(format_str, str):
        raise AssertionError(f"format_str must be a string, got {type(format_str)}")
    builtins.print(format_str.format(*args, **kwargs))
