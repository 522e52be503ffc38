"""``ember.jit``: the ``torch.jit`` entry points model code calls, mapped onto ember's JIT.

ember has no TorchScript (no second language, no serialized IR); ``ember.compile`` is its
JIT. So ``@ember.jit.script`` and ``ember.jit.trace`` return the object compiled by
``ember.compile`` -- the same numbers as eager, captured graphs and fused kernels --
rather than a ScriptModule. Where the two differ, ember's answer is the eager one: a traced
function whose control flow depends on its input is re-captured for the other branch
(TorchScript's ``trace`` would replay the example's branch), and data-dependent Python that
TorchScript rejects runs, with a graph break. What needs TorchScript itself (``.code``,
``.graph``, ``jit.save``/``jit.load``, ``freeze``) raises an error that says so.

The decorators and annotations (``ignore``, ``unused``, ``export``, ``annotate``, ``Final``,
``Attribute``, ``is_scripting``, ``is_tracing``, ``fork``/``wait``) behave as they do in
eager PyTorch, where they are pass-throughs. dynamo traces through this module (it is plain
Python), so ``if not ember.jit.is_scripting():`` in a compiled model folds to its eager branch.
"""
from __future__ import annotations

import typing

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "annotate", "Final",
           "Attribute", "is_scripting", "is_tracing", "fork", "wait", "Future", "save", "load",
           "freeze", "optimize_for_inference", "interface", "script_if_tracing"]

Final = typing.Final


_SCRIPTED_CLASSES = {}


def _scripted_class(base):
    """``base`` (the class ``ember.compile(module)`` returns) with the original module's
    parameter names: a scripted module's ``state_dict`` has the module's keys in PyTorch (no
    ``_orig_mod.`` prefix, which ``torch.compile``'s wrapper adds), so checkpoints interchange."""
    if base not in _SCRIPTED_CLASSES:
        def state_dict(self, *args, **kwargs):
            return self._orig_mod.state_dict(*args, **kwargs)

        def load_state_dict(self, state_dict, strict=True, assign=False):
            return self._orig_mod.load_state_dict(state_dict, strict=strict, assign=assign)

        def named_parameters(self, *args, **kwargs):
            return self._orig_mod.named_parameters(*args, **kwargs)

        def named_buffers(self, *args, **kwargs):
            return self._orig_mod.named_buffers(*args, **kwargs)

        _SCRIPTED_CLASSES[base] = type("ScriptModule", (base,), {
            "state_dict": state_dict, "load_state_dict": load_state_dict,
            "named_parameters": named_parameters, "named_buffers": named_buffers,
            "__module__": __name__, "__doc__": _scripted_class.__doc__})
    return _SCRIPTED_CLASSES[base]


def _compiled(obj, what):
    from .dynamo import compile as _compile
    from .nn import Module
    if isinstance(obj, Module):
        out = _compile(obj)
        out.__class__ = _scripted_class(type(out))
        return out
    if callable(obj):
        return _compile(obj)
    raise TypeError(f"ember.jit.{what}: expected a function or an nn.Module, got {type(obj).__name__}")


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``obj`` (a function or an ``nn.Module``) compiled with ``ember.compile``: ember's JIT
    in place of TorchScript (see the module docstring). A class cannot be scripted."""
    if isinstance(obj, type):
        raise NotImplementedError(f"ember.jit.script of a class ({obj.__name__}): TorchScript classes are not "
                                  "part of ember; use the class as is (ember.compile traces Python)")
    return _compiled(obj, "script")


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None,
          example_kwarg_inputs=None, _store_inputs=True):
    """``func`` compiled with ``ember.compile`` and run once on ``example_inputs`` (so the
    first capture happens here, as tracing does). Unlike TorchScript's trace, other inputs
    that take another branch get their own capture instead of replaying this one."""
    out = _compiled(func, "trace")
    if example_inputs is not None or example_kwarg_inputs is not None:
        args = example_inputs if isinstance(example_inputs, tuple) else (
            () if example_inputs is None else (example_inputs,))
        from .autograd import no_grad
        with no_grad():
            out(*args, **(example_kwarg_inputs or {}))
    return out


def trace_module(mod, inputs, **kwargs):
    """``trace`` of ``mod`` for its ``forward`` (other methods run eagerly)."""
    if "forward" not in inputs:
        raise NotImplementedError("ember.jit.trace_module: only the 'forward' method can be traced")
    return trace(mod, inputs["forward"], **kwargs)


def script_if_tracing(fn):
    return fn


def ignore(drop=False, **kwargs):
    """Leave a function to Python: it already is (``@ignore`` and ``@ignore(drop=True)``)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def interface(obj):
    return obj


def annotate(the_type, the_value):
    """The value (the type is for TorchScript's checker)."""
    return the_value


def Attribute(value, type=None):  # noqa: N802 - PyTorch's name
    return value


def is_scripting() -> bool:
    """False: ember never runs code as TorchScript."""
    return False


def is_tracing() -> bool:
    """False: ``ember.jit.trace`` compiles rather than records TorchScript."""
    return False


from .futures import Future  # noqa: E402  (torch.jit.Future is torch.futures.Future)


def fork(func, *args, **kwargs):
    """Run ``func(*args, **kwargs)`` now and return a completed Future of its result: eager
    PyTorch runs a fork synchronously too (an exception propagates from ``fork`` itself)."""
    import warnings
    warnings.warn("`ember.jit.fork` is deprecated. Please use `ember.compile` instead.", DeprecationWarning,
                  stacklevel=2)
    fut = Future()
    fut.set_result(func(*args, **kwargs))
    return fut


def wait(future):
    """The result of a ``fork``'s Future (``future.wait()``); deprecated, as in torch."""
    import warnings
    warnings.warn("`ember.jit.wait` is deprecated. Please use `ember.compile` instead.", DeprecationWarning,
                  stacklevel=2)
    return future.wait()


def _no_torchscript(what, instead):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"ember.jit.{what} needs TorchScript, which ember does not have; {instead}")
    fn.__name__ = what
    return fn


save = _no_torchscript("save", "save the weights with ember.save(model.state_dict(), path)")
load = _no_torchscript("load", "rebuild the model in Python and load its state_dict with ember.load(path)")
freeze = _no_torchscript("freeze", "ember.compile(model) already folds what it can")
optimize_for_inference = _no_torchscript("optimize_for_inference", "use ember.compile(model) under ember.no_grad()")
