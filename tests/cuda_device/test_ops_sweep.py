"""Every case of the prims decomposition tests (pointwise, reductions, shape and
indexing, linear algebra, nn.functional) run eagerly on cuda tensors -- the same
op kernels with ``xp`` = the cupy stand-in (``fake_cupy.py``) -- against the CPU:
values, dtypes, devices and gradients.

What this verifies, against the stand-in only: every kernel reaches its array
module through ``xp`` (a kernel that calls numpy on a device array, mixes a host
array into a device computation, or converts a device array to numpy fails here,
as it would on cupy), results and gradients stay on the device. Not verified:
that cupy implements every numpy function and keyword the kernels use the same
way (the stand-in *is* numpy), nor GPU numerics."""
import numpy as np
import pytest

import ember
from tests.prims import test_decomp_linalg_nn as _lnn
from tests.prims import test_decomp_pointwise_reduction as _pr
from tests.prims import test_decomp_shape_indexing as _si


def _cases():
    out = []
    for c in _pr.CASES:
        dt = {"float32": ember.float32, "float64": ember.float64, "int": ember.float64}[c.dtypes[-1]]
        out.append((f"pr_{c.name}", c.fn, (lambda c=c, dt=dt: [m(dt) for m in c.makers]), c.grad and None))
    for prefix, table in (("si", _si.CASES), ("lnn", _lnn.CASES)):
        for name, (fn, make, *diff) in table.items():
            out.append((f"{prefix}_{name}", fn, (lambda make=make: make(np.random.default_rng(5), ember.float64)),
                        diff[0] if diff else None))
    return out


CASES = _cases()
# cases whose function builds CPU tensors of its own (ember.full(...), ember.tensor([0, 0]) as an
# index, a legacy empty CPU tensor in cat) next to the device inputs: on cuda that is a device
# mismatch, as in PyTorch
MIXED = {"pr_full", "pr_zeros_ones", "pr_full_int", "si_cat_legacy_empty", "si_zero_dim_index_ops"}


def _to(a, dev):
    if isinstance(a, ember.Tensor):
        return a.detach().to(dev)
    if isinstance(a, (list, tuple)):
        return type(a)(_to(x, dev) for x in a)
    return a


def _flat(x):
    if isinstance(x, ember.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    return []


def _run(fn, args, grad):
    """Outputs, and gradients of a weighted sum of the float outputs with respect to
    the argument positions ``grad`` (None: every float tensor argument; False: none)."""
    if grad is False:
        leaves = []
    elif grad is None:
        leaves = [a for a in args if isinstance(a, ember.Tensor) and a.dtype.is_floating_point]
    else:
        leaves = [args[i] for i in grad]
    for a in leaves:
        a.requires_grad_()
    outs = _flat(fn(*args))
    grads = []
    diff = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    if leaves and diff:
        rng = np.random.default_rng(11)
        loss = sum((o * ember.tensor(rng.uniform(0.5, 1.5, tuple(o.shape)), dtype=o.dtype, device=o.device)).sum()
                   for o in diff)
        grads = list(ember.autograd.grad(loss, leaves, allow_unused=True))
    return [o.detach() for o in outs], grads


@pytest.mark.parametrize("name, fn, make, grad", CASES, ids=[c[0] for c in CASES])
def test_op_on_device(fake_cupy, name, fn, make, grad):
    args = make()
    try:
        want, want_g = _run(fn, _to(args, "cpu"), grad)
    except Exception as e:  # noqa: BLE001 - a case whose eager CPU run raises is not about devices
        pytest.skip(f"raises on the CPU too: {type(e).__name__}")
    if name in MIXED:
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            _run(fn, _to(args, "cuda"), grad)
        return
    got, got_g = _run(fn, _to(args, "cuda"), grad)
    assert len(got) == len(want) and len(got_g) == len(want_g)
    for k, (g, w) in enumerate(zip(got + got_g, want + want_g)):
        if w is None:
            assert g is None
            continue
        assert g.device.type == "cuda" and type(g._data).__module__.endswith("fake_cupy"), (k, g.device)
        assert g.dtype is w.dtype and g.shape == w.shape, k
        gv, wv = g.cpu().numpy(), w.numpy()
        if wv.dtype.kind in "biu":
            np.testing.assert_array_equal(gv, wv, err_msg=str(k))
        else:
            np.testing.assert_allclose(gv.astype(np.float64), wv.astype(np.float64), rtol=1e-5, atol=1e-7,
                                       equal_nan=True, err_msg=str(k))
