"""``print``, ``warnings.warn`` and ``logging`` calls: replayed after the graph, not a graph break.

Each of these only writes somewhere (stdout, the warnings machinery, log handlers); the graph
cannot observe it. When every argument is a Python constant at trace time (strings, numbers,
shapes of static tensors, f-strings of those), the call is recorded as a side effect and the
compiled code makes it right after the graph runs -- with the same arguments, in program order,
before whatever comes next (the breaking call of a graph break, the return). The text written is
what eager writes; only its timing moves after the graph's computation (which writes nothing). If
the graph raises, the frame re-runs eagerly and the calls happen there (a graph with in-place ops cannot be re-run: the first call then breaks
the graph, as without replay).

Exactness:

* ``warnings.warn`` is replayed with ``warnings.warn_explicit`` at the location eager would report
  (file and line of the frame ``stacklevel`` names, its module's ``__warningregistry__``, so
  "once"/"default" filters see the same location). A ``stacklevel`` that reaches outside the
  traced frames, and an ``"error"`` filter in force at trace time (the warning would raise before
  the graph's work), break the graph instead.
* ``logging``: a ``Logger``'s methods (and the module-level ``logging.info(...)`` etc.) are
  replayed by building the ``LogRecord`` with the caller's file, line and function, exactly as
  ``Logger._log`` would have found them, and handing it to ``Logger.handle`` when the logger is
  enabled for the level at run time. ``exc_info``/``exception()`` and ``stack_info`` break.
* ``print(..., file=stream)`` replays into that stream when it lives outside the frame (``sys.stderr``, a
  module-level ``io.StringIO``, an argument): the object is guarded by identity.
* ``print`` of a symbolic size (``print(x.shape)``, ``print(n, x.size(0) * 2)`` under dynamic
  shapes), or one as a logging call's %-argument, replays with the value computed from the inputs' sizes as the call starts, like a
  symbolic int the frame returns: no guard on the value, so no recompile per size. A size
  that is no function of the inputs' (an ``.item()`` result) still breaks.
* Anything else non-constant (a tensor's values, a stream made in the frame) breaks the graph
  as before: the value must be known when tracing.

``ember.dynamo.config.replay_logging_calls = False`` restores graph breaks at all of them."""
from __future__ import annotations

import logging
import warnings

from .. import config
from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable

_LOGGER_METHODS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                   "warn": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
                   "fatal": logging.CRITICAL, "log": None}
_ROOT_FUNCTIONS = {getattr(logging, name): name for name in _LOGGER_METHODS}


def _snapshot(v, what, symbolic_ok=False):
    """The value of a constant argument as it is now (later mutations of a list do not leak in).
    ``symbolic_ok``: symbolic sizes may stay in it (ints, and tuples, lists and ``Size``s of
    them) when every symbol can be read from the frame's inputs as the call starts: the replay
    computes their values then (``OutputGraph.replay_value_expr``)."""
    from .sets import SetVariable
    from .tensor import TensorVariable
    if isinstance(v, TensorVariable):
        raise Unsupported(f"{what} of a tensor (its values are only known when the graph runs)")
    if isinstance(v, SetVariable) or not v.is_python_constant():
        raise Unsupported(f"{what} with a non-constant argument {v} (its value is only known when the "
                          f"graph runs)")
    val = v.as_python_constant()
    if _has_symbolic(val) and not (symbolic_ok and _replayable(val)):
        raise Unsupported(f"{what} of a symbolic size (its value is only known when the graph runs)")
    return val


def _replayable(val):
    """Whether the symbolic sizes in ``val`` can be recomputed at the call: SymInts whose
    symbols all have a source among the frame's inputs (not an ``.item()`` result), alone or in
    tuples, lists and ``Size``s."""
    from ...fx.experimental.symbolic_shapes import SymInt, is_symbolic
    if type(val) is SymInt:
        env = val.env
        return all(env.var_to_sources.get(sym) for sym in val.expr.free_symbols)
    if type(val) in (tuple, list) or _is_size(val):
        return all(_replayable(x) for x in val)
    return not is_symbolic(val)


def _is_size(val):
    from ...types import Size
    return type(val) is Size


def _has_symbolic(val):
    from ...fx.experimental.symbolic_shapes import is_symbolic
    if isinstance(val, (tuple, list)):
        return any(_has_symbolic(x) for x in val)
    if isinstance(val, dict):
        return any(_has_symbolic(x) for x in val.values())
    if isinstance(val, slice):
        return any(_has_symbolic(x) for x in (val.start, val.stop, val.step))
    return is_symbolic(val)


def _record(tx, fn, args, kwargs):
    out = tx.output
    out.side_effects.append(("call", fn, tuple(args), dict(kwargs)))
    if out.replay_break_index is None:
        out.replay_break_index = tx.root.ip - 1      # the root's instruction now running
    return ConstantVariable(None)


def _enabled(what):
    if not config.replay_logging_calls:
        raise Unsupported(f"{what} is a side effect (graph break; ember.dynamo.config.replay_logging_calls "
                          f"is off)")


def _frame_at(tx, stacklevel, what):
    """The traced frame ``stacklevel`` levels up (1: the caller of warn/log), or a break."""
    t = tx
    for _ in range(max(int(stacklevel), 1) - 1):
        t = getattr(t, "parent", None)
        if t is None:
            raise Unsupported(f"{what} with a stacklevel beyond the compiled frame (the caller differs "
                              f"between calls)")
    pos = getattr(t.current, "positions", None)
    line = pos.lineno if pos is not None and pos.lineno is not None else t.code.co_firstlineno
    return t, t.code.co_filename, line


def print_call(tx, args, kwargs):
    _enabled("print()")
    vals = [_snapshot(a, "print()", symbolic_ok=True) for a in args]
    kwargs = dict(kwargs)
    stream = kwargs.pop("file", None)
    kw = {k: _snapshot(v, "print()") for k, v in kwargs.items()}
    if set(kw) - {"sep", "end", "flush"}:
        raise Unsupported(f"print() with arguments {sorted(set(kw) - {'sep', 'end', 'flush'})}")
    if stream is not None and not (stream.is_python_constant() and stream.as_python_constant() is None):
        kw["file"] = _stream(tx, stream)
    return _record(tx, print, vals, kw)


def _stream(tx, v):
    """The object behind ``print(..., file=v)``: one that lives outside the frame (``sys.stderr``,
    a module's ``io.StringIO``, an argument), guarded by identity -- the replayed call writes to
    that very object, and another object there compiles again. A stream made in the frame, or
    one the trace only knows as a value, breaks the graph (its writes are not replayable)."""
    obj = getattr(v, "obj", None)
    if obj is None or v.source is None or not callable(getattr(obj, "write", None)):
        raise Unsupported(f"print() with file={v} (a stream made in the frame or not known by identity)")
    tx.output.guards.id_match(v.source, obj)
    return obj


def warn_call(tx, args, kwargs):
    _enabled("warnings.warn()")
    names = ("message", "category", "stacklevel", "source")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            raise Unsupported(f"warnings.warn() with argument {k!r}")
        bound[k] = v
    if "source" in bound or "message" not in bound:
        raise Unsupported("warnings.warn() with source=... or without a message")
    message = _snapshot(bound["message"], "warnings.warn()")
    category = bound["category"].as_python_constant() if "category" in bound else None
    stacklevel = _snapshot(bound.get("stacklevel", ConstantVariable(1)), "warnings.warn()")
    if not isinstance(message, str) or not (category is None or (isinstance(category, type)
                                                                 and issubclass(category, Warning))):
        raise Unsupported("warnings.warn() with a message that is not a string or a category that is not "
                          "a Warning class")
    if any(f[0] == "error" for f in warnings.filters):
        raise Unsupported("warnings.warn() under an 'error' warnings filter (it would raise before the "
                          "graph's work)")
    frame, filename, lineno = _frame_at(tx, stacklevel, "warnings.warn()")
    g = frame.f_globals
    module = g.get("__name__", "<string>")
    return _record(tx, _warn_at, [message, category or UserWarning, filename, lineno, module, g], {})


def _warn_at(message, category, filename, lineno, module, module_globals):
    registry = module_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, category, filename, lineno, module, registry, module_globals)


def _log_args(tx, logger, level, args, kwargs, what):
    extra = kwargs.pop("extra", None)
    stacklevel = kwargs.pop("stacklevel", ConstantVariable(1))
    for k in ("exc_info", "stack_info"):
        v = kwargs.pop(k, None)
        if v is not None and not (v.is_python_constant() and not v.as_python_constant()):
            raise Unsupported(f"{what} with {k}= (the exception/stack is only known when it runs)")
    if kwargs:
        raise Unsupported(f"{what} with arguments {sorted(kwargs)}")
    if not args:
        raise Unsupported(f"{what} without a message")
    msg = _snapshot(args[0], what)
    rest = [_snapshot(a, what, symbolic_ok=True) for a in args[1:]]    # (%-arguments: sizes are fine)
    extra = _snapshot(extra, what) if extra is not None else None
    frame, filename, lineno = _frame_at(tx, _snapshot(stacklevel, what), what)
    return _record(tx, _log_at, [logger, level, filename, lineno, frame.code.co_name, msg, tuple(rest), extra],
                   {})


def _log_at(logger, level, filename, lineno, func, msg, args, extra):
    if logger is None:                      # the module-level functions: root, configured on first use
        logger = logging.getLogger()
        if not logger.handlers:
            logging.basicConfig()
    if logger.isEnabledFor(level):
        logger.handle(logger.makeRecord(logger.name, level, filename, lineno, msg, args, None, func, extra, None))


def log_call(tx, logger, method, args, kwargs, what):
    _enabled(what)
    args, kwargs = list(args), dict(kwargs)
    level = _LOGGER_METHODS[method]
    if level is None:                         # log(level, msg, ...)
        if not args:
            raise Unsupported(f"{what} without a level")
        level = _snapshot(args.pop(0), what)
        if not isinstance(level, int):
            raise Unsupported(f"{what} with a level that is not an int")
    return _log_args(tx, logger, level, args, kwargs, what)


def root_log_function(fn):
    method = _ROOT_FUNCTIONS[fn]

    def h(tx, args, kwargs):
        return log_call(tx, None, method, args, kwargs, f"logging.{method}()")
    return h


class LoggerVariable(VariableTracker):
    """A ``logging.Logger`` read from outside the frame (guarded by identity: loggers are
    singletons). Its logging methods are replayed after the graph; ``isEnabledFor`` and
    ``getEffectiveLevel`` fold to constants, guarded."""

    def __init__(self, logger, source):
        self.logger, self.source = logger, source

    def python_type(self):
        return type(self.logger)

    def var_getattr(self, tx, name):
        from .lists import ContainerMethodVariable
        if name in _LOGGER_METHODS or name in ("isEnabledFor", "getEffectiveLevel"):
            return ContainerMethodVariable(self, name)
        if name in ("name", "level", "disabled", "propagate"):
            from .builder import wrap
            from ..source import AttrSource
            return wrap(tx, getattr(self.logger, name), AttrSource(self.source, name))
        ext = _logger_extension(tx, self, name)
        if ext is not None:
            return ext
        raise Unsupported(f"attribute {name!r} of a logging.Logger")

    def call_method(self, tx, name, args, kwargs):
        if name not in _LOGGER_METHODS and name not in ("getEffectiveLevel", "isEnabledFor"):
            ext = _logger_extension(tx, self, name)
            if ext is not None:
                return ext.call_function(tx, args, kwargs)
        lg = self.logger
        if name in _LOGGER_METHODS:
            return log_call(tx, lg, name, args, kwargs, f"{lg.name} logger .{name}()")
        g = tx.output.guards
        e = self.source.expr()
        if name == "getEffectiveLevel" and not args and not kwargs:
            lvl = lg.getEffectiveLevel()
            g.add(f"{e}.getEffectiveLevel() == {lvl}", f"logger {lg.name!r} level is {lvl}")
            return ConstantVariable(lvl)
        if name == "isEnabledFor" and len(args) == 1 and not kwargs and args[0].is_python_constant():
            level = args[0].as_python_constant()
            on = lg.isEnabledFor(level)
            g.add(f"{e}.isEnabledFor({int(level)}) is {on}",
                  f"logger {lg.name!r} is {'enabled' if on else 'disabled'} for level {level}")
            return ConstantVariable(on)
        raise Unsupported(f"logging.Logger.{name}")


def _logger_extension(tx, lv, name):
    """A logging method a library added to ``logging.Logger`` (transformers'
    ``logger.warning_once``: a function wrapped in ``functools.lru_cache``, set on the class), or
    None. Guarded: the class attribute is the same object and the logger has no instance
    attribute of that name."""
    import functools
    import inspect
    import types
    lg = lv.logger
    if name.startswith("_") or name in getattr(lg, "__dict__", {}):
        return None
    attr = inspect.getattr_static(type(lg), name, None)
    fn = attr.__wrapped__ if isinstance(attr, functools._lru_cache_wrapper) else attr
    if not isinstance(fn, types.FunctionType) or fn.__module__ == "logging":
        return None
    g = tx.output.guards
    e = lv.source.expr()
    g.add(f"{name!r} not in {e}.__dict__", f"{name} is not an instance attribute of the logger")
    g.add(f"{g.ref(inspect.getattr_static)}(type({e}), {name!r}, None) is {g.ref(attr)}",
          f"Logger.{name} unchanged")
    return _LoggerExtensionMethod(lv, name, fn)


class _LoggerExtensionMethod(VariableTracker):
    """``logger.warning_once(msg)``: replayed after the graph as a call of the real bound method
    (so its ``lru_cache`` logs once, with eager's record location). Its body is traced first to
    check that it only logs and returns None -- anything else (a graph operator, another side
    effect, a result) is not replayable and stays a graph break."""

    def __init__(self, lv, name, fn):
        self.lv, self.name, self.fn = lv, name, fn

    def call_function(self, tx, args, kwargs):
        from .functions import UserFunctionVariable
        what = f"{self.lv.logger.name} logger .{self.name}()"
        _enabled(what)
        vals = [_snapshot(a, what) for a in args]
        kw = {k: _snapshot(v, what) for k, v in kwargs.items()}
        out = tx.output
        n_side, n_ops, n_nodes = len(out.side_effects), out.n_calls, len(out.graph.nodes)
        res = UserFunctionVariable(self.fn).call_function(tx, [self.lv] + list(args), dict(kwargs))
        new = out.side_effects[n_side:]
        if out.n_calls != n_ops or len(out.graph.nodes) != n_nodes or \
                not (res.is_python_constant() and res.as_python_constant() is None) or \
                not all(eff[0] == "call" and eff[1] in (_log_at, _warn_at, print) for eff in new):
            raise Unsupported(f"{what} does more than log (it cannot be replayed after the graph)")
        del out.side_effects[n_side:]
        return _record(tx, getattr(self.lv.logger, self.name), vals, kw)

    def reconstruct(self, out):
        # (alive across a graph break, e.g. its argument is only known after the graph)
        return f"{out.materialize(self.lv)}.{self.name}"

    def __repr__(self):
        return f"_LoggerExtensionMethod({self.name})"
