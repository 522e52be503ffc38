"""Datapipe decorators: ``functional_datapipe`` (register ``dp.name(...)``), the determinism
switches (``non_deterministic``, ``guaranteed_datapipes_determinism``) and type checks
(``argument_validation``, ``runtime_validation``, ``runtime_validation_disabled``)."""
from __future__ import annotations

import inspect
from functools import wraps
from typing import get_origin, get_type_hints

from ._typing import issubinstance, iter_element_hint
from .datapipe import IterDataPipe, MapDataPipe, _DataPipeMeta

__all__ = ["functional_datapipe", "guaranteed_datapipes_determinism", "non_deterministic", "argument_validation",
           "runtime_validation", "runtime_validation_disabled"]


class functional_datapipe:
    """``@functional_datapipe("name")`` on a datapipe class makes ``dp.name(*args)`` build it."""

    def __init__(self, name: str, enable_df_api_tracing=False):
        self.name = name
        self.enable_df_api_tracing = enable_df_api_tracing

    def __call__(self, cls):
        if isinstance(cls, non_deterministic) or isinstance(getattr(cls, "__self__", None), non_deterministic):
            IterDataPipe.register_datapipe_as_function(self.name, cls,
                                                       enable_df_api_tracing=self.enable_df_api_tracing)
            return cls
        if isinstance(cls, type) and issubclass(cls, IterDataPipe):
            if not isinstance(cls, _DataPipeMeta):
                raise TypeError("`functional_datapipe` can only decorate IterDataPipe")
            IterDataPipe.register_datapipe_as_function(self.name, cls,
                                                       enable_df_api_tracing=self.enable_df_api_tracing)
        elif isinstance(cls, type) and issubclass(cls, MapDataPipe):
            MapDataPipe.register_datapipe_as_function(self.name, cls)
        return cls


_determinism = False


class guaranteed_datapipes_determinism:
    """While active (it switches on when constructed, as PyTorch's), building a datapipe marked
    ``non_deterministic`` raises TypeError."""

    def __init__(self):
        global _determinism
        self.prev = _determinism
        _determinism = True

    def __enter__(self):
        pass

    def __exit__(self, exc_type, exc_value, traceback):
        global _determinism
        _determinism = self.prev


class non_deterministic:
    """Mark an IterDataPipe class as non-deterministic -- always (``@non_deterministic`` on the
    class) or depending on its arguments (``@non_deterministic(fn)``, ``fn(*args) -> bool``)."""

    cls = None

    def __init__(self, arg):
        if isinstance(arg, type):
            if not issubclass(arg, IterDataPipe):
                raise TypeError("Only `IterDataPipe` can be decorated with `non_deterministic`"
                                f", but {arg.__name__} is found")
            self.cls = arg
        elif callable(arg):
            self.deterministic_fn = arg
        else:
            raise TypeError(f"{arg} can not be decorated by non_deterministic")

    def __call__(self, *args, **kwargs):
        if self.cls is not None:
            if _determinism:
                raise TypeError(f"{self.cls.__name__} is non-deterministic, but you set "
                                "'guaranteed_datapipes_determinism'. You can turn off determinism for this "
                                "DataPipe if that is acceptable for your application")
            return self.cls(*args, **kwargs)
        if not (isinstance(args[0], type) and issubclass(args[0], IterDataPipe)):
            raise TypeError(f"Only `IterDataPipe` can be decorated, but {args[0].__name__} is found")
        self.cls = args[0]
        return self.deterministic_wrapper_fn

    def deterministic_wrapper_fn(self, *args, **kwargs):
        res = self.deterministic_fn(*args, **kwargs)
        if not isinstance(res, bool):
            raise TypeError("deterministic_fn of `non_deterministic` decorator is required to return a boolean "
                            f"value, but {type(res)} is found")
        if _determinism and res:
            raise TypeError(f"{self.cls.__name__} is non-deterministic with the inputs, but you set "
                            "'guaranteed_datapipes_determinism'. You can turn off determinism for this DataPipe "
                            "if that is acceptable for your application")
        return self.cls(*args, **kwargs)


def argument_validation(f):
    """Check, at each call, that arguments annotated with a datapipe class (``IterDataPipe``, a
    subclass, or a parametrized ``IterDataPipe[int]`` -- its class is checked, not the items)
    are instances of it."""
    signature = inspect.signature(f)
    hints = get_type_hints(f)

    @wraps(f)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            hint = get_origin(hint) or hint
            if isinstance(hint, _DataPipeMeta):
                base = IterDataPipe if issubclass(hint, IterDataPipe) else MapDataPipe
                if not isinstance(value, base):
                    raise TypeError(f"Expected argument '{name}' as a {base.__name__}, but found {type(value)}")
                if not isinstance(value, hint):
                    raise TypeError(f"Expected argument '{name}' as an instance of {hint.__qualname__}, "
                                    f"but found {type(value)}")
        return f(*args, **kwargs)

    return wrapper


_runtime_validation_enabled = True


class runtime_validation_disabled:
    """Turn ``runtime_validation`` checks off (from construction to ``__exit__``)."""

    def __init__(self):
        global _runtime_validation_enabled
        self.prev = _runtime_validation_enabled
        _runtime_validation_enabled = False

    def __enter__(self):
        pass

    def __exit__(self, exc_type, exc_value, traceback):
        global _runtime_validation_enabled
        _runtime_validation_enabled = self.prev


def runtime_validation(f):
    """Decorate an ``__iter__ -> Iterator[T]``: each yielded value must be an instance of ``T``
    (checked recursively for tuple/list/dict element types), else RuntimeError."""
    if f.__name__ != "__iter__":
        raise TypeError(f"Can not decorate function {f.__name__} with 'runtime_validation'")
    element_hint = iter_element_hint(f)

    @wraps(f)
    def wrapper(self):
        if not _runtime_validation_enabled or element_hint is None:
            yield from f(self)
            return
        for d in f(self):
            if not issubinstance(d, element_hint):
                raise RuntimeError(f"Expected an instance as subtype of {_type_repr(element_hint)}, but found "
                                   f"{d}({type(d)})")
            yield d

    return wrapper


def _type_repr(t) -> str:
    if isinstance(t, type) and t.__module__ == "builtins":
        return t.__qualname__
    return repr(t)
