"""Exception objects made while tracing, and raising them by Python's rules.

An exception the program raises by semantics known at trace time -- a ``raise`` statement, a
missing dict key, an attribute an object lacks, ``next()`` of an exhausted iterator, a failing
conversion of constants -- is an ``ExceptionVariable`` carried by ``exc.ObservedException``.
The translator unwinds to the handler named by the frame's exception table, in that frame or
an inlining caller (symbolic_convert.py), so ``try``/``except``/``else``/``finally`` run as in
CPython without a graph break. An exception no traced frame handles stays an ``Unsupported``:
the program then raises it for real, eagerly, with its real traceback.

Only what the trace knows can be raised: an exception a tensor operation would raise at run
time is not known while tracing (such ``try`` blocks keep their handling: the compiled frame
re-runs eagerly if the graph raises, see ``OutputGraph.compile``)."""
from __future__ import annotations

import inspect
import types

from ..exc import ObservedException, Unsupported
from .base import VariableTracker
from .constant import ConstantVariable

# builtin exception types whose construction does more than store ``args`` (errno mapping to a
# subclass, parsed fields, a group of exceptions): not modelled, constructing one breaks
_UNMODELLED = (OSError, SyntaxError, UnicodeDecodeError, UnicodeEncodeError, UnicodeTranslateError)
try:
    _UNMODELLED = _UNMODELLED + (BaseExceptionGroup,)   # noqa: F821 (3.11+)
except NameError:   # pragma: no cover
    pass


def _first_builtin(cls):
    for k in cls.__mro__:
        if k.__module__ == "builtins":
            return k
    return BaseException


def can_model(cls) -> bool:
    """Instances of ``cls`` are plain (``args``, attributes set by Python ``__init__`` code)."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) or issubclass(cls, _UNMODELLED):
        return False
    if type(cls) is not type:
        return False
    for k in cls.__mro__:
        if k.__module__ == "builtins":
            break
        if "__new__" in k.__dict__ or "__getattribute__" in k.__dict__ or "__setattr__" in k.__dict__ \
                or "__slots__" in k.__dict__ or "__getattr__" in k.__dict__:
            return False
    return True


class ExceptionVariable(VariableTracker):
    """An exception instance made while tracing: its type, ``args`` (trackers), the attributes
    its ``__init__`` set, and ``__cause__``/``__context__``/``__suppress_context__``. Leaving
    the frame (returned, stored, at a graph break) it is rebuilt without running ``__init__``
    again (``rebuild_exception``)."""

    def __init__(self, exc_type, args, source=None):
        self.exc_type = exc_type
        self.args = list(args)
        self.attrs = {}
        self.cause = None
        self.context = None
        self.suppress_context = False
        self.source = source
        self.surfaced = None      # root-frame instruction index where it first reached the root frame
        # ``__traceback__``: None (never raised), _RAISED (raised while tracing: a traceback that
        # grows as it leaves frames, a fresh TracebackVariable per read) or the TracebackVariable
        # given by ``with_traceback``/assignment before it was raised
        self.tb_state = None

    # ------------------------------------------------------------------ tracker protocol
    def python_type(self):
        return self.exc_type

    def truthy(self, tx):
        return True

    def describe(self):
        try:
            msg = str(self.real())
        except Unsupported:
            msg = "..."
        return f"{self.exc_type.__name__}: {msg}" if msg else self.exc_type.__name__

    def real(self):
        """A real exception equal to this one (its arguments and attributes must be constants)."""
        vals = []
        for a in self.args:
            if not a.is_python_constant():
                raise Unsupported(f"{self.exc_type.__name__} with an argument that is not a constant")
            vals.append(a.as_python_constant())
        e = self.exc_type.__new__(self.exc_type, *vals)
        e.args = tuple(vals)
        for k, v in self.attrs.items():
            if not v.is_python_constant():
                raise Unsupported(f"{self.exc_type.__name__}.{k} is not a constant")
            setattr(e, k, v.as_python_constant())
        return e

    def var_getattr(self, tx, name):
        from .functions import UserFunctionVariable, UserMethodVariable
        from .lists import TupleVariable
        from .objects import ClassVariable
        if name in self.attrs:
            return self.attrs[name]
        if name == "args":
            return TupleVariable(list(self.args))
        if name == "__cause__":
            return self.cause or ConstantVariable(None)
        if name == "__context__":
            return self.context or ConstantVariable(None)
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "__class__":
            return ClassVariable(self.exc_type)
        if name == "__traceback__":
            # None until raised; after that a traceback that can only be None-checked/compared
            if self.tb_state is _RAISED:
                return TracebackVariable(self)
            return self.tb_state if self.tb_state is not None else ConstantVariable(None)
        if name == "with_traceback":
            return _WithTraceback(self)
        if name == "value" and issubclass(self.exc_type, StopIteration):
            return self.args[0] if self.args else ConstantVariable(None)
        try:
            attr = inspect.getattr_static(self.exc_type, name)
        except AttributeError:
            raise_observed(tx, AttributeError, f"{self.exc_type.__name__!r} object has no attribute {name!r}")
        if isinstance(attr, types.FunctionType):
            return UserMethodVariable(UserFunctionVariable(attr), self)
        if isinstance(attr, property) and attr.fget is not None:
            return UserFunctionVariable(attr.fget).call_function(tx, [self], {})
        if isinstance(attr, (types.MemberDescriptorType, types.GetSetDescriptorType)):
            # a field of the builtin type (ImportError.name, AttributeError.obj ...): read on an
            # equal real exception
            try:
                value = getattr(self.real(), name)
            except AttributeError as err:
                raise_observed(tx, AttributeError, str(err))
            from .builder import wrap_constant_result
            return wrap_constant_result(value)
        if name in ("__str__", "__repr__"):
            return _BoundExcMethod(self, name)
        if isinstance(attr, (int, float, str, bool, type(None))):
            return ConstantVariable(attr)
        raise Unsupported(f"attribute {name!r} of {self.exc_type.__name__} ({type(attr).__name__})")

    def set_attr(self, tx, name, value):
        if name == "__cause__":
            self.cause = None if _is_none(value) else value
            self.suppress_context = True
        elif name == "__context__":
            self.context = None if _is_none(value) else value
        elif name == "__suppress_context__":
            self.suppress_context = bool(value.as_python_constant())
        elif name == "args":
            self.args = value.unpack(tx)
        elif name == "__traceback__":
            self.set_traceback(tx, value)
        else:
            self.attrs[name] = value

    def call_method(self, tx, name, args, kwargs):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def set_traceback(self, tx, value):
        """``e.__traceback__ = value`` / ``e.with_traceback(value)`` on an exception not raised yet
        (value None or a traceback tracker). On one already raised, what a later read sees depends
        on frames the exception still leaves, which is not modelled: graph break."""
        if self.tb_state is _RAISED:
            raise Unsupported(f"setting the traceback of {self.exc_type.__name__} after it was raised while tracing")
        if _is_none(value):
            self.tb_state = None
        elif isinstance(value, TracebackVariable):
            self.tb_state = value
        else:
            raise_observed(tx, TypeError, "__traceback__ must be a traceback or None")

    def to_str(self, tx, kind="__str__"):
        """``str(e)`` / ``repr(e)``: a user ``__str__``/``__repr__`` is inlined, the builtin one
        computed on an equal real exception."""
        from .functions import UserFunctionVariable
        for k in self.exc_type.__mro__:
            if kind in k.__dict__:
                fn = k.__dict__[kind]
                if isinstance(fn, types.FunctionType):
                    return UserFunctionVariable(fn).call_function(tx, [self], {})
                break
        real = self.real()
        return ConstantVariable(str(real) if kind == "__str__" else repr(real))

    def reconstruct(self, out):
        if isinstance(self.tb_state, TracebackVariable):
            self.tb_state._refuse("an exception holding it (given by with_traceback) leaving the frame")
        args = "(" + "".join(out.materialize(a) + ", " for a in self.args) + ")"
        attrs = "{" + ", ".join(f"{k!r}: {out.materialize(v)}" for k, v in self.attrs.items()) + "}"
        cause = out.materialize(self.cause) if self.cause is not None else "None"
        context = out.materialize(self.context) if self.context is not None else "None"
        return (f"{out.ref(rebuild_exception)}({out.ref(self.exc_type)}, {args}, {attrs}, {cause}, {context}, "
                f"{self.suppress_context!r})")

    def __repr__(self):
        return f"ExceptionVariable({self.exc_type.__name__})"


class _BoundExcMethod(VariableTracker):
    """``e.__str__`` / ``e.__repr__`` (also what ``super().__str__()`` resolves to)."""

    def __init__(self, exc, name, builtin_only=False):
        self.exc, self.name, self.builtin_only = exc, name, builtin_only

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            raise Unsupported(f"{self.name}() takes no arguments")
        if self.builtin_only:
            real = self.exc.real()
            return ConstantVariable(str(real) if self.name == "__str__" else repr(real))
        return self.exc.to_str(tx, self.name)


class BuiltinExceptionInit(VariableTracker):
    """``super().__init__(...)`` reaching a builtin exception type's ``__init__``."""

    def __init__(self, exc, klass):
        self.exc, self.klass = exc, klass

    def call_function(self, tx, args, kwargs):
        builtin_init(tx, self.exc, self.klass, args, kwargs)
        return ConstantVariable(None)


def builtin_init(tx, ev, klass, args, kwargs):
    """What the builtin ``klass.__init__`` does to ``ev``: ``args`` and the keyword fields
    (ImportError's ``name``/``path``, AttributeError's ``name``/``obj`` ...), checked by running
    the builtin on the constants (a TypeError there is the program's)."""
    k = _first_builtin(klass)
    if issubclass(k, _UNMODELLED):
        raise Unsupported(f"constructing a {k.__name__}")
    if kwargs:
        if not all(v.is_python_constant() for v in kwargs.values()):
            raise Unsupported(f"{k.__name__}() with keyword arguments that are not constants")
        try:
            real = k(**{n: v.as_python_constant() for n, v in kwargs.items()})
        except TypeError as err:
            raise_observed(tx, TypeError, str(err))
        for n in kwargs:
            ev.attrs[n] = kwargs[n]
        del real
    ev.args = list(args)


def construct_exception(tx, class_var, args, kwargs):
    """``SomeError(*args, **kwargs)`` for a class ``can_model`` accepts: ``args`` is set first (as
    ``BaseException.__new__`` does), then the first ``__init__`` of the MRO runs -- inlined if
    it is Python code, modelled if it is a builtin type's."""
    from .functions import UserFunctionVariable
    cls = class_var.cls
    ev = ExceptionVariable(cls, list(args))
    for k in cls.__mro__:
        if "__init__" in k.__dict__:
            init = k.__dict__["__init__"]
            if isinstance(init, types.FunctionType):
                res = UserFunctionVariable(init).call_function(tx, [ev] + list(args), kwargs)
                if not (res.is_python_constant() and res.as_python_constant() is None):
                    raise_observed(tx, TypeError, "__init__() should return None")
                return ev
            break
    builtin_init(tx, ev, cls, args, kwargs)
    return ev


def rebuild_exception(cls, args, attrs, cause, context, suppress):
    """An exception made inside a compiled frame, rebuilt after the graph ran."""
    e = cls.__new__(cls, *args)
    e.args = args
    for k, v in attrs.items():
        setattr(e, k, v)
    e.__cause__ = cause
    e.__context__ = context
    e.__suppress_context__ = suppress
    return e


rebuild_exception.__module__ = "ember.dynamo.variables.exceptions"


def _is_none(v):
    return isinstance(v, ConstantVariable) and v.value is None


def current_exception(tx):
    """The exception being handled (``sys.exc_info()[1]`` as far as the trace knows), or None."""
    return tx.root.cur_exc


def raise_exception(tx, ev, cause=None, has_cause=False, statement=False):
    """``raise ev [from cause]``: sets ``__context__`` (and ``__cause__``) as CPython does, then
    raises it into the translator."""
    cur = current_exception(tx)
    if cur is not None and cur is not ev:
        ev.context = cur
    if has_cause:
        ev.cause = cause
        ev.suppress_context = True
    ev.surfaced = None
    ev.tb_state = _RAISED
    if statement:
        raise ObservedException(ev, f"raise statement reached while tracing: {ev.describe()} (the program raises)")
    raise ObservedException(ev)


def raise_observed(tx, exc_type, *args, **attrs):
    """Raise a builtin exception with constant arguments from a tracker operation (a dict miss,
    an attribute miss ...)."""
    ev = ExceptionVariable(exc_type, [ConstantVariable(a) for a in args])
    for k, v in attrs.items():
        ev.attrs[k] = ConstantVariable(v)
    raise_exception(tx, ev)


# exceptions from folding Python operations on constants that are the program's own
_FOLDABLE = (ArithmeticError, LookupError, ValueError, TypeError, AttributeError)


def raise_from_real(tx, err, what):
    """A real exception raised by an operation on constants while tracing (``int("x")``,
    ``1 / 0``, ``"ab".index("z")``): raised into the trace if it is one of the plain builtin
    kinds with constant arguments, else the trace stops with ``what``."""
    from .constant import _LITERAL
    if tx is not None and type(err).__module__ == "builtins" and isinstance(err, _FOLDABLE) \
            and not isinstance(err, _UNMODELLED) and all(type(a) in _LITERAL for a in err.args) \
            and (isinstance(err, AttributeError) or not _builtin_fields(err)):
        ev = ExceptionVariable(type(err), [ConstantVariable(a) for a in err.args])
        if isinstance(err, AttributeError) and type(getattr(err, "name", None)) is str:
            ev.attrs["name"] = ConstantVariable(err.name)     # (its ``obj`` is not kept)
        raise_exception(tx, ev)
    raise Unsupported(what)


def _builtin_fields(err):
    """Non-default builtin fields (AttributeError.obj ...) an ExceptionVariable would not keep."""
    for name in ("name", "obj", "path"):
        if getattr(err, name, None) is not None:
            return True
    return False


def exception_match(exc_type, match):
    """``except match:`` for an exception of ``exc_type`` (a class or a tuple of classes)."""
    classes = match if isinstance(match, tuple) else (match,)
    for c in classes:
        if not (isinstance(c, type) and issubclass(c, BaseException)):
            raise Unsupported(f"except with {c!r}, which is not an exception class (the program raises "
                              f"TypeError)")
    return issubclass(exc_type, match)


_RAISED = object()


class _WithTraceback(VariableTracker):
    """``e.with_traceback(tb)``: sets ``__traceback__`` and returns ``e``."""

    def __init__(self, exc):
        self.exc = exc

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise_observed(tx, TypeError, f"with_traceback() takes exactly one argument ({len(args)} given)")
        self.exc.set_traceback(tx, args[0])
        return self.exc


class TracebackVariable(VariableTracker):
    """The traceback of an exception raised while tracing (``e.__traceback__``, the third item
    of ``sys.exc_info()``). No traceback object exists while tracing -- the frames it would list
    are being traced, not run -- so only what is known without one is modelled: it is not None
    (``tb is None``, ``tb is not None``, ``tb == None``, ``bool(tb)``), and a tracker equals
    itself. Anything that needs the object (``tb.tb_lineno``, ``tb_frame``,
    ``traceback.format_tb(tb)``, returning it, identity with a traceback read elsewhere: the
    traceback grows as the exception leaves each frame) stops the trace with that reason, and
    the code runs eagerly."""

    def __init__(self, exc):
        self.exc = exc

    def python_type(self):
        return types.TracebackType

    def truthy(self, tx):
        return True

    def _refuse(self, what):
        raise Unsupported(f"{what} of the traceback of {self.exc.exc_type.__name__} raised while tracing "
                          f"(only `is None` checks and comparisons are modelled: no traceback object exists "
                          f"while tracing)")

    def as_python_constant(self):
        self._refuse("the value")

    def var_getattr(self, tx, name):
        self._refuse(f"attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        self._refuse(f"method {name}()")

    def unpack(self, tx):
        self._refuse("iteration")

    def reconstruct(self, out):
        self._refuse("using it after the graph (returned, stored or kept across a graph break)")

    @staticmethod
    def binary(tx, op, a, b):
        """``==``/``!=`` with None or with the same tracker; other operators are refused."""
        import operator
        tb = a if isinstance(a, TracebackVariable) else b
        other = b if tb is a else a
        if op in (operator.eq, operator.ne):
            if _is_none(other) or other is tb:
                same = other is tb
                return ConstantVariable(same if op is operator.eq else not same)
        tb._refuse(f"operator {op.__name__} with {other}")

    def __repr__(self):
        return f"TracebackVariable({self.exc.exc_type.__name__})"


class TracebackModuleVariable(VariableTracker):
    """A function or class of the ``traceback`` module: calling it breaks the graph (it formats
    or walks real traceback and frame objects; none exist while tracing)."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def as_python_constant(self):
        return self.fn

    def call_function(self, tx, args, kwargs):
        raise Unsupported(f"traceback.{getattr(self.fn, '__qualname__', self.fn)}() reads real traceback/frame "
                          f"objects, which do not exist while tracing (runs eagerly at a graph break)")

    def var_getattr(self, tx, name):
        raise Unsupported(f"attribute {name!r} of traceback.{getattr(self.fn, '__qualname__', self.fn)}")

    def reconstruct(self, out):
        return out.ref(self.fn)

    def __repr__(self):
        return f"TracebackModuleVariable({getattr(self.fn, '__qualname__', self.fn)})"


def exc_info_call(tx, args, kwargs):
    """``sys.exc_info()`` inside an except block of traced code: (type, exception, traceback),
    the traceback a ``TracebackVariable``. Outside one, the answer would be the exception the
    compiled function's caller is handling, which is not known while tracing: graph break."""
    from .lists import TupleVariable
    from .objects import ClassVariable
    if args or kwargs:
        raise_observed(tx, TypeError, f"sys.exc_info() takes no arguments ({len(args) + len(kwargs)} given)")
    cur = current_exception(tx)
    if cur is None:
        raise Unsupported("sys.exc_info() outside an except block of the traced code (the exception the "
                          "caller may be handling is not known while tracing)")
    return TupleVariable([ClassVariable(cur.exc_type), cur, TracebackVariable(cur)])


def exception_call(tx, args, kwargs):
    """``sys.exception()`` (3.11+): the exception being handled, as ``sys.exc_info()[1]``."""
    if args or kwargs:
        raise_observed(tx, TypeError, f"sys.exception() takes no arguments ({len(args) + len(kwargs)} given)")
    cur = current_exception(tx)
    if cur is None:
        raise Unsupported("sys.exception() outside an except block of the traced code (the exception the "
                          "caller may be handling is not known while tracing)")
    return cur
