"""NumPy on Python constants, folded while tracing: ``np.sqrt(2.0)``, ``np.prod(x.shape)``,
``np.float32(0.5)``, ``np.finfo(np.float32).eps``, ``np.pi``.

Only functions without side effects and with scalar results are folded (ufuncs, a few reductions
over shapes, the scalar types, finfo/iinfo/dtype); the result is a NumPy scalar constant, which
ember ops take as a Python number (as PyTorch does). A NumPy *array* result, a tensor argument,
or any other NumPy function (``np.random.*`` draws, file I/O) stays a graph break."""
from __future__ import annotations

import numpy as np

from ..exc import Unsupported
from .constant import ConstantVariable
from .functions import ConstantResultFunctionVariable

_PURE_FUNCTIONS = {np.prod, np.sum, np.mean, np.round, np.clip, np.isclose, np.finfo, np.iinfo, np.dtype,
                   np.result_type, np.can_cast, np.promote_types}
_RESULT_TYPES = (np.generic, int, float, bool, complex, np.finfo, np.iinfo, np.dtype)


def is_foldable(value) -> bool:
    if isinstance(value, np.ufunc):
        return True
    if not callable(value):
        return False
    try:
        if value in _PURE_FUNCTIONS:
            return True
    except Exception:           # unhashable, or a __hash__/__eq__ that raises: not a numpy function
        return False
    return isinstance(value, type) and issubclass(value, np.generic) and value is not np.generic


class NumpyFoldVariable(ConstantResultFunctionVariable):
    def label(self):
        return f"numpy.{getattr(self.fn, '__name__', repr(self.fn))}"

    def values(self, args, kwargs):
        from .builtin import _consts
        pos = _consts(args)
        kw = dict(zip(kwargs, _consts(list(kwargs.values()))))
        if any(isinstance(v, np.ndarray) for v in pos + list(kw.values())):
            raise Unsupported(f"{self.label()} of an array")
        return pos, kw

    def call(self, pos, kw):
        with np.errstate(all="ignore"):
            return self.fn(*pos, **kw)

    def result(self, res):
        if isinstance(res, np.ndarray) and res.ndim == 0:
            res = res[()]
        if not isinstance(res, _RESULT_TYPES):
            raise Unsupported(f"{self.label()} returned a {type(res).__name__} (only scalars are folded)")
        return ConstantVariable(res)

    def __repr__(self):
        return f"NumpyFoldVariable({getattr(self.fn, '__name__', self.fn)})"
