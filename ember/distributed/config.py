"""``torch.distributed.config``: global flags of torch.distributed, with ember's answers.

* ``compile_on_one_rank`` reads False: a compiled DTensor graph bakes this rank's mesh
  coordinates in at compile time (each rank compiles its own graph, as torch does by default);
  computing them at run time, so one rank's graph serves all, is not implemented -- setting
  True raises.
* ``use_torchcomms`` reads False: ember's process groups are its own transport; True raises.

``patch`` / ``get_config_copy`` / ``load_config`` work as on torch's config modules; any other
name raises AttributeError listing these."""
import sys

from .._config_module import ConfigModule

_FIXED = {"compile_on_one_rank": False, "use_torchcomms": False}


class _Config(ConfigModule):
    _KNOWN = tuple(_FIXED)
    _EMBER_HOME = "ember.distributed"

    def __getattr__(self, name):
        if name in _FIXED:
            return _FIXED[name]
        raise self._unknown(name)

    def __setattr__(self, name, value):
        if name in _FIXED:
            self._check_fixed(name, value, _FIXED)
        elif name.startswith("__"):
            super().__setattr__(name, value)
        else:
            raise self._unknown(name)


sys.modules[__name__].__class__ = _Config
