"""Shared test helpers: convert between ember and torch, compare values and
gradients against PyTorch, and gradcheck in float64.

Typical op test::

    check_against_torch(lambda m, a, b: m.add(a, b, alpha=2), [shape_a, shape_b])

``m`` is the module (ember or torch) so the same lambda runs under both; fresh
random inputs are drawn each call (``seed`` for reproducibility).
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

try:
    import torch  # noqa: F401  (oracle only)
    HAVE_TORCH = True
except ImportError:  # Python 3.12/3.13 runs have no torch
    torch = None
    HAVE_TORCH = False

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch oracle is only installed on Python 3.11")

TOL = {"float64": (1e-10, 1e-10), "float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def to_torch(x, requires_grad=None):
    if isinstance(x, ember.Tensor):
        arr = x.detach()._data
        if x.dtype is ember.bfloat16:
            t = torch.from_numpy(arr.astype(np.float32).copy()).to(torch.bfloat16)
        else:
            t = torch.from_numpy(np.array(arr, copy=True))
        if requires_grad if requires_grad is not None else x.requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(x, (list, tuple)):
        return type(x)(to_torch(v, requires_grad) for v in x)
    return x


def to_numpy(x):
    if isinstance(x, ember.Tensor):
        a = x.detach()._data
        return a.astype(np.float32) if x.dtype is ember.bfloat16 else np.asarray(a)
    if HAVE_TORCH and isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def assert_close(actual, expected, rtol=None, atol=None, check_dtype=True, msg=""):
    """Compare an ember tensor (or nested tuple) with a torch tensor / numpy array."""
    if isinstance(actual, (list, tuple)):
        assert isinstance(expected, (list, tuple)) and len(actual) == len(expected), msg
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol, atol, check_dtype, msg)
        return
    if actual is None or expected is None:
        assert actual is None and expected is None, f"{msg}: {actual!r} vs {expected!r}"
        return
    if isinstance(actual, ember.Tensor) and HAVE_TORCH and isinstance(expected, torch.Tensor):
        assert tuple(actual.shape) == tuple(expected.shape), f"{msg}: shape {tuple(actual.shape)} vs {tuple(expected.shape)}"
        if check_dtype:
            assert actual.dtype.name == str(expected.dtype).replace("torch.", ""), \
                f"{msg}: dtype {actual.dtype} vs {expected.dtype}"
        name = actual.dtype.name
    else:
        name = getattr(getattr(actual, "dtype", None), "name", "float64")
    r, a = TOL.get(name, (0, 0))
    rtol = r if rtol is None else rtol
    atol = a if atol is None else atol
    np.testing.assert_allclose(to_numpy(actual), to_numpy(expected), rtol=rtol, atol=atol, err_msg=msg,
                               equal_nan=True)


def rand_array(shape, dtype="float32", rng=None, low=-2.0, high=2.0):
    rng = rng or np.random.default_rng()
    if dtype in ("float32", "float64", "float16"):
        return rng.uniform(low, high, size=shape).astype(dtype)
    if dtype == "bfloat16":
        return rng.uniform(low, high, size=shape).astype(np.float32)
    if dtype == "bool":
        return rng.random(size=shape) < 0.5
    return rng.integers(-5 if dtype != "uint8" else 0, 6, size=shape).astype(dtype)


def make_pair(arr, dtype=None, requires_grad=False, noncontig=False):
    """(ember tensor, torch tensor) holding the same values; optionally a transposed (strided) view."""
    dtype = dtype or str(arr.dtype)
    if noncontig and arr.ndim >= 2:
        base = np.ascontiguousarray(np.swapaxes(arr, -1, -2))
        e = ember.tensor(base, dtype=getattr(ember, dtype) if dtype != "bool" else ember.bool).transpose(-1, -2)
        t = torch.tensor(base).to(getattr(torch, dtype)).transpose(-1, -2)
    else:
        e = ember.tensor(arr, dtype=getattr(ember, dtype) if dtype != "bool" else ember.bool)
        t = torch.tensor(arr).to(getattr(torch, dtype))
    if requires_grad:
        e = e.detach().requires_grad_() if noncontig else e.requires_grad_()
        t = t.detach().requires_grad_()
        if noncontig:
            # keep the strided layout: make the leaf contiguous-transposed again
            e = ember.tensor(base, dtype=getattr(ember, dtype)).requires_grad_()
            t = torch.tensor(base).to(getattr(torch, dtype)).requires_grad_()
            return (e, t, True)
    return e, t


def tensor_pair(arr, noncontig=False, requires_grad=False):
    """(ember, torch, ember view, torch view) with the values of ``arr``: the views are transposed
    (strided) when ``noncontig`` and ``arr`` has two or more dims, else the tensors themselves.
    The leaves have standard strides (torch keeps numpy's odd size-1 strides)."""
    if noncontig and arr.ndim >= 2:
        base = np.swapaxes(arr, -1, -2).copy()
        e = ember.tensor(base, requires_grad=requires_grad)
        t = torch.tensor(base, requires_grad=requires_grad)
        return e, t, e.transpose(-1, -2), t.transpose(-1, -2)
    e = ember.tensor(arr, requires_grad=requires_grad)
    t = torch.tensor(arr, requires_grad=requires_grad)
    return e, t, e, t


def check_against_torch(fn, arrays, *, dtype="float32", grad=True, rtol=None, atol=None, check_dtype=True,
                        noncontig=False):
    """Run ``fn(module, *tensors)`` under ember and torch on the same values; compare outputs and,
    if ``grad``, the gradients of ``sum(out * random cotangent)`` w.r.t. every float input."""
    rng = np.random.default_rng()
    e_in, t_in, leaves_e, leaves_t = [], [], [], []
    for arr in arrays:
        if not isinstance(arr, np.ndarray):
            e_in.append(arr)
            t_in.append(arr)
            continue
        dt = dtype if arr.dtype.kind == "f" else str(arr.dtype)
        floaty = dt in ("float32", "float64", "float16", "bfloat16")
        rg = grad and floaty
        if noncontig and arr.ndim >= 2:
            base = np.ascontiguousarray(np.swapaxes(arr, -1, -2))
            le = ember.tensor(base, dtype=getattr(ember, dt if dt != "bool" else "bool"), requires_grad=rg)
            lt = torch.tensor(base).to(getattr(torch, dt)).requires_grad_(rg)
            e_in.append(le.transpose(-1, -2))
            t_in.append(lt.transpose(-1, -2))
        else:
            le = ember.tensor(arr, dtype=getattr(ember, dt if dt != "bool" else "bool"), requires_grad=rg)
            lt = torch.tensor(arr).to(getattr(torch, dt)).requires_grad_(rg)
            e_in.append(le)
            t_in.append(lt)
        if rg:
            leaves_e.append(le)
            leaves_t.append(lt)
    out_e = fn(ember, *e_in)
    out_t = fn(torch, *t_in)
    assert_close(out_e, out_t, rtol, atol, check_dtype, "forward")
    if grad and leaves_e:
        oe = out_e if isinstance(out_e, (tuple, list)) else (out_e,)
        ot = out_t if isinstance(out_t, (tuple, list)) else (out_t,)
        pairs = [(a, b) for a, b in zip(oe, ot) if isinstance(b, torch.Tensor) and b.requires_grad]
        if pairs:
            cots = [rng.standard_normal(tuple(b.shape)).astype(np.float64) for _, b in pairs]
            le = sum(((a * ember.tensor(c, dtype=a.dtype)).sum() for (a, _), c in zip(pairs, cots)),
                     ember.tensor(0.0, dtype=pairs[0][0].dtype))
            lt = sum(((b * torch.tensor(c).to(b.dtype)).sum() for (_, b), c in zip(pairs, cots)))
            ge = ember.autograd.grad(le, leaves_e, allow_unused=True)
            gt = torch.autograd.grad(lt, leaves_t, allow_unused=True)
            for i, (a, b) in enumerate(zip(ge, gt)):
                if b is None:
                    assert a is None or not np.any(to_numpy(a)), f"grad {i}: torch None, ember {a}"
                    continue
                assert a is not None, f"grad {i}: ember None, torch has a gradient"
                assert_close(a, b, rtol, atol, check_dtype, f"grad {i}")
    return out_e, out_t


def gradcheck_fn(fn, arrays, **kw):
    """float64 finite-difference gradcheck of ``fn(ember, *tensors)``."""
    ins = [ember.tensor(a.astype(np.float64), requires_grad=True) if isinstance(a, np.ndarray)
           and a.dtype.kind == "f" else (ember.tensor(a) if isinstance(a, np.ndarray) else a) for a in arrays]
    return ember.autograd.gradcheck(lambda *xs: fn(ember, *xs), ins, **kw)


# ---------------------------------------------------------------------- API batches
def _grad_pair(arr, grad=True):
    """``arr`` as an ember and a torch tensor; float64 ones require grad when ``grad``."""
    e = ember.tensor(np.asarray(arr))
    t = torch.tensor(np.asarray(arr))
    if grad and arr.dtype == np.float64:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def compare_with_torch(fn, arrays, rtol=None, atol=None, grad=True):
    """``fn(module, *tensors)`` under ember and torch: values, and float64 gradients of
    ``sum(out * cotangent)`` (a fresh random cotangent) over every output that requires grad.
    Returns both results."""
    rng = np.random.default_rng()
    pairs = [_grad_pair(a, grad) for a in arrays]
    oe, ot = fn(ember, *[p[0] for p in pairs]), fn(torch, *[p[1] for p in pairs])
    te = tuple(oe) if isinstance(oe, (tuple, list)) else (oe,)
    tt = tuple(ot) if isinstance(ot, (tuple, list)) else (ot,)
    assert len(te) == len(tt)
    for a, b in zip(te, tt):
        assert_close(a, b, rtol=rtol, atol=atol)
    leaves = [p for p, a in zip(pairs, arrays) if grad and a.dtype == np.float64]
    outs = [(a, b) for a, b in zip(te, tt) if b.requires_grad]
    if leaves and outs:
        cots = [rng.standard_normal(tuple(b.shape)) for _, b in outs]
        le = sum((a * ember.tensor(c)).sum() for (a, _), c in zip(outs, cots))
        lt = sum((b * torch.tensor(c)).sum() for (_, b), c in zip(outs, cots))
        ge = ember.autograd.grad(le, [e for e, _ in leaves], allow_unused=True)
        gt = torch.autograd.grad(lt, [t for _, t in leaves], allow_unused=True)
        for a, b in zip(ge, gt):
            if b is None:
                assert a is None or not np.any(a.numpy())
            else:
                assert a is not None
                assert_close(a, b, rtol=rtol, atol=atol)
    return oe, ot


def compiled_matches(fn, *args, rtol=1e-6, atol=1e-6):
    """``ember.compile(fn)`` gives ``fn``'s dtypes, shapes and values (NaN where it has NaN)."""
    ember.compiler.reset()
    eager = fn(*args)
    comp = ember.compile(fn)(*args)
    eager = eager if isinstance(eager, tuple) else (eager,)
    comp = comp if isinstance(comp, tuple) else (comp,)
    for a, b in zip(comp, eager):
        assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy().astype(np.float64), b.numpy().astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)


def assert_same_error(ember_call, torch_call):
    """Both calls raise: the same exception type, and the same message once "ember" reads "torch"."""
    with pytest.raises(Exception) as theirs:
        torch_call()
    with pytest.raises(Exception) as ours:
        ember_call()
    assert type(ours.value) is type(theirs.value), (ours.value, theirs.value)
    assert str(ours.value).replace("ember", "torch") == str(theirs.value), (str(ours.value), str(theirs.value))
