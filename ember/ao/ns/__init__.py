"""``ember.ao.ns``: the eager-mode numeric suite (``_numeric_suite``) -- compare a float model with
its quantized version weight by weight, module output by module output, or with float "shadow"
modules fed the quantized model's inputs, as ``torch.ao.ns``. The FX numeric suite
(``_numeric_suite_fx``) is not supported."""
import importlib as _importlib


def __getattr__(name):
    if name == "_numeric_suite":
        mod = _importlib.import_module(f"{__name__}._numeric_suite")
        globals()[name] = mod
        return mod
    if name in ("_numeric_suite_fx", "fx"):
        raise NotImplementedError(f"ember.ao.ns.{name}: the FX graph mode numeric suite is not supported (the eager "
                                  "one, ember.ao.ns._numeric_suite, is)")
    raise AttributeError(f"module 'ember.ao.ns' has no attribute '{name}'")
