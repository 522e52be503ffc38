"""``with`` blocks over user context managers: classes with Python ``__enter__``/``__exit__`` and
``@contextlib.contextmanager`` generator functions.

Entering inlines ``__enter__`` (or runs the generator up to its ``yield``, whose value is what
``as`` binds); the block is traced; its normal end inlines ``__exit__(None, None, None)`` (or
resumes the generator, which must then finish -- a second ``yield`` is the RuntimeError
``contextlib`` raises). As everywhere in the trace, nothing raises while tracing: if the graph
raises at run time, the frame re-runs eagerly (so the manager's exception path -- a
``contextlib.suppress``, a cleanup -- runs for real), as for a ``try`` block; in-place ops on
the frame's inputs then make the frame run eagerly from the start.

A graph break inside such a block is not modelled (the manager's state would have to be rebuilt
around the breaking call): the frame runs eagerly, as before. The ember managers (no_grad,
autocast, nullcontext) have their own trackers in ctx.py."""
from __future__ import annotations

import contextlib
import inspect
import types

from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable


def _cm_helper_code():
    @contextlib.contextmanager
    def probe():
        yield
    return probe.__code__


_CM_HELPER_CODE = _cm_helper_code()


def is_contextmanager_function(value) -> bool:
    """``value`` is what ``@contextlib.contextmanager`` made of a generator function."""
    inner = getattr(value, "__wrapped__", None)
    return isinstance(value, types.FunctionType) and value.__code__ is _CM_HELPER_CODE \
        and isinstance(inner, types.FunctionType) and inspect.isgeneratorfunction(inner)


class GeneratorContextVariable(VariableTracker):
    """What calling a ``@contextmanager`` function returns: the generator runs when a ``with``
    enters it, not before."""

    def __init__(self, gen_fn, args, kwargs):
        self.gen_fn, self.args, self.kwargs = gen_fn, args, kwargs

    def python_type(self):
        return contextlib._GeneratorContextManager

    def enter(self, tx):
        gen = tx.callee(self.gen_fn, self.args, self.kwargs)
        gen.pause_at_yield = True
        value = gen.run()
        if not gen.paused:
            raise Unsupported("a @contextmanager generator that did not yield (the program raises "
                              "RuntimeError)")
        return _GeneratorExit(gen), value

    def reconstruct(self, out):
        raise Unsupported("a @contextmanager object alive across a graph break")

    def __repr__(self):
        return f"GeneratorContextVariable({getattr(self.gen_fn, 'fn', self.gen_fn)})"


class _GeneratorExit(VariableTracker):
    """The exit of an entered @contextmanager: resumes its generator to the end."""

    def __init__(self, gen):
        self.gen = gen

    def call_function(self, tx, args, kwargs):
        gen = self.gen
        gen.paused = False
        gen.run()
        if gen.paused:
            raise Unsupported("a @contextmanager generator that yielded twice (the program raises "
                              "RuntimeError: generator didn't stop)")
        return ConstantVariable(None)

    def exit_with(self, tx, exc):
        """``contextlib``'s ``__exit__`` with an exception raised while tracing: thrown into the
        generator at its ``yield``. Finishing suppresses it (True); raising it again does not
        (False); raising another exception propagates that one; yielding again is the
        RuntimeError contextlib raises."""
        from ..exc import ObservedException
        gen = self.gen
        gen.paused = False
        yield_inst = gen.instructions[gen.ip - 1]
        if yield_inst.opname != "YIELD_VALUE":
            # 3.12+: the generator stopped after the yield's RESUME bookkeeping; find the yield
            k = gen.ip - 1
            while k >= 0 and gen.instructions[k].opname != "YIELD_VALUE":
                k -= 1
            if k < 0:
                raise Unsupported("@contextmanager generator state not understood")
            yield_inst = gen.instructions[k]
        gen.stack.pop()          # the value the yield evaluates to on resuming (pushed when it paused)
        try:
            if not gen.unwind(ObservedException(exc), yield_inst):
                raise ObservedException(exc)
            gen.run()
        except ObservedException as e:
            if e.exc is exc:
                return ConstantVariable(False)
            if issubclass(e.exc.exc_type, StopIteration):
                raise Unsupported("a @contextmanager generator raised StopIteration after throw()")
            raise
        if gen.paused:
            raise Unsupported("a @contextmanager generator that yielded after throw() (the program raises "
                              "RuntimeError)")
        return ConstantVariable(True)

    def reconstruct(self, out):
        raise Unsupported("a @contextmanager block open across a graph break")


class _MethodExit(VariableTracker):
    """The exit of an entered object manager: ``__exit__(None, None, None)``, inlined."""

    def __init__(self, exit_method):
        self.exit_method = exit_method

    def call_function(self, tx, args, kwargs):
        none = ConstantVariable(None)
        return self.exit_method.call_function(tx, [none, none, none], {})

    def exit_with(self, tx, exc):
        """``__exit__(type, exc, None)`` for an exception raised while tracing (the traceback is
        not known: None)."""
        from .objects import ClassVariable
        return self.exit_method.call_function(tx, [ClassVariable(exc.python_type()), exc, ConstantVariable(None)],
                                              {})

    def reconstruct(self, out):
        raise Unsupported("a user context manager's block open across a graph break")


def enter_user_context(tx, ctx):
    """BEFORE_WITH over a user manager: ``(exit tracker, value bound by as)``.

    Its ``__exit__`` may suppress an exception or clean up after one: as for a ``try`` block,
    a graph holding such a block that raises at run time re-runs the frame eagerly (so the
    manager sees the exception), which is only sound for a graph that mutated nothing
    (``OutputGraph.covers_try``)."""
    tx.output.covers_try = True
    if isinstance(ctx, GeneratorContextVariable):
        return ctx.enter(tx)
    from .objects import NewObjectVariable, UserObjectVariable
    if isinstance(ctx, (NewObjectVariable, UserObjectVariable)):
        cls = ctx.python_type()
        enter = inspect.getattr_static(cls, "__enter__", None)
        exit_ = inspect.getattr_static(cls, "__exit__", None)
        if isinstance(enter, types.FunctionType) and isinstance(exit_, types.FunctionType):
            exit_method = ctx.var_getattr(tx, "__exit__")
            value = ctx.var_getattr(tx, "__enter__").call_function(tx, [], {})
            return _MethodExit(exit_method), value
        raise Unsupported(f"with block over a {cls.__name__} whose __enter__/__exit__ are not Python "
                          f"functions")
    raise Unsupported(f"with block over {ctx} (ember.no_grad()/enable_grad()/autocast(), "
                      f"contextlib.nullcontext(), @contextmanager functions and classes with Python "
                      f"__enter__/__exit__ are modelled)")
