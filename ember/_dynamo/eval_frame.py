"""``torch._dynamo.eval_frame`` names: ``OptimizedModule`` (the class of ``ember.compile(module)``'s
result, so ``isinstance(m, torch._dynamo.eval_frame.OptimizedModule)`` and ``m._orig_mod`` work as
in PyTorch), ``is_dynamo_supported`` / ``is_inductor_supported``, ``optimize_assert``, ``run``
(compiled code only, no new compiles) and ``reset_code``."""
from __future__ import annotations

import functools
import inspect
import shutil
import sys

from ..dynamo import disable, explain, optimize, reset  # noqa: F401 - torch's eval_frame has them too


def _optimized_module_class():
    from ..dynamo import eval_frame as _ef
    if _ef._Lazy.cls is None:
        _ef._Lazy.cls = _ef._optimized_module_class()
    cls = _ef._Lazy.cls
    cls.__qualname__ = "OptimizedModule"       # (not the factory's <locals> name in reprs)
    return cls


def __getattr__(name):
    # the class is built on first use: it subclasses ember.nn.Module, which this package must not
    # import when ``ember._dynamo`` is first reached (ember's own import is still running then)
    if name == "OptimizedModule":
        return _optimized_module_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_dynamo_supported() -> bool:
    """Whether ``ember.compile`` can capture frames here: a Python it supports (3.11-3.13) with
    the frame-hook extension built for it."""
    if not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return False
    try:
        from .._C import _load_eval_frame
        _load_eval_frame()
    except ImportError:
        return False
    return True


def is_inductor_supported() -> bool:
    """Whether the inductor backend can compile: dynamo is supported and the C++ compiler it runs
    (``ember.inductor.config.cxx``) is on PATH."""
    if not is_dynamo_supported():
        return False
    from ..inductor import config as _icfg
    return shutil.which(_icfg.cxx) is not None


def optimize_assert(backend, *, hooks=None, export=False, export_constraints=None, dynamic=None,
                    rebuild_ctx=None, package=None):
    """``optimize(backend)`` with ``fullgraph=True``: a frame that cannot be captured as one graph
    raises instead of running eagerly (torch's "nopython" mode)."""
    for name, value in (("hooks", hooks), ("export_constraints", export_constraints), ("package", package)):
        if value is not None:
            raise NotImplementedError(f"ember._dynamo.optimize_assert: argument {name!r} is not supported")
    if export:
        raise NotImplementedError("ember._dynamo.optimize_assert(export=True): use ember.export.export")
    return optimize(backend, fullgraph=True, dynamic=dynamic)


class _RunOnly:
    """Frame-hook callback that runs code compiled earlier (by any ``ember.compile`` of it) whose
    guards pass, and runs everything else eagerly: nothing is traced or compiled."""

    def __call__(self, code, func, *args):
        from ..dynamo import convert_frame as _cf
        from ..dynamo import stance as _stance
        if _stance.current().stance == "force_eager":
            return None
        cache = _cf._caches.get(code)
        if cache is None:
            return None
        hot = cache.hot
        if hot is not None and hot.guard(func, *args):
            return hot.fn
        for e in cache.entries:
            if e is not hot and e.guard(func, *args):
                return e.fn
        return None


class RunOnlyContext:
    """``with ember._dynamo.run():`` / ``run(fn)``: compiled code is reused, nothing new compiled."""

    def __init__(self):
        self._prev = []

    def __enter__(self):
        from ..dynamo.eval_frame import set_eval_frame
        self._prev.append(set_eval_frame(_RunOnly()))
        return self

    def __exit__(self, *exc):
        from ..dynamo.eval_frame import set_eval_frame
        set_eval_frame(self._prev.pop())
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"ember._dynamo.run: argument 'fn' must be callable, got {type(fn).__name__}")

        @functools.wraps(fn)
        def run_only(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return run_only


def innermost_fn(fn):
    """The user's function under ``ember.compile`` wrappers (a compiled function's original, a
    compiled module's forward target stays the module)."""
    while True:
        orig = getattr(fn, "_ember_orig", None)
        if orig is None:
            return fn
        fn = orig


def run(fn=None):
    """Run ``fn`` (or, without ``fn``, the block of a ``with``) using only code compiled before:
    frames with a cache entry whose guards pass run it; every other frame runs eagerly and nothing
    is compiled (``torch._dynamo.run``). Given an ``ember.compile``-d function, its original runs
    this way."""
    if fn is not None:
        from ..nn.modules.module import Module
        if isinstance(fn, _optimized_module_class()):
            fn = fn._orig_mod
        elif not isinstance(fn, Module):
            fn = innermost_fn(fn)
        return RunOnlyContext()(fn)
    return RunOnlyContext()


def reset_code(code) -> None:
    """Forget the compiled entries of one code object (``torch._dynamo.reset_code``)."""
    import types
    if not isinstance(code, types.CodeType):
        raise TypeError(f"reset_code: argument 'code' must be a code object, got {type(code).__name__}")
    from ..dynamo import convert_frame as _cf
    if _cf._caches.pop(code, None) is not None:
        _cf._eval_frame.unmark_skip(code)


def reset_code_caches() -> None:
    """Forget every compiled entry (less than ``reset``: counters, registered compile hooks and the
    recorded graph-break reasons stay), as ``torch._dynamo.reset_code_caches``."""
    from ..dynamo import convert_frame as _cf
    for code in list(_cf._caches):
        reset_code(code)


__all__ = ["OptimizedModule", "is_dynamo_supported", "is_inductor_supported", "optimize_assert", "run",
           "RunOnlyContext", "reset_code", "reset_code_caches", "innermost_fn", "optimize", "disable", "explain"]
