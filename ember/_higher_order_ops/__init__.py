"""ember's higher-order operators: functions taking functions (torch's ``torch._higher_order_ops``).

* ``cond`` / ``while_loop`` (``_control_flow.py``): data-dependent control flow;
* ``scan`` / ``associative_scan`` / ``map`` (``_scan.py``): loops over a tensor dimension;
* ``invoke_subgraph``, ``wrap``, ``hints_wrapper``, ``tag_activation_checkpoint``,
  ``run_const_graph``, ``foreach_map``, ``out_dtype``, ``print`` (``_wrappers.py``): a call of the
  body after torch's argument checks;
* ``flex_attention`` (``_flex.py``): torch's HOP signature routed to ``ember.nn.attention``'s kernel.

Each carries ``_ember_hop`` (its name): ``ember.compile`` recognises them by it
(``ember/dynamo/variables/control_flow.py``). Everything but ``cond``/``while_loop`` is plain
Python over ember ops, traced inline there, so compiled results equal eager ones.
"""
from ._control_flow import CondBranchMismatchError, cond, describe_mismatch, while_loop
from ._flex import flex_attention
from ._scan import associative_scan, map, scan
from ._wrappers import (foreach_map, hints_wrapper, invoke_subgraph, out_dtype, print, run_const_graph,
                        tag_activation_checkpoint, wrap)

__all__ = ["cond", "while_loop", "CondBranchMismatchError", "scan", "associative_scan", "map", "invoke_subgraph",
           "wrap", "hints_wrapper", "tag_activation_checkpoint", "run_const_graph", "foreach_map", "out_dtype",
           "print", "flex_attention"]

for _name in __all__[3:]:
    globals()[_name]._ember_hop = _name
del _name


def _torch_module_names():
    """torch's submodules of ``torch._higher_order_ops`` (``from torch._higher_order_ops.scan
    import scan``) as modules in ``sys.modules`` holding ember's functions, so those imports work
    under ``import ember as torch`` without a file per operator. As in torch, the package's
    attribute is the function except ``wrap``, which is the module (holding ``wrap`` and
    ``tag_activation_checkpoint``)."""
    import sys
    import types
    layout = {"scan": ("scan",), "associative_scan": ("associative_scan",), "map": ("map",),
              "cond": ("cond",), "while_loop": ("while_loop",), "wrap": ("wrap", "tag_activation_checkpoint"),
              "hints_wrap": ("hints_wrapper",), "invoke_subgraph": ("invoke_subgraph",),
              "out_dtype": ("out_dtype",), "print": ("print",), "foreach_map": ("foreach_map",),
              "run_const_graph": ("run_const_graph",), "flex_attention": ("flex_attention",)}
    made = {}
    for mod, names in layout.items():
        m = types.ModuleType(f"{__name__}.{mod}", f"torch._higher_order_ops.{mod}'s names (ember/_higher_order_ops)")
        for n in names:
            setattr(m, n, globals()[n])
        m.__all__ = list(names)
        sys.modules[m.__name__] = m
        made[mod] = m
    return made


_modules = _torch_module_names()
wrap, hints_wrap = _modules["wrap"], _modules["hints_wrap"]
del _modules
