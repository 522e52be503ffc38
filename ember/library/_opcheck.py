"""``opcheck``: does a custom op's registration match what its implementation does?

The registrations are promises the implementation cannot check by itself: the schema
says which arguments it mutates and that its outputs are new tensors, the fake impl says
what shapes it returns, a gradient needs a backward formula, and compile needs all of
them to agree. Each test runs the op on copies of the sample arguments (the caller's
tensors are never touched) and raises :class:`OpCheckError` naming the test and the
mismatch, as ``torch.library.opcheck`` does:

* ``test_schema``: arguments not in ``mutates_args`` are unchanged; outputs alias no input;
* ``test_autograd_registration``: if an input requires grad, a backward is registered and
  gives one correctly shaped gradient per input;
* ``test_faketensor``: a fake impl is registered and its outputs have the real outputs'
  sizes, dtypes, devices and strides (those of dimensions longer than 1);
* ``test_aot_dispatch_dynamic``: ``ember.compile(backend="aot_eager", dynamic=True,
  fullgraph=True)`` gives eager's outputs and gradients. Mutating ops are not captured by
  ember.compile (a graph break), so for them this test reports ``"SKIPPED"``.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..tensor import Tensor
from ._custom_op import lookup

DEFAULT_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")

_counter = itertools.count()


class OpCheckError(Exception):
    """A custom op's registration disagrees with its implementation (see ``opcheck``)."""


def opcheck(op: Any, args: Tuple[Any, ...], kwargs: Optional[Dict[str, Any]] = None, *,
            test_utils: Union[str, Sequence[str]] = DEFAULT_TESTS, raise_exception: bool = True,
            atol: Optional[float] = None, rtol: Optional[float] = None) -> Dict[str, Any]:
    """Run the checks in ``test_utils`` on ``op(*args, **kwargs)``; returns ``{test: "SUCCESS"}``
    (an exception object per failed test when ``raise_exception=False``)."""
    custom = lookup(op)
    kwargs = dict(kwargs or {})
    if (atol is None) != (rtol is None):
        raise ValueError("opcheck: give both atol and rtol, or neither")
    tests = (test_utils,) if isinstance(test_utils, str) else tuple(test_utils)
    unknown = [t for t in tests if t not in _TESTS]
    if unknown:
        raise ValueError(f"opcheck: unknown test(s) {unknown}; choose from {list(DEFAULT_TESTS)}")
    results: Dict[str, Any] = {}
    for name in tests:
        try:
            results[name] = _TESTS[name](custom, args, kwargs, atol, rtol) or "SUCCESS"
        except Exception as e:  # noqa: BLE001 - reported per test
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {e}") from e
            results[name] = e
    return results


# ---------------------------------------------------------------------------- helpers
def _clone(a: Any) -> Any:
    """A copy of the argument structure with every tensor cloned (a leaf, same requires_grad)."""
    if isinstance(a, Tensor):
        c = a.detach().clone()
        if a.requires_grad:
            c.requires_grad_(True)
        return c
    if isinstance(a, (list, tuple)):
        return type(a)(_clone(x) for x in a)
    return a


def _clone_all(args, kwargs):
    return [_clone(a) for a in args], {k: _clone(v) for k, v in kwargs.items()}


def _flat_outputs(out) -> list:
    if out is None:
        return []
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _bound(custom, args, kwargs) -> Dict[str, Any]:
    return dict(custom.__signature__.bind(*args, **kwargs).arguments)


def _tensors_of(v) -> list:
    if isinstance(v, Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [x for x in v if isinstance(x, Tensor)]
    return []


def _has_autograd(custom) -> bool:
    """A gradient can flow through the op: register_autograd, or (an op made by
    ``Library.define``) an Autograd or CompositeImplicitAutograd kernel."""
    has = getattr(custom, "_has_autograd", None)
    return has() if has is not None else custom._backward is not None


def _needs_grad(custom, args, kwargs) -> bool:
    return any(t.requires_grad for v in _bound(custom, args, kwargs).values() for t in _tensors_of(v))


def _close(a: Tensor, b: Tensor, atol, rtol) -> bool:
    x, y = a.detach().numpy(), b.detach().numpy()
    if atol is None:
        wide = x.dtype in (np.float16,) or x.dtype.itemsize <= 2
        atol, rtol = (1e-3, 1e-3) if wide else ((1e-5, 1.3e-6) if x.dtype != np.float64 else (1e-7, 1e-7))
    return x.shape == y.shape and np.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True)


# ---------------------------------------------------------------------------- the tests
def _test_schema(custom, args, kwargs, atol, rtol):
    from ..autograd import no_grad
    cargs, ckw = _clone_all(args, kwargs)
    before = {name: [t.detach().numpy().copy() for t in _tensors_of(v)]
              for name, v in _bound(custom, cargs, ckw).items()}
    with no_grad():
        custom(*cargs, **ckw)       # (the op itself raises if an output aliases an input)
    mutated = set(custom._schema.mutated)
    for name, v in _bound(custom, cargs, ckw).items():
        if name in mutated:
            continue
        for old, t in zip(before[name], _tensors_of(v)):
            if not np.array_equal(old, t.detach().numpy(), equal_nan=True):
                raise RuntimeError(f"{custom._qualname} mutated its argument '{name}', which mutates_args does not "
                                   f"list (schema: {custom.schema}); add it to mutates_args")


def _test_autograd_registration(custom, args, kwargs, atol, rtol):
    from ..autograd import grad
    if not _needs_grad(custom, args, kwargs):
        return None
    if not _has_autograd(custom):
        from ._autograd import no_formula_message
        raise RuntimeError(f"an input requires grad: {no_formula_message(custom._qualname)}")
    cargs, ckw = _clone_all(args, kwargs)
    outs = [o for o in _flat_outputs(custom(*cargs, **ckw)) if o.requires_grad]
    wrt = [t for v in _bound(custom, cargs, ckw).values() for t in _tensors_of(v) if t.requires_grad]
    if outs:
        rng = np.random.default_rng(0)
        gos = [_like(o, rng) for o in outs]
        grad(outs, wrt, grad_outputs=gos, allow_unused=True)    # the engine checks count and shapes


def _like(t: Tensor, rng) -> Tensor:
    """A random (never zero) output gradient shaped like ``t``."""
    from ..ops import api
    return api.tensor(rng.standard_normal(tuple(t.shape)).astype(t.dtype.np), device=t.device)


def _test_faketensor(custom, args, kwargs, atol, rtol):
    from ..autograd import no_grad
    from ..fx.fake_tensor import FakeTensorMode
    from ._record import MissingFakeImpl
    if custom._fake is None:
        raise MissingFakeImpl(custom)
    cargs, ckw = _clone_all(args, kwargs)
    with no_grad():
        real = _flat_outputs(custom(*cargs, **ckw))
    mode = FakeTensorMode()

    def fake(a):
        if isinstance(a, Tensor):
            return mode.from_tensor(a)
        if isinstance(a, (list, tuple)):
            return type(a)(fake(x) for x in a)
        return a
    fargs, fkw = [fake(a) for a in cargs], {k: fake(v) for k, v in ckw.items()}
    with no_grad(), mode:
        faked = _flat_outputs(custom(*fargs, **fkw))
    where = f"When comparing the output of {custom._qualname} on FakeTensor and concrete Tensors, found " \
            f"mismatched tensor metadata:"
    if len(real) != len(faked):
        raise RuntimeError(f"{where} the fake impl returned {len(faked)} outputs, the implementation {len(real)}")
    for k, (r, f) in enumerate(zip(real, faked)):
        at = f" (output {k})" if len(real) > 1 else ""
        if tuple(r.shape) != tuple(f.shape):
            raise RuntimeError(f"{where} Shapes {list(r.shape)} and {list(f.shape)} are not equal!{at}")
        if r.dtype != f.dtype:
            raise RuntimeError(f"{where} Dtypes {r.dtype} and {f.dtype} are not equal!{at}")
        if r.device != f.device:
            raise RuntimeError(f"{where} Devices {r.device} and {f.device} are not equal!{at}")
        rs, fs = r.stride(), f.stride()
        if any(n > 1 and a != b for n, a, b in zip(r.shape, rs, fs)):
            raise RuntimeError(f"{where} Strides {list(rs)} and {list(fs)} are not equal!{at}")


def _test_aot_dispatch_dynamic(custom, args, kwargs, atol, rtol):
    from .. import dynamo
    from ..autograd import grad
    if custom._schema.mutated:
        return ("SKIPPED: ember.compile does not capture mutating custom ops (the call runs eagerly "
                "after a graph break)")

    def call_op(*a, **k):
        return custom(*a, **k)
    # a code object of its own per check: dynamo caches entries per code object
    call_op.__code__ = call_op.__code__.replace(co_name=f"opcheck_{custom._opname}_{next(_counter)}")
    compiled = dynamo.compile(call_op, backend="aot_eager", dynamic=True, fullgraph=True)
    eargs, ekw = _clone_all(args, kwargs)
    cargs, ckw = _clone_all(args, kwargs)
    want = _flat_outputs(custom(*eargs, **ekw))
    with _EagerFallbacks() as fell_back:
        got = _flat_outputs(compiled(*cargs, **ckw))
    if fell_back.reasons:
        # (aot logs and runs the graph eagerly: the outputs would match without testing anything)
        raise RuntimeError(f"aot could not compile a graph calling {custom._qualname}: {fell_back.reasons[0]}")
    if len(want) != len(got):
        raise RuntimeError(f"compiled {custom._qualname} returned {len(got)} outputs, eager {len(want)}")
    for k, (w, g) in enumerate(zip(want, got)):
        if not _close(w, g, atol, rtol):
            raise RuntimeError(f"output {k} of the compiled {custom._qualname} differs from eager")
    if not _needs_grad(custom, args, kwargs) or not _has_autograd(custom):
        return None
    rng = np.random.default_rng(0)
    pairs = [(w, g) for w, g in zip(want, got) if w.requires_grad]
    if not pairs:
        return None
    gos = [_like(w, rng) for w, _ in pairs]
    ew = [t for v in _bound(custom, eargs, ekw).values() for t in _tensors_of(v) if t.requires_grad]
    cw = [t for v in _bound(custom, cargs, ckw).values() for t in _tensors_of(v) if t.requires_grad]
    eg = grad([w for w, _ in pairs], ew, grad_outputs=gos, allow_unused=True)
    cg = grad([g for _, g in pairs], cw, grad_outputs=gos, allow_unused=True)
    for k, (a, b) in enumerate(zip(eg, cg)):
        if (a is None) != (b is None) or (a is not None and not _close(a, b, atol, rtol)):
            raise RuntimeError(f"the gradient of input {k} of the compiled {custom._qualname} differs from eager")


class _EagerFallbacks(logging.Handler):
    """Collects aot's "this graph cannot be compiled, running it eagerly" warnings while active."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.reasons = []
        self._logger = logging.getLogger("ember.aot")

    def emit(self, record):
        msg = record.getMessage()
        if "running it eagerly" in msg:
            self.reasons.append(msg.split("running it eagerly: ", 1)[-1])

    def __enter__(self):
        self._level = self._logger.level
        if not self._logger.isEnabledFor(logging.WARNING):     # (logging turned down: still seen here)
            self._logger.setLevel(logging.WARNING)
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
        return False


_TESTS = {
    "test_schema": _test_schema,
    "test_autograd_registration": _test_autograd_registration,
    "test_faketensor": _test_faketensor,
    "test_aot_dispatch_dynamic": _test_aot_dispatch_dynamic,
}
