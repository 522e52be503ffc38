"""``ember.backends.quantized``: the quantized engine (``torch.backends.quantized.engine``).

ember's quantized kernels reproduce PyTorch's x86 engine (its fbgemm/oneDNN kernels where the
x86 engine hands off to them), bit for bit: that is the engine it reports and the one it
accepts. Asking for another (``qnnpack``, ``fbgemm``, ``onednn`` alone) raises instead of
silently computing x86's numbers under another name; an unknown name raises PyTorch's error."""
import sys
import types

_TORCH_ENGINES = ("qnnpack", "onednn", "x86", "fbgemm", "none")


class _QuantizedEngine(types.ModuleType):
    supported_engines = ["x86"]

    @property
    def engine(self) -> str:
        return "x86"

    @engine.setter
    def engine(self, value) -> None:
        if value not in _TORCH_ENGINES:
            raise RuntimeError(f"{value} is not a valid value for quantized engine")
        if value != "x86":
            raise RuntimeError(f"ember's quantized kernels reproduce PyTorch's x86 engine only; the {value!r} "
                               f"engine (its own rounding and ranges) is not supported")


sys.modules[__name__].__class__ = _QuantizedEngine
