"""``torch._dynamo.backends.common.aot_autograd``: a dynamo backend from AOT graph compilers::

    my_backend = aot_autograd(fw_compiler=my_compiler)      # bw_compiler defaults to it
    ember.compile(model, backend=my_backend)

The keywords are ``ember._functorch.aot_autograd.aot_module_simplified``'s (``fw_compiler``,
``bw_compiler``, ``inference_compiler``, ``partition_fn``, ``decompositions``,
``keep_inference_input_mutations``)."""
from __future__ import annotations


class AotAutograd:
    """The backend ``aot_autograd(**kwargs)`` returns: ``backend(gm, example_inputs)``."""

    def __init__(self, **kwargs):
        from ..._functorch.aot_autograd import aot_module_simplified
        import inspect
        allowed = set(inspect.signature(aot_module_simplified).parameters) - {"mod", "args"}
        bad = sorted(set(kwargs) - allowed)
        if bad:
            raise TypeError(f"aot_autograd: unexpected keyword argument(s) {', '.join(bad)} "
                            f"(expected some of {', '.join(sorted(allowed))})")
        if "fw_compiler" not in kwargs:
            raise TypeError("aot_autograd: fw_compiler is required")
        from ..._functorch.aot_autograd import resolve_partition_fn
        resolve_partition_fn(kwargs.get("partition_fn"))     # a partitioner ember cannot use raises now
        self.kwargs = kwargs

    def __call__(self, gm, example_inputs, **kwargs):
        from ..._functorch.aot_autograd import aot_module_simplified
        return aot_module_simplified(gm, example_inputs, **{**self.kwargs, **kwargs})


def aot_autograd(**kwargs) -> AotAutograd:
    return AotAutograd(**kwargs)


__all__ = ["aot_autograd", "AotAutograd"]
