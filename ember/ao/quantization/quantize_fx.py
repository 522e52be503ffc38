"""``ember.ao.quantization.quantize_fx``: FX graph mode quantization. ember does not support it
(the eager-mode flow -- ``fuse_modules``, ``prepare`` / ``prepare_qat``, ``convert`` -- is
supported); every entry point raises NotImplementedError naming itself."""
from __future__ import annotations

__all__ = ["fuse_fx", "prepare_fx", "prepare_qat_fx", "convert_fx", "convert_to_reference_fx"]


def _unsupported(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"ember.quantization: FX graph mode quantization ({name}) is not supported; use "
                                  "the eager-mode flow (fuse_modules, prepare / prepare_qat, convert)")
    fn.__name__ = fn.__qualname__ = name
    return fn


fuse_fx = _unsupported("fuse_fx")
prepare_fx = _unsupported("prepare_fx")
prepare_qat_fx = _unsupported("prepare_qat_fx")
convert_fx = _unsupported("convert_fx")
convert_to_reference_fx = _unsupported("convert_to_reference_fx")
