"""``F``: ``ember.nn.functional`` resolved on first use (it is imported lazily so that
``ember.nn.modules`` can load before the functional layer)."""


class _LazyFunctional:
    _mod = None

    def __getattr__(self, name):
        mod = _LazyFunctional._mod
        if mod is None:
            import importlib
            mod = _LazyFunctional._mod = importlib.import_module("ember.nn.functional")
        return getattr(mod, name)


F = _LazyFunctional()
