"""``torch._inductor.compile_fx.compile_fx``: compile a dynamo graph with ember's default backend
(AOT autograd into prims, then ``ember.inductor``'s C++/OpenMP loops), as ``ember.compile`` does
for each graph it captures."""
from __future__ import annotations

from typing import Any, Callable, Optional


def compile_fx(model_, example_inputs_, inner_compile: Optional[Callable] = None,
               config_patches: Optional[dict] = None, decompositions: Any = None, **kwargs) -> Callable:
    """The compiled callable for ``model_`` (an FX GraphModule called with the flat tensors
    ``example_inputs_``), with ``config_patches`` (``ember._inductor.config`` names) in force
    while compiling."""
    if inner_compile is not None:
        raise NotImplementedError("compile_fx(inner_compile=...) is not supported: ember's inductor compiles the "
                                  "AOT graphs itself; use ember._functorch.aot_autograd.aot_module_simplified "
                                  "to plug in a graph compiler of your own")
    if decompositions is not None:
        raise NotImplementedError("compile_fx(decompositions=...) is not supported: ember's inductor lowers "
                                  "the prims every operator decomposes into (ember.prims)")
    if kwargs:
        raise TypeError(f"compile_fx: unexpected keyword argument(s) {', '.join(sorted(kwargs))}")
    from ..dynamo import lookup_backend
    from . import config
    with config.patch(config_patches or {}):
        compiled = lookup_backend("inductor")(model_, list(example_inputs_))
        prepare = getattr(compiled, "prepare", None)
        if callable(prepare):         # compile now, while the patches are in force
            prepare()
    return compiled


__all__ = ["compile_fx"]
