"""``ember._functorch``: the names PyTorch code reaches through ``torch._functorch`` to plug
its own graph compilers into AOT autograd (the custom-backend recipe:
``aot_module_simplified(gm, example_inputs, fw_compiler=my_compiler)``, ``make_boxed_func``,
the two partitioners, ``config.activation_memory_budget``), on ember's AOT stage
(``ember.aot``: joint graph, functionalization, partitioning, runtime wrapper).

* ``aot_autograd``: ``aot_function``, ``aot_module``, ``aot_module_simplified``,
  ``make_boxed_func``, ``make_boxed_compiler``;
* ``partitioners``: ``default_partition``, ``min_cut_rematerialization_partition``;
* ``config``: torch's knob names on ``ember.aot.config``;
* ``apis`` / ``eager_transforms``: ``vmap``, ``grad``, ... (``ember.func``'s)."""
from . import aot_autograd, apis, config, eager_transforms, partitioners

__all__ = ["aot_autograd", "apis", "config", "eager_transforms", "partitioners"]
