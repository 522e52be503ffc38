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
