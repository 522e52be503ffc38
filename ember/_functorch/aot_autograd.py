"""``torch._functorch.aot_autograd`` on ember's AOT stage (``ember.aot``).

The recipe torch documents for a custom backend works unchanged::

    def my_compiler(gm, example_inputs):      # gets the forward / the backward graph
        print(gm.code)
        return make_boxed_func(gm.forward)    # or gm.forward, or any callable

    def my_backend(gm, example_inputs):       # what ember.compile(backend=...) calls
        return aot_module_simplified(gm, example_inputs, fw_compiler=my_compiler)

What the graph compilers get: the functionalized graphs ember's AOT traced, partitioned into a
forward and a backward (or one inference graph when nothing needs a gradient). With
``decompositions=None`` (torch's default) their nodes are ember's operators
(``ember.ops.aten.*``), the level of torch's ATen graphs; ``decompositions="prims"`` gives the
prim graphs ember's own inductor compiles; a dict maps operators to decompositions as
``ember.aot`` takes it. A compiler may return a callable taking the inputs as arguments or, with
``make_boxed_func``, as one list (torch's boxed convention).

``partition_fn`` may be one of the two partitioners of ``ember._functorch.partitioners`` (or
None, the min-cut one); a partitioner of the user's own is not supported (ember partitions its
own joint graphs) and raises ``NotImplementedError`` naming it.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from ..tensor import Tensor
from ..utils._pytree import tree_flatten, tree_unflatten
from . import partitioners

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "make_boxed_func", "make_boxed_compiler"]


def make_boxed_func(f: Callable) -> Callable:
    """``f`` taking its arguments as one list (torch's boxed calling convention, which lets a
    compiled function free its inputs early); marked ``_boxed_call`` so AOT calls it that way."""
    def g(args):
        return f(*args)
    g._boxed_call = True
    return g


def make_boxed_compiler(compiler: Callable) -> Callable:
    """A graph compiler whose result is boxed with :func:`make_boxed_func`."""
    @functools.wraps(compiler)
    def boxed(gm, example_inputs):
        return make_boxed_func(compiler(gm, example_inputs))
    return boxed


def _unboxing(compiler: Optional[Callable]) -> Optional[Callable]:
    """``compiler`` as ember's AOT runtime calls graph compilers: the callable it returns is called
    with the inputs as arguments, so a boxed one (``_boxed_call``) gets them as a list."""
    if compiler is None:
        return None

    @functools.wraps(compiler)
    def compile_graph(gm, example_inputs):
        compiled = compiler(gm, list(example_inputs))
        if not callable(compiled):
            raise TypeError(f"aot_autograd: the graph compiler {getattr(compiler, '__name__', compiler)!r} "
                            f"returned {type(compiled).__name__}, expected a callable")
        if getattr(compiled, "_boxed_call", False):
            def call_boxed(*args):
                return compiled(list(args))
            return call_boxed
        return compiled
    return compile_graph


def resolve_partition_fn(partition_fn) -> Optional[float]:
    """The ``ember.aot`` memory budget that selects the partitioner ``partition_fn`` names."""
    if partition_fn is None:
        return None
    if partition_fn in partitioners.BUDGET_FOR:
        return partitioners.BUDGET_FOR[partition_fn]
    name = getattr(partition_fn, "__qualname__", repr(partition_fn))
    raise NotImplementedError(
        f"aot_autograd: partition_fn={name} is not supported: ember partitions its own joint graphs; "
        f"pass ember._functorch.partitioners.default_partition (save every value the backward reads) or "
        f"min_cut_rematerialization_partition (the default), or set "
        f"ember._functorch.config.activation_memory_budget")


def _check_compiler(name: str, compiler) -> None:
    if compiler is not None and not callable(compiler):
        raise TypeError(f"aot_autograd: {name} must be a callable (gm, example_inputs) -> callable, "
                        f"got {type(compiler).__name__}")


def _backend(fw_compiler, bw_compiler, partition_fn, decompositions, inference_compiler):
    """ember's AOT backend (``ember.aot.aot_autograd``) for torch's arguments."""
    from ..aot.backends import aot_autograd as _aot_autograd
    _check_compiler("fw_compiler", fw_compiler)
    _check_compiler("bw_compiler", bw_compiler)
    _check_compiler("inference_compiler", inference_compiler)
    if fw_compiler is None:
        raise TypeError("aot_autograd: fw_compiler is required")
    return _aot_autograd(fw_compiler=_unboxing(fw_compiler), bw_compiler=_unboxing(bw_compiler),
                         inference_compiler=_unboxing(inference_compiler),
                         decompositions=decompositions, memory_budget=resolve_partition_fn(partition_fn))


def aot_module_simplified(mod, args, fw_compiler: Callable, bw_compiler: Optional[Callable] = None,
                          partition_fn=None, decompositions: Any = None,
                          keep_inference_input_mutations: bool = False,
                          inference_compiler: Optional[Callable] = None, cudagraphs=None,
                          boxed_forward_device_index=None, ignore_shape_env: bool = False) -> Callable:
    """Compile ``mod`` (a dynamo graph: a GraphModule called with flat tensor inputs) for the
    example inputs ``args``; returns the callable dynamo runs in its place. Parameters and
    buffers are read as the graph's attributes (they are not lifted to inputs)."""
    if not callable(mod):
        raise TypeError(f"aot_module_simplified: mod must be a callable GraphModule, got {type(mod).__name__}")
    backend = _backend(fw_compiler, bw_compiler, partition_fn, decompositions, inference_compiler)
    return backend(mod, list(args))


def _signature(flat) -> tuple:
    """What a compiled function is specialised on: each leaf's tensor metadata, or its value."""
    sig = []
    for x in flat:
        if isinstance(x, Tensor):
            sig.append(("T", tuple(x.shape), tuple(x.stride()), x.dtype, str(x.device), x.requires_grad))
        else:
            sig.append(("V", type(x), x))
    return tuple(sig)


def aot_function(fn: Callable, fw_compiler: Callable, bw_compiler: Optional[Callable] = None,
                 partition_fn=None, decompositions: Any = None, num_params_buffers: int = 0,
                 keep_inference_input_mutations: bool = False,
                 inference_compiler: Optional[Callable] = None, *, dynamic: bool = False,
                 enable_log: bool = True) -> Callable:
    """``fn`` compiled through AOT on its first call. The arguments may be pytrees (tuples, lists,
    dicts) of tensors and constants; ``fn`` returns a pytree of tensors. A call whose tensors
    differ in shape, strides, dtype, device or ``requires_grad`` (or whose constants differ)
    compiles again for those, as a new trace would be needed anyway."""
    backend = _backend(fw_compiler, bw_compiler, partition_fn, decompositions, inference_compiler)
    if dynamic:
        raise NotImplementedError("aot_function(dynamic=True) is not supported: ember's aot_function compiles "
                                  "per input shape; compile with ember.compile(dynamic=True) for symbolic sizes")
    compiled: dict = {}

    @functools.wraps(fn)
    def returned(*args, **kwargs):
        flat, spec = tree_flatten((args, kwargs))
        key = (spec, _signature(flat))
        entry = compiled.get(key)
        if entry is None:
            tensor_pos = [i for i, x in enumerate(flat) if isinstance(x, Tensor)]
            consts = list(flat)
            out_spec = []

            def flat_fn(*tensors):
                leaves = list(consts)
                for i, t in zip(tensor_pos, tensors):
                    leaves[i] = t
                a, kw = tree_unflatten(leaves, spec)
                out_flat, o_spec = tree_flatten(fn(*a, **kw))
                if not out_spec:
                    out_spec.append(o_spec)
                bad = [type(o).__name__ for o in out_flat if not isinstance(o, Tensor)]
                if bad:
                    raise TypeError(f"aot_function: {getattr(fn, '__name__', fn)} must return tensors (in "
                                    f"tuples, lists or dicts), got {', '.join(bad)}")
                return tuple(out_flat)
            entry = compiled[key] = (backend(flat_fn, [flat[i] for i in tensor_pos]), tensor_pos, out_spec)
        run, tensor_pos, out_spec = entry
        outs = run(*[flat[i] for i in tensor_pos])
        return tree_unflatten(list(outs), out_spec[0])
    return returned


def aot_module(mod, fw_compiler: Callable, bw_compiler: Optional[Callable] = None, partition_fn=None,
               decompositions: Any = None, num_params_buffers: int = 0,
               keep_inference_input_mutations: bool = False,
               inference_compiler: Optional[Callable] = None):
    """An ``nn.Module`` running ``mod``'s forward compiled by :func:`aot_function`, with ``mod``'s
    parameters and buffers as inputs of the graphs (so their gradients reach them and updates
    to them are seen by later calls)."""
    from ..func import functional_call
    from ..nn import Module

    if not isinstance(mod, Module):
        raise TypeError(f"aot_module: mod must be an nn.Module, got {type(mod).__name__}")

    def functional(params, buffers, args, kwargs):
        return functional_call(mod, (params, buffers), args, kwargs)
    compiled = aot_function(functional, fw_compiler, bw_compiler, partition_fn, decompositions,
                            inference_compiler=inference_compiler)

    class AOTModule(Module):
        """``mod`` with its forward compiled by AOT."""

        def __init__(self):
            super().__init__()
            self.orig_module = mod

        def forward(self, *args, **kwargs):
            params = dict(mod.named_parameters(remove_duplicate=False))
            buffers = dict(mod.named_buffers(remove_duplicate=False))
            return compiled(params, buffers, args, kwargs)
    return AOTModule()
