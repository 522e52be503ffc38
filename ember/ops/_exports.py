"""The functions an API module adds to ``ember`` and the methods it adds to ``Tensor``.

Modules that are a batch of PyTorch's surface (``more_api``, ``misc_api``, ``linalg_api``,
``scatter_views``) decorate with ``@_export`` (``method=True`` also makes a ``Tensor`` method,
``function=False`` only that) and call ``_export.install()`` at their end."""
from __future__ import annotations


class Exports:
    def __init__(self, methods_by_default=False):
        self.functions = {}       # name -> function on ``ember``
        self.methods = {}         # name -> Tensor method
        self.methods_by_default = methods_by_default

    def __call__(self, fn=None, *, method=None, function=True, name=None):
        method = self.methods_by_default if method is None else method

        def deco(f):
            n = name or f.__name__
            if function:
                self.functions[n] = f
            if method:
                self.methods[n] = f
            return f
        return deco(fn) if fn is not None else deco

    def install(self):
        from ..tensor import Tensor
        from . import api
        for name, fn in self.functions.items():
            setattr(api, name, fn)
        for name, fn in self.methods.items():
            setattr(Tensor, name, fn)
