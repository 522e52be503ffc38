"""``torch._dynamo.config`` names on ember's knobs.

* ``cache_size_limit`` / ``recompile_limit``: ``ember.dynamo.config.recompile_limit``
  (compilations per code object and per set of objects its arguments are guarded to be, before
  it runs eagerly); ``accumulated_cache_size_limit`` / ``accumulated_recompile_limit``: the total
  per code object (``ember.dynamo.config.accumulated_recompile_limit``);
* ``suppress_errors``: reads True; ember always falls back to eager, with the reason logged,
  when a backend fails to compile a graph (PyTorch's behaviour with ``suppress_errors=True``),
  so setting it True is accepted and setting it False raises (that mode does not exist here);
* ``verbose``: accepted (ember's logs are chosen with ``EMBER_LOGS``);
* ``automatic_dynamic_shapes``: ``ember.dynamo.config.automatic_dynamic_shapes``;
* ``dont_skip_tracing`` (stdlib/site-packages frames are captured too),
  ``error_on_recompile`` (a recompile raises ``RecompileError``), ``fail_on_recompile_limit_hit``
  (the recompile limit raises ``FailOnRecompileLimitHit`` instead of running eagerly): the
  ``ember.dynamo.config`` knobs of those names;
* ``patch(...)`` (context manager / decorator), ``get_config_copy()``, ``load_config(...)``: torch's
  config-module API over these knobs;
* knobs that describe how ember always works read that value, accept it, and raise for any
  other: ``inline_inbuilt_nn_modules`` (True: module forwards are traced),
  ``assume_static_by_default`` (True: the first compile is static), ``specialize_int``
  (False: an int argument is specialised until it changes),
  ``force_parameter_static_shapes`` (True);
* ``optimize_ddp``: accepted (ember has no DistributedDataParallel to split graphs for);
* ``capture_scalar_outputs``: ``ember.dynamo.config.capture_scalar_outputs`` (default False).
  True: ``t.item()`` of a one-element floating/integral/bool tensor is captured as a symbolic
  scalar (a 0-d float64/int64/bool node detached from ``t``, so the value cuts the gradient as
  eager's Python number does) instead of breaking the graph. Arithmetic with tensors follows
  Python-number type promotion (float32 tensor * item stays float32; int64 tensor * float item is
  float32), arithmetic between scalars is done in float64/int64 like Python's, and the scalar can
  be an operand of pointwise ops, ``clamp``/``where``/``masked_fill``/``fill_``, ``x[i] = s`` and
  ``full``/``full_like``/``new_full``/``tensor`` (also of a list of numbers); ``float(t)`` and
  ``int(t)`` are items too. Where
  Python needs the concrete value (``if s > 0:``, ``int(float_s)``, ``range(s)``, an f-string,
  a division by ``s`` in Python arithmetic, a size or an index -- an unbacked SymInt, which
  ``capture_dynamic_output_shape_ops`` would need and ember does not have) the graph breaks
  there (or, where no break can be made, at the ``.item()`` call), and the code after the break
  sees the real Python number. Returned or stored into outside objects, it is a Python number
  (details: ``ember/dynamo/variables/sym_scalar.py``);
* ``capture_dynamic_output_shape_ops``: reads False; True is accepted with a warning that ops
  with data-dependent output shapes (``nonzero``) still break the graph (results stay correct,
  the graph is split there).

Any other name raises AttributeError listing these: a knob that would be silently ignored is
worse than an error."""
import sys

from .._config_module import ConfigModule
from ..dynamo import config as _ember


_FIXED = {"inline_inbuilt_nn_modules": True, "assume_static_by_default": True, "specialize_int": False,
          "force_parameter_static_shapes": True}
_CAPTURE = ("capture_dynamic_output_shape_ops",)


_FLAGS = ("automatic_dynamic_shapes", "capture_scalar_outputs", "dont_skip_tracing", "error_on_recompile",
          "fail_on_recompile_limit_hit")


class _Config(ConfigModule):
    _EMBER_HOME = "ember.dynamo.config"
    _ALIASES = {"cache_size_limit": "recompile_limit", "recompile_limit": "recompile_limit",
                "accumulated_cache_size_limit": "accumulated_recompile_limit",
                "accumulated_recompile_limit": "accumulated_recompile_limit", **{f: f for f in _FLAGS}}
    _KNOWN = ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit",
              "suppress_errors", "verbose", "optimize_ddp") + _FLAGS \
        + tuple(_FIXED) + _CAPTURE

    def __getattr__(self, name):
        if name in self._ALIASES:
            return getattr(_ember, self._ALIASES[name])
        if name in _FIXED:
            return _FIXED[name]
        if name in _CAPTURE or name == "optimize_ddp":
            return self.__dict__.get("_" + name, False)
        if name == "suppress_errors":
            return True
        if name == "verbose":
            return self.__dict__.get("_verbose", False)
        raise self._unknown(name)

    def __setattr__(self, name, value):
        if name in _FLAGS:
            setattr(_ember, name, bool(value))
        elif name in _FIXED:
            self._check_fixed(name, value, _FIXED)
        elif name == "optimize_ddp":
            self.__dict__["_optimize_ddp"] = value
        elif name in _CAPTURE:
            if value and not self.__dict__.get("_" + name):
                import warnings
                warnings.warn(f"ember._dynamo.config.{name}=True: ember does not capture ops with "
                              f"data-dependent output shapes yet; the graph "
                              f"breaks there and that part runs eagerly (results are unaffected)", UserWarning,
                              stacklevel=2)
            self.__dict__["_" + name] = bool(value)
        elif name in self._ALIASES:
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
            raise self._unknown(name)


sys.modules[__name__].__class__ = _Config
