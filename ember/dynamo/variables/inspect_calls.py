"""``inspect.signature(f)`` in compiled code, folded at trace time.

diffusers' ``Attention.forward`` filters its keyword arguments by
``set(inspect.signature(self.processor.__call__).parameters.keys())``, HuggingFace checks
``"return_dict" in inspect.signature(fn).parameters``. Traced line by line, inspect's own
code stopped at its C-level internals (a graph break per call). The signature is a function of
the callable only, and the callable is guarded where the trace found it (a function by
identity, a method through its class attribute), so it is computed with the real
``inspect.signature`` while tracing. The result exposes what such code reads:
``parameters`` (a dict name -> ``inspect.Parameter`` constants, in order) and
``return_annotation``; anything else about it is unsupported.
"""
from __future__ import annotations

import inspect

from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable


def _real_callable(v):
    """(the Python callable ``v`` tracks, whether it is bound to a first argument)."""
    from .functions import UserFunctionVariable, UserMethodVariable
    from .objects import ClassVariable, EmberFunctionVariable, NNModuleVariable
    if isinstance(v, UserMethodVariable) and isinstance(v.fn_var, UserFunctionVariable):
        return v.fn_var.fn, True
    if isinstance(v, (UserFunctionVariable, EmberFunctionVariable)):
        return v.fn, False
    if isinstance(v, ClassVariable):
        return v.cls, False
    if isinstance(v, NNModuleVariable):
        return v.module, False
    raise Unsupported(f"inspect.signature of {v}")


def _bound(sig):
    """``sig`` of a function seen through a bound method (inspect drops the first parameter)."""
    params = list(sig.parameters.values())
    if not params or params[0].kind is inspect.Parameter.KEYWORD_ONLY:
        raise Unsupported("inspect.signature of a method without a positional first parameter")
    if params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return sig
    return sig.replace(parameters=params[1:])


class InspectSignatureFunctionVariable(VariableTracker):
    """``inspect.signature`` itself."""

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def as_python_constant(self):
        return self.fn

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or not all(k in ("follow_wrapped", "eval_str") and v.is_python_constant()
                                     for k, v in kwargs.items()):
            raise Unsupported("inspect.signature with arguments other than the callable")
        fn, bound = _real_callable(args[0])
        opts = {k: v.as_python_constant() for k, v in kwargs.items()}
        try:
            sig = inspect.signature(fn, **opts)
        except (TypeError, ValueError) as e:
            from .exceptions import raise_from_real
            raise_from_real(tx, e, f"inspect.signature raised {type(e).__name__}: {e}")
        return SignatureVariable(_bound(sig) if bound else sig)

    def reconstruct(self, out):
        return out.ref(self.fn)

    def __repr__(self):
        return "InspectSignatureFunctionVariable()"


class SignatureVariable(VariableTracker):
    """An ``inspect.Signature`` computed at trace time (immutable)."""

    def __init__(self, sig):
        self.sig = sig

    def python_type(self):
        return inspect.Signature

    def as_python_constant(self):
        return self.sig

    def var_getattr(self, tx, name):
        from .lists import DictVariable
        if name == "parameters":
            return DictVariable({k: ParameterVariable(p) for k, p in self.sig.parameters.items()})
        if name == "return_annotation":
            return ConstantVariable(self.sig.return_annotation)
        raise Unsupported(f"inspect.Signature.{name}")

    def reconstruct(self, out):
        return out.ref(self.sig)

    def __repr__(self):
        return f"SignatureVariable{self.sig}"


class ParameterVariable(ConstantVariable):
    """An ``inspect.Parameter`` of a folded signature: its ``name`` and ``kind`` are constants;
    ``default`` and ``annotation`` are wrapped as the values they are (``inspect.Parameter.empty``
    is a class, compared with ``is``; a tensor default is not made a constant)."""

    def var_getattr(self, tx, name):
        if name in ("default", "annotation"):
            from .builder import wrap
            return wrap(tx, getattr(self.value, name), None, guard=False)
        return super().var_getattr(tx, name)
