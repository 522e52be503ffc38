"""``torch._dynamo.config`` names on ember's knobs.

* ``cache_size_limit`` / ``recompile_limit``: ``ember.dynamo.config.recompile_limit``
  (compilations per code object before it runs eagerly);
* ``suppress_errors``: reads True; ember always falls back to eager, with the reason logged,
  when a backend fails to compile a graph (PyTorch's behaviour with ``suppress_errors=True``),
  so setting it True is accepted and setting it False raises (that mode does not exist here);
* ``verbose``: accepted (ember's logs are chosen with ``EMBER_LOGS``).

Any other name raises AttributeError listing these: a knob that would be silently ignored is
worse than an error."""
import sys
import types

from ..dynamo import config as _ember


class _Config(types.ModuleType):
    _ALIASES = {"cache_size_limit": "recompile_limit", "recompile_limit": "recompile_limit"}
    _KNOWN = ("cache_size_limit", "recompile_limit", "suppress_errors", "verbose")

    def __getattr__(self, name):
        if name in self._ALIASES:
            return getattr(_ember, self._ALIASES[name])
        if name == "suppress_errors":
            return True
        if name == "verbose":
            return self.__dict__.get("_verbose", False)
        raise AttributeError(f"ember._dynamo.config has no knob {name!r} (supported: {', '.join(self._KNOWN)}; "
                             f"ember's own knobs are in ember.dynamo.config)")

    def __setattr__(self, name, value):
        if name in self._ALIASES:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ember._dynamo.config.{name} must be a positive int, got {value!r}")
            setattr(_ember, self._ALIASES[name], value)
        elif name == "suppress_errors":
            if not value:
                raise ValueError("ember._dynamo.config.suppress_errors=False is not supported: ember always "
                                 "falls back to eager (reason logged under EMBER_LOGS=graph_breaks,fallback) "
                                 "when a graph cannot be compiled; set ember.dynamo.config.raise_on_unsupported "
                                 "= True to raise on frames that cannot be captured instead")
        elif name == "verbose":
            self.__dict__["_verbose"] = bool(value)
        elif name.startswith("__"):
            super().__setattr__(name, value)
        else:
            raise AttributeError(f"ember._dynamo.config has no knob {name!r} (supported: "
                                 f"{', '.join(self._KNOWN)}; ember's own knobs are in ember.dynamo.config)")


sys.modules[__name__].__class__ = _Config
