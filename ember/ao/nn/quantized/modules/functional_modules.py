"""``FloatFunctional`` / ``QFunctional``: tensor arithmetic as modules, so that eager-mode
quantization can observe it. In a float model ``FloatFunctional.add(x, y)`` adds and passes the
sum through ``activation_post_process`` (an observer after ``prepare``); ``convert`` turns it
into a ``QFunctional`` holding the observed output scale / zero point, whose ``add`` runs
``quantized::add`` on quantized tensors (ember/_quantized/arith.py)."""
from __future__ import annotations

import ember
from ember import nn
from ember._quantized import arith as _arith

__all__ = ["FloatFunctional", "FXFloatFunctional", "QFunctional"]


class FloatFunctional(nn.Module):
    """Float ``add`` / ``mul`` / ``cat`` / ``add_relu`` / ``matmul`` whose results pass through
    ``activation_post_process``; the ``*_scalar`` forms are not observed (torch's)."""

    def __init__(self):
        super().__init__()
        self.activation_post_process = nn.Identity()

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use the underlying operation")

    def add(self, x, y):
        return self.activation_post_process(ember.add(x, y))

    def add_scalar(self, x, y):
        return ember.add(x, y)

    def mul(self, x, y):
        return self.activation_post_process(ember.mul(x, y))

    def mul_scalar(self, x, y):
        return ember.mul(x, y)

    def cat(self, x, dim=0):
        return self.activation_post_process(ember.cat(x, dim=dim))

    def add_relu(self, x, y):
        return self.activation_post_process(ember.relu(ember.add(x, y)))

    def matmul(self, x, y):
        return self.activation_post_process(ember.matmul(x, y))


class FXFloatFunctional(nn.Module):
    """``FloatFunctional`` without the observer (FX graph mode observes the ops itself)."""

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use the underlying operation")

    def add(self, x, y):
        return ember.add(x, y)

    def add_scalar(self, x, y):
        return ember.add(x, y)

    def mul(self, x, y):
        return ember.mul(x, y)

    def mul_scalar(self, x, y):
        return ember.mul(x, y)

    def cat(self, x, dim=0):
        return ember.cat(x, dim=dim)

    def add_relu(self, x, y):
        return ember.relu(ember.add(x, y))

    def matmul(self, x, y):
        return ember.matmul(x, y)


class QFunctional(nn.Module):
    """The quantized ops with the output ``scale`` / ``zero_point`` observed in calibration."""

    def __init__(self):
        super().__init__()
        self.scale = 1.0
        self.zero_point = 0
        self.activation_post_process = nn.Identity()

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"] = ember.tensor(self.scale)
        destination[prefix + "zero_point"] = ember.tensor(self.zero_point)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        self.scale = float(state_dict.pop(prefix + "scale"))
        self.zero_point = int(state_dict.pop(prefix + "zero_point"))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, False, missing_keys, unexpected_keys,
                                      error_msgs)

    def _get_name(self):
        return "QFunctional"

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}"

    def forward(self, x):
        raise RuntimeError("Functional is not intended to use the 'forward'. Please use the underlying operation")

    def add(self, x, y):
        return self.activation_post_process(_arith.add(x, y, self.scale, self.zero_point))

    def add_scalar(self, x, y):
        raise NotImplementedError("ember.quantization: QFunctional.add_scalar (quantized::add_scalar) is not "
                                  "supported")

    def mul(self, x, y):
        return self.activation_post_process(_arith.mul(x, y, self.scale, self.zero_point))

    def mul_scalar(self, x, y):
        """``quantized::mul_scalar``: no requantization (so no observer): a positive ``y`` scales the
        scale; a negative one also mirrors the integers and the zero point in the dtype's range;
        zero gives zeros with scale 1, zero point 0 (torch's)."""
        return _mul_scalar(x, float(y))

    def cat(self, x, dim=0):
        return self.activation_post_process(_arith.cat(x, self.scale, self.zero_point, dim))

    def add_relu(self, x, y):
        return self.activation_post_process(_arith.add(x, y, self.scale, self.zero_point, relu=True))

    def matmul(self, x, y):
        raise NotImplementedError("ember.quantization: QFunctional.matmul (quantized::matmul) is not supported")

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if type(mod) is not FloatFunctional:
            raise AssertionError(f"QFunctional.from_float expects an instance of FloatFunctional, got "
                                 f"{type(mod).__name__}")
        scale, zero_point = mod.activation_post_process.calculate_qparams()
        new_mod = QFunctional()
        new_mod.scale = float(scale)
        new_mod.zero_point = int(zero_point)
        return new_mod


def _mul_scalar(x, b):
    import numpy as np
    from ember._quantized import kernels as _K
    from ember._quantized import schemes as _QS
    from ember._quantized.tensor import QParams, QuantizedTensor, make_qtensor
    if not isinstance(x, QuantizedTensor) or x._qp.per_channel:
        raise NotImplementedError("ember.quantization: QFunctional.mul_scalar takes a per-tensor quantized tensor, "
                                  f"got {getattr(x, 'dtype', type(x).__name__)}")
    lo, hi = _K.qrange(x.dtype)
    scale, zp, ints = x._qp.scale, x._qp.zero_point, x._irepr
    if b == 0:
        ints, scale, zp = np.zeros_like(ints), 1.0, 0
    elif b > 0:
        scale = scale * b
    else:
        ints = (lo + hi - ints.astype(np.int64)).astype(ints.dtype)
        scale, zp = scale * -b, lo + hi - zp
    return make_qtensor(np.ascontiguousarray(ints), x.dtype, QParams(_QS.per_tensor_affine, scale=scale,
                                                                     zero_point=zp))
