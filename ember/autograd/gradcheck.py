"""Finite-difference gradient checks (float64), like torch.autograd.gradcheck.

Compares the analytical Jacobian (one backward per output element) with
central differences, input element by input element.
"""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .engine import grad as _grad
from .grad_mode import enable_grad, no_grad


class GradcheckError(RuntimeError):
    pass


def _flat_outputs(out):
    return (out,) if isinstance(out, Tensor) else tuple(o for o in out if isinstance(o, Tensor))


def _as_real(arr):
    """A value's real coordinates, flattened: a complex element is two (real, imaginary)."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype.kind == "c":
        return arr.astype(np.complex128).view(np.float64).reshape(-1)
    return arr.astype(np.float64).reshape(-1)


def _numerical(fn, inputs, i, eps):
    """Central differences; a complex input is perturbed along its real and its imaginary axis
    (two columns per element), so the Jacobian is that of the real coordinates."""
    x = inputs[i]
    cols = []
    flat = x._data.reshape(-1)
    steps = (eps, eps * 1j) if flat.dtype.kind == "c" else (eps,)
    for k in range(flat.size):
        for step in steps:
            orig = flat[k].copy()
            flat[k] = orig + step
            with no_grad():
                plus = [_as_real(o._data) for o in _flat_outputs(fn(*inputs))]
            flat[k] = orig - step
            with no_grad():
                minus = [_as_real(o._data) for o in _flat_outputs(fn(*inputs))]
            flat[k] = orig
            cols.append(np.concatenate([(p - m) / (2 * eps) for p, m in zip(plus, minus)]))
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0))


def _analytical(fn, inputs, i):
    outs = _flat_outputs(fn(*inputs))
    rows = []
    from ..ops import api
    width = inputs[i].numel() * (2 if inputs[i].dtype.is_complex else 1)
    for o in outs:
        # a complex output's real and imaginary parts are two rows: torch's convention gives
        # their gradients for grad_output 1 and 1j (the input's gradient is d/dx + i d/dy)
        units = (1.0, 1j) if o.dtype.is_complex else (1.0,)
        for k in range(o.numel()):
            for unit in units:
                if not o.requires_grad:
                    rows.append(np.zeros(width))
                    continue
                # row-major, so the flat view below writes into go's memory (zeros_like keeps a
                # transposed output's layout, and reshape(-1) of that would be a copy)
                go = api.zeros_like(o, memory_format="contiguous_format")
                go._data.reshape(-1)[k] = unit
                g = _grad((o,), (inputs[i],), (go,), retain_graph=True, allow_unused=True)[0]
                rows.append(np.zeros(width) if g is None else _as_real(g._data))
    return np.stack(rows) if rows else np.zeros((0, width))


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **_ignored):
    """True if analytical and numerical Jacobians agree for every input that requires grad."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    for i, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x.requires_grad):
            continue
        if x.dtype.name not in ("float64", "complex128"):
            import warnings
            warnings.warn("gradcheck: input is not float64; finite differences will be inaccurate")
        num = _numerical(func, inputs, i, eps)
        ana = _analytical(func, inputs, i)
        if num.shape != ana.shape or not np.allclose(ana, num, atol=atol, rtol=rtol):
            if raise_exception:
                raise GradcheckError(f"Jacobian mismatch for output 0 with respect to input {i},\n"
                                     f"numerical:{num}\nanalytical:{ana}\n")
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, **kw):
    """Check second derivatives: gradcheck of the vjp with a fixed random cotangent."""
    from ..ops import api
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outs = _flat_outputs(func(*inputs))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(api.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs)
    diff = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]

    def vjp_fn(*xs):
        # the numerical pass calls this under no_grad; the vjp itself needs a graph
        with enable_grad():
            os_ = _flat_outputs(func(*xs))
            ds = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
            gs = _grad(os_, ds, grad_outputs, create_graph=True, allow_unused=True)
        return tuple(g if g is not None else api.zeros_like(d) for g, d in zip(gs, ds))
    return gradcheck(vjp_fn, inputs, eps=eps, atol=atol, rtol=rtol, **kw)
