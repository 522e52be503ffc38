"""``torch._functorch.config`` names on ``ember.aot.config``.

* ``activation_memory_budget`` (torch's default 1.0): the fraction of the activations the
  partitioner may save. 1.0 is torch's and ember's default policy, the min-cut partition
  (cheap ops recomputed, ``ember.aot.config.activation_memory_budget = None``); a value in
  [0, 1) makes the min-cut trade more recomputation for memory, as in torch.
* ``functionalize_rng_ops`` reads False (ember's AOT graphs keep random ops as ops, seeded
  from the eager generator when called); False is accepted, True raises.

Any other name raises AttributeError listing these."""
import sys

from .._config_module import ConfigModule
from ..aot import config as _aot

_FIXED = {"functionalize_rng_ops": False}


class _Config(ConfigModule):
    _KNOWN = ("activation_memory_budget",) + tuple(_FIXED)
    _EMBER_HOME = "ember.aot.config"

    def __getattr__(self, name):
        if name == "activation_memory_budget":
            b = _aot.activation_memory_budget
            return 1.0 if b is None else b
        if name in _FIXED:
            return _FIXED[name]
        raise self._unknown(name)

    def __setattr__(self, name, value):
        if name == "activation_memory_budget":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"ember._functorch.config.activation_memory_budget must be a number in [0, 1], "
                                 f"got {value!r}")
            _aot.activation_memory_budget = None if value >= 1.0 else float(value)
        elif name in _FIXED:
            self._check_fixed(name, value, _FIXED)
        elif name.startswith("__"):
            super().__setattr__(name, value)
        else:
            raise self._unknown(name)


sys.modules[__name__].__class__ = _Config
