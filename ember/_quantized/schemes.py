"""``ember.qscheme``: how a quantized tensor maps its integers back to real numbers.

Singletons, as torch's: ``ember.per_tensor_affine`` (one scale and zero point),
``ember.per_channel_affine`` (one pair per slice along an axis), their
``_symmetric`` variants (observers' request for a zero point at the middle of
the range; the tensors they produce are still affine) and
``per_channel_affine_float_qparams`` (float zero points, used for embeddings).
"""
from __future__ import annotations

from .. import types as _t


class qscheme:
    """A quantization scheme; compare with ``is`` or ``==``. Prints as ``ember.per_tensor_affine``."""

    __slots__ = ("name",)
    _by_name: dict = {}

    def __new__(cls, name):
        obj = cls._by_name.get(name)
        if obj is None:
            raise RuntimeError(f"ember.qscheme: unknown quantization scheme {name!r}")
        return obj

    @classmethod
    def _make(cls, name):
        obj = object.__new__(cls)
        object.__setattr__(obj, "name", name)
        cls._by_name[name] = obj
        return obj

    def __setattr__(self, k, v):
        raise AttributeError("ember.qscheme is immutable")

    def __repr__(self):
        return _t.PUBLIC_PREFIX + self.name

    def __reduce__(self):
        return (qscheme, (self.name,))


per_tensor_affine = qscheme._make("per_tensor_affine")
per_channel_affine = qscheme._make("per_channel_affine")
per_tensor_symmetric = qscheme._make("per_tensor_symmetric")
per_channel_symmetric = qscheme._make("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme._make("per_channel_affine_float_qparams")

PER_TENSOR = (per_tensor_affine, per_tensor_symmetric)
PER_CHANNEL = (per_channel_affine, per_channel_symmetric, per_channel_affine_float_qparams)
ALL = PER_TENSOR + PER_CHANNEL
