"""Optimizers against torch.optim (session 48): complex parameters updated as real (view_as_real)
pairs, sparse gradients (SGD and Adagrad take them, the others refuse with PyTorch's words, LBFGS
takes them dense), capturable=True on CPU, fused with foreach, and constructor error texts."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _data(seed=None):
    """Fresh random real and complex starting points (never zeros)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((3, 4))
    c = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    x = rng.standard_normal((5, 4))
    return w, c, x


def _complex_trajectory(lib, name, kwargs, data, steps=5):
    w0, c0, x0 = data
    w = lib.nn.Parameter(lib.tensor(w0.copy()))
    c = lib.nn.Parameter(lib.tensor(c0.copy()))
    opt = getattr(lib.optim, name)([w, c], **kwargs)
    x = lib.tensor(x0)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        # a loss whose complex gradient has distinct real and imaginary parts
        loss = (x @ w.t()).tanh().pow(2).sum() + (c * c.conj()).real.sum() * 0.3 + (c ** 2).real.sum() * 0.1 \
            + (c.imag ** 4).sum() * 0.05
        loss.backward()
        opt.step()
        out.append(np.concatenate([w.detach().numpy().ravel(), c.detach().numpy().ravel().view(np.float64)]))
    state = opt.state_dict()["state"][1]
    return np.array(out), state


COMPLEX_CASES = [
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=0.05, amsgrad=True)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, betas=(0.8, 0.5))),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.3)),
    ("Adadelta", dict(lr=1.0, rho=0.8)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(0.01, 0.08))),
]


@pytest.mark.parametrize("name,kwargs", COMPLEX_CASES, ids=[c[0] + str(i) for i, c in enumerate(COMPLEX_CASES)])
def test_complex_parameters_update_as_real_pairs(name, kwargs):
    """PyTorch updates a complex parameter through view_as_real: the second moments, maxima and
    signs are those of the real and imaginary parts (ember squared the complex numbers, and
    amsgrad/Adamax raised 'maximum not implemented for complex tensors')."""
    data = _data()
    te, se = _complex_trajectory(ember, name, kwargs, data)
    tt, st = _complex_trajectory(torch, name, kwargs, data)
    np.testing.assert_allclose(te, tt, rtol=1e-10, atol=1e-12)
    assert list(se) == list(st)
    for key, v in st.items():
        if v.dim() > 0:
            assert str(se[key].dtype).split(".")[-1] == str(v.dtype).split(".")[-1], key
            np.testing.assert_allclose(se[key].numpy(), v.numpy(), rtol=1e-10, atol=1e-12, err_msg=key)


def _embedding_trajectory(lib, name, kwargs, table, batches, closure=False):
    emb = lib.nn.Embedding(*table.shape, sparse=True).double()
    with lib.no_grad():
        emb.weight.copy_(lib.tensor(table))
    opt = getattr(lib.optim, name)(emb.parameters(), **kwargs)
    out = []
    for idx in batches:
        def loss_fn():
            opt.zero_grad()
            loss = emb(lib.tensor(idx)).sin().sum()
            loss.backward()
            return loss
        if closure:
            opt.step(loss_fn)
        else:
            loss_fn()
            opt.step()
        out.append(emb.weight.detach().numpy().copy())
    return np.array(out)


SPARSE_CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.2, maximize=True)),
]


@pytest.mark.parametrize("name,kwargs", SPARSE_CASES, ids=[c[0] + str(i) for i, c in enumerate(SPARSE_CASES)])
def test_sparse_gradients_sgd_and_adagrad_match_torch(name, kwargs):
    """nn.Embedding(sparse=True) gradients: PyTorch's SGD and Adagrad take them (ember failed in
    the ops: dense.add_(sparse) and addcmul on sparse are not implemented)."""
    rng = np.random.default_rng()
    table = rng.standard_normal((7, 3))
    batches = [rng.integers(0, 7, size=4).tolist() for _ in range(5)]   # duplicates included
    te = _embedding_trajectory(ember, name, kwargs, table, batches)
    tt = _embedding_trajectory(torch, name, kwargs, table, batches)
    np.testing.assert_allclose(te, tt, rtol=1e-12, atol=1e-12)


def test_lbfgs_takes_sparse_gradients_dense():
    rng = np.random.default_rng()
    table = rng.standard_normal((6, 2))
    batches = [[1, 3, 3]]
    te = _embedding_trajectory(ember, "LBFGS", dict(lr=0.1, max_iter=3), table, batches, closure=True)
    tt = _embedding_trajectory(torch, "LBFGS", dict(lr=0.1, max_iter=3), table, batches, closure=True)
    np.testing.assert_allclose(te, tt, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adadelta", "Rprop", "ASGD"])
def test_sparse_gradients_refused_with_torchs_message(name):
    msgs = []
    for lib in (ember, torch):
        emb = lib.nn.Embedding(5, 2, sparse=True)
        emb(lib.tensor([1, 2, 2])).sum().backward()
        with pytest.raises(RuntimeError) as info:
            getattr(lib.optim, name)(emb.parameters(), lr=0.1).step()
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def test_sparse_gradient_errors_of_sgd_and_adagrad_weight_decay():
    for name, kw in [("SGD", dict(lr=0.1, weight_decay=0.1)), ("Adagrad", dict(lr=0.1, weight_decay=0.1))]:
        msgs = []
        for lib in (ember, torch):
            emb = lib.nn.Embedding(5, 2, sparse=True)
            emb(lib.tensor([1, 2])).sum().backward()
            with pytest.raises(RuntimeError) as info:
                getattr(lib.optim, name)(emb.parameters(), **kw).step()
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1], name


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adadelta", "Rprop", "ASGD"])
def test_capturable_on_cpu_is_torchs_assertion(name):
    """capturable=True needs a CUDA-graph device: PyTorch asserts it at every eager step (ember
    silently ran the step); with no gradient there is no step and no error."""
    msgs = []
    for lib in (ember, torch):
        p = lib.nn.Parameter(lib.randn(3))
        opt = getattr(lib.optim, name)([p], capturable=True)
        opt.step()   # no gradient: nothing to check
        p.grad = lib.randn(3)
        with pytest.raises(AssertionError) as info:
            opt.step()
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def test_constructor_errors_as_torch():
    cases = [
        lambda lib, ps: lib.optim.Adam(ps, fused=True, foreach=True),
        lambda lib, ps: lib.optim.AdamW(ps, fused=True, foreach=True),
        lambda lib, ps: lib.optim.SGD(ps, lr=0.1, fused=True, foreach=True),
        lambda lib, ps: lib.optim.Adagrad(ps, fused=True, foreach=True),
        lambda lib, ps: lib.optim.SGD(ps, lr=0.1).add_param_group(list(ps)),
    ]
    for make in cases:
        errs = []
        for lib in (ember, torch):
            ps = [lib.nn.Parameter(lib.randn(2))]
            with pytest.raises(Exception) as info:
                make(lib, ps)
            errs.append((type(info.value).__name__, str(info.value)))
        assert errs[0] == errs[1]
    # a bare tensor: named by its legacy type, ember's spelling of torch.typename
    with pytest.raises(TypeError, match="but got ember.DoubleTensor"):
        ember.optim.SGD(ember.nn.Parameter(ember.randn(2, dtype=ember.float64)), lr=0.1)
