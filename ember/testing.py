"""``ember.testing.assert_close``: torch.testing's comparison for tests written against ember.

Compares tensors, Python numbers and (nested) sequences and mappings of them. Default
tolerances depend on the dtype, as in PyTorch (float32: rtol 1.3e-6, atol 1e-5; integers
and bools: exact). A mismatch raises AssertionError saying how many elements differ, the
greatest absolute and relative differences and where -- enough to see whether the failure
is a tolerance question or a wrong answer.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, Tuple

import numpy as np

from . import types as _t
from .tensor import Tensor

from ._testing_creation import make_tensor
from ._filecheck import FileCheck

__all__ = ["assert_close", "make_tensor", "assert_allclose", "FileCheck"]

# (rtol, atol) by dtype, PyTorch's defaults
_TOLERANCES = {_t.float16: (1e-3, 1e-5), _t.bfloat16: (1.6e-2, 1e-5), _t.float32: (1.3e-6, 1e-5),
               _t.float64: (1e-7, 1e-7)}


def _default_tolerances(dtype) -> Tuple[float, float]:
    return _TOLERANCES.get(dtype, (0.0, 0.0))


def assert_close(actual: Any, expected: Any, *, rtol: Optional[float] = None, atol: Optional[float] = None,
                 equal_nan: bool = False, check_dtype: bool = True, check_device: bool = True,
                 msg: Optional[str] = None) -> None:
    """Raise AssertionError unless ``actual`` and ``expected`` are close (see the module)."""
    if (rtol is None) != (atol is None):
        missing = "rtol" if rtol is None else "atol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}.")
    _compare(actual, expected, rtol, atol, equal_nan, check_dtype, check_device, msg, ())


def _where(path) -> str:
    return "".join(f"[{p!r}]" for p in path)


def _fail(msg: Optional[str], text: str, path) -> None:
    if path:
        text = f"{text}\n\nThe failure occurred for item {_where(path)}"
    raise AssertionError(msg if msg is not None else text)


def _compare(actual, expected, rtol, atol, equal_nan, check_dtype, check_device, msg, path) -> None:
    if isinstance(actual, Tensor) or isinstance(expected, Tensor):
        if not (isinstance(actual, Tensor) and isinstance(expected, Tensor)):
            _fail(msg, f"Expected both inputs to be tensors, but got {type(actual).__name__} and "
                       f"{type(expected).__name__}.", path)
        _compare_tensors(actual, expected, rtol, atol, equal_nan, check_dtype, check_device, msg, path)
        return
    if isinstance(actual, (bool, int, float, complex, np.number, np.bool_)) and \
            isinstance(expected, (bool, int, float, complex, np.number, np.bool_)):
        if check_dtype and type(actual) is not type(expected):
            _fail(msg, f"The values for attribute 'type' do not match: {type(actual).__name__} != "
                       f"{type(expected).__name__}.", path)
        dt = _t.float64 if isinstance(actual, float) or isinstance(expected, float) else _t.int64
        from .ops import api
        _compare_tensors(api.tensor(actual, dtype=dt), api.tensor(expected, dtype=dt), rtol, atol, equal_nan,
                         True, True, msg, path, scalar=True)
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(msg, f"The keys of the mappings do not match: {sorted(map(repr, actual))} != "
                       f"{sorted(map(repr, expected))}.", path)
        for k in actual:
            _compare(actual[k], expected[k], rtol, atol, equal_nan, check_dtype, check_device, msg, path + (k,))
        return
    if isinstance(actual, Sequence) and isinstance(expected, Sequence) and \
            not isinstance(actual, str) and not isinstance(expected, str):
        if len(actual) != len(expected):
            _fail(msg, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_dtype, check_device, msg, path + (i,))
        return
    if actual is None and expected is None:
        return
    _fail(msg, f"No comparison defined for inputs of type {type(actual).__name__} and "
               f"{type(expected).__name__}.", path)


def _compare_tensors(a: Tensor, e: Tensor, rtol, atol, equal_nan, check_dtype, check_device, msg, path,
                     scalar: bool = False) -> None:
    if tuple(a.shape) != tuple(e.shape):
        _fail(msg, f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.", path)
    if check_device and a.device != e.device:
        _fail(msg, f"The values for attribute 'device' do not match: {a.device} != {e.device}.", path)
    if check_dtype and a.dtype != e.dtype:
        _fail(msg, f"The values for attribute 'dtype' do not match: {a.dtype} != {e.dtype}.", path)
    if rtol is None:
        rtol, atol = (max(x, y) for x, y in zip(_default_tolerances(a.dtype), _default_tolerances(e.dtype)))
    av, ev = a.detach().cpu().numpy(), e.detach().cpu().numpy()
    if av.dtype == np.bool_ and ev.dtype == np.bool_:
        close = av == ev
    else:
        common = np.result_type(av.dtype, ev.dtype, np.float32) if (rtol or atol) else \
            np.result_type(av.dtype, ev.dtype)
        av, ev = av.astype(common), ev.astype(common)
        with np.errstate(all="ignore"):
            close = av == ev
            if equal_nan and np.issubdtype(common, np.inexact):
                close |= np.isnan(av) & np.isnan(ev)
            if rtol or atol:
                diff = np.abs(av - ev)
                close |= np.isfinite(diff) & (diff <= atol + rtol * np.abs(ev))
    if close.all():
        return
    n_bad, n = int((~close).sum()), close.size
    exact = not (rtol or atol)
    what = ("Scalars are" if scalar else "Tensor-likes are") + (" not equal!" if exact else " not close!")
    if scalar:
        text = f"{what}\n\nExpected {ev.item()} but got {av.item()}."
    else:
        text = f"{what}\n\nMismatched elements: {n_bad} / {n} ({100.0 * n_bad / n:.1f}%)"
    with np.errstate(all="ignore"):
        af, ef = av.astype(np.float64), ev.astype(np.float64)
        diff = np.where(close, 0.0, np.abs(af - ef))
        rel = np.where(close, 0.0, diff / np.abs(ef))
    # the greatest difference, NaN counting as greatest (and shown as NaN)
    ia = np.unravel_index(int(np.nan_to_num(diff, nan=np.inf, posinf=np.inf).argmax()), diff.shape)
    ir = np.unravel_index(int(np.nan_to_num(rel, nan=np.inf, posinf=np.inf).argmax()), rel.shape)
    integral = not np.issubdtype(np.result_type(a.numpy().dtype, e.numpy().dtype), np.inexact)
    d = int(diff[ia]) if integral and np.isfinite(diff[ia]) else float(diff[ia])
    prefix = ("Absolute", "Relative") if scalar else ("Greatest absolute", "Greatest relative")
    at = "" if scalar else f" at index {tuple(int(i) for i in ia)}"
    rt = "" if scalar else f" at index {tuple(int(i) for i in ir)}"
    allowed_a = "" if exact else f" (up to {atol} allowed)"
    allowed_r = "" if exact else f" (up to {rtol} allowed)"
    text += (f"\n{prefix[0]} difference: {d}{at}{allowed_a}"
             f"\n{prefix[1]} difference: {float(rel[ir])}{rt}{allowed_r}")
    _fail(msg, text, path)


# assert_allclose's own (looser) defaults, torch's
_ALLCLOSE_TOLERANCES = {_t.float16: (1e-3, 1e-3), _t.float32: (1e-4, 1e-5), _t.float64: (1e-5, 1e-8)}


def assert_allclose(actual: Any, expected: Any, rtol: Optional[float] = None, atol: Optional[float] = None,
                    equal_nan: bool = True, msg: str = "") -> None:
    """Deprecated (as in torch since 1.12): assert_close with looser defaults, NaNs equal, any dtypes.

    Kept because old tests still call it; it warns with torch's FutureWarning.
    """
    import warnings
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future "
                  "release. Please use `torch.testing.assert_close()` instead. You can find detailed upgrade "
                  "instructions in https://github.com/pytorch/pytorch/issues/61844.", FutureWarning, stacklevel=2)
    from .ops import api
    if not isinstance(actual, Tensor):
        actual = api.tensor(actual)
    if not isinstance(expected, Tensor):
        expected = api.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(d, (0.0, 0.0)) for d in (actual.dtype, expected.dtype)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                 check_dtype=False, msg=msg or None)
