"""ember.nn.utils.parametrize / parametrizations (weight_norm, spectral_norm, orthogonal), the legacy
hook-based weight_norm / spectral_norm, conv/linear + batch-norm fusion and skip_init, against
PyTorch: forward values, gradients w.r.t. the original parameters, state-dict keys and values,
remove_* results, spectral-norm power-iteration buffers (train and eval), and ember.compile vs eager."""
import copy
import pickle

import numpy as np
import pytest

import ember
import ember.nn.utils.parametrize as P
from ember.nn.utils import parametrizations as EP
from oracle import assert_close, needs_torch, torch

enn = ember.nn
U = ember.nn.utils


def _rng():
    return np.random.default_rng()


def _t2e(sd):
    return {k: ember.tensor(v.detach().numpy().copy()) for k, v in sd.items()}


def _P(nn):
    """The parametrize module of the framework ``nn`` belongs to."""
    return P if nn is enn else torch.nn.utils.parametrize


def _pair(ctor):
    """``ctor(nn)`` built under torch and ember (float64), ember loaded with torch's values."""
    tm = ctor(torch.nn).double()
    em = ctor(enn).double()
    em.load_state_dict(_t2e(tm.state_dict()))
    return em, tm


def _inputs(shape):
    x = _rng().standard_normal(shape)
    return ember.tensor(x), torch.tensor(x)


def _fwd_bwd(em, tm, xe, xt):
    """Forward both, backprop ``sum(out * c)`` with a random cotangent, compare outputs."""
    ye, yt = em(xe), tm(xt)
    assert_close(ye, yt, msg="forward")
    c = _rng().standard_normal(tuple(yt.shape))
    (ye * ember.tensor(c)).sum().backward()
    (yt * torch.tensor(c)).sum().backward()


def _compare_grads(em, tm):
    ne, nt = dict(em.named_parameters()), dict(tm.named_parameters())
    assert list(ne) == list(nt)
    for k in nt:
        assert_close(ne[k].grad, nt[k].grad, msg=f"grad {k}")


def _compare_state(em, tm, **kw):
    se, st = em.state_dict(), tm.state_dict()
    assert list(se) == list(st)
    for k in st:
        assert_close(se[k], st[k], msg=f"state {k}", **kw)


def _set_buffers(em, tm, names):
    """Copy torch's (random) buffers into ember so power iteration starts from the same vectors."""
    with ember.no_grad():
        for n in names:
            em.get_buffer(n).copy_(ember.tensor(tm.get_buffer(n).numpy()))


# ---------------------------------------------------------------------- custom parametrizations
def _symmetric(nn):
    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

        def right_inverse(self, A):
            return A.triu()
    return Symmetric


def _scale(nn):
    class Scale(nn.Module):
        def forward(self, X):
            return X * 2.0

        def right_inverse(self, A):
            return A / 2.0
    return Scale


def _split(nn):
    class Split(nn.Module):            # right_inverse returns a tuple: original0, original1
        def forward(self, A, B):
            return A + B.tanh()

        def right_inverse(self, X):
            return X * 0.5, X * 0.25
    return Split


@needs_torch
def test_register_parametrization_chain_assign_and_remove():
    em, tm = _pair(lambda nn: nn.Linear(4, 4))
    for mod, nn in ((em, enn), (tm, torch.nn)):
        _P(nn).register_parametrization(mod, "weight", _symmetric(nn)())
        _P(nn).register_parametrization(mod, "weight", _scale(nn)())
    assert type(em).__name__ == "ParametrizedLinear"
    assert P.type_before_parametrizations(em) is enn.Linear
    assert isinstance(em, enn.Linear)
    assert P.is_parametrized(em) and P.is_parametrized(em, "weight") and not P.is_parametrized(em, "bias")
    assert "weight" not in em._parameters
    assert len(em.parametrizations.weight) == 2
    _compare_state(em, tm)
    assert list(em.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert_close(em.weight, tm.weight)
    xe, xt = _inputs((3, 4))
    _fwd_bwd(em, tm, xe, xt)
    _compare_grads(em, tm)
    # another instance of the same class is unaffected
    assert type(enn.Linear(2, 2)) is enn.Linear and "weight" in enn.Linear(2, 2)._parameters
    # assignment goes through right_inverse (Scale then Symmetric, in reverse order)
    S = _rng().standard_normal((4, 4))
    S = S + S.T
    orig = em.parametrizations.weight.original
    em.weight = ember.tensor(S)
    tm.weight = torch.tensor(S)
    assert em.parametrizations.weight.original is orig      # same Parameter object, new values
    assert_close(em.weight, tm.weight)
    assert_close(em.parametrizations.weight.original, tm.parametrizations.weight.original)
    # remove, keeping the parametrized value
    P.remove_parametrizations(em, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
    assert type(em) is enn.Linear and not hasattr(em, "parametrizations")
    assert isinstance(em.weight, enn.Parameter) and em.weight is orig
    _compare_state(em, tm)


@needs_torch
def test_remove_parametrizations_leave_unparametrized_and_buffers():
    em, tm = _pair(lambda nn: nn.BatchNorm1d(5))
    for mod, nn in ((em, enn), (tm, torch.nn)):
        _P(nn).register_parametrization(mod, "running_var", _scale(nn)())   # a buffer
        _P(nn).register_parametrization(mod, "weight", _scale(nn)())
    _compare_state(em, tm)
    assert "parametrizations.running_var.original" in em.state_dict()
    assert not isinstance(em.parametrizations.running_var.original, enn.Parameter)
    assert_close(em.running_var, tm.running_var)
    for mod, nn in ((em, enn), (tm, torch.nn)):
        _P(nn).remove_parametrizations(mod, "running_var", leave_parametrized=False)
    assert P.is_parametrized(em) and not P.is_parametrized(em, "running_var")
    assert "running_var" in em._buffers
    _compare_state(em, tm)
    for mod, nn in ((em, enn), (tm, torch.nn)):
        _P(nn).remove_parametrizations(mod, "weight", leave_parametrized=False)
    assert type(em) is enn.BatchNorm1d
    _compare_state(em, tm)
    with pytest.raises(ValueError):
        P.remove_parametrizations(em, "weight")


@needs_torch
def test_tuple_right_inverse_originals():
    em, tm = _pair(lambda nn: nn.Linear(3, 5))
    for mod, nn in ((em, enn), (tm, torch.nn)):
        _P(nn).register_parametrization(mod, "weight", _split(nn)())
    assert list(em.state_dict()) == ["bias", "parametrizations.weight.original0",
                                     "parametrizations.weight.original1"]
    _compare_state(em, tm)
    assert isinstance(em.parametrizations.weight.original1, enn.Parameter)
    xe, xt = _inputs((2, 3))
    _fwd_bwd(em, tm, xe, xt)
    _compare_grads(em, tm)
    with pytest.raises(ValueError, match="sequence of tensors"):
        P.remove_parametrizations(em, "weight", leave_parametrized=False)
    P.remove_parametrizations(em, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
    assert type(em) is enn.Linear
    _compare_state(em, tm)


def test_register_errors_cached_copy_and_pickle():
    m = enn.Linear(3, 3)
    with pytest.raises(ValueError, match="does not have a parameter"):
        P.register_parametrization(m, "nope", _scale(enn)())

    class ChangeShape(enn.Module):
        def forward(self, X):
            return X[:2]
    with pytest.raises(ValueError, match="shape"):
        P.register_parametrization(m, "weight", ChangeShape())
    assert type(m) is enn.Linear and "weight" in m._parameters

    calls = []

    class Count(enn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 3.0
    P.register_parametrization(m, "weight", Count())
    calls.clear()
    w1, w2 = m.weight, m.weight
    assert len(calls) == 2 and w1 is not w2
    with P.cached():
        a, b = m.weight, m.weight
        assert a is b and len(calls) == 3
    assert m.weight is not a
    # deepcopy works (own __deepcopy__), pickling the module is refused as in torch
    m2 = copy.deepcopy(m)
    assert type(m2) is type(m) and m2.parametrizations.weight.original is not m.parametrizations.weight.original
    np.testing.assert_array_equal(m2.weight.detach().numpy(), m.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="state_dict"):
        pickle.dumps(m)
    # transfer to a fresh module: shares the originals
    m3 = P.transfer_parametrizations_and_params(m, enn.Linear(3, 3))
    assert P.is_parametrized(m3, "weight")
    assert m3.parametrizations.weight.original is m.parametrizations.weight.original
    np.testing.assert_array_equal(m3.weight.detach().numpy(), m.weight.detach().numpy())


# ---------------------------------------------------------------------- weight_norm
@needs_torch
@pytest.mark.parametrize("ctor,dim,shape", [
    (lambda nn: nn.Linear(5, 4), 0, (3, 5)),
    (lambda nn: nn.Linear(5, 4), 1, (3, 5)),
    (lambda nn: nn.Linear(5, 4), None, (3, 5)),
    (lambda nn: nn.Conv2d(3, 4, 3), 0, (2, 3, 6, 6)),
    (lambda nn: nn.Conv2d(3, 4, 3), 2, (2, 3, 6, 6)),
])
def test_weight_norm_parametrization(ctor, dim, shape):
    em, tm = _pair(ctor)
    EP.weight_norm(em, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
    _compare_state(em, tm)
    assert "parametrizations.weight.original0" in em.state_dict()      # g
    assert "parametrizations.weight.original1" in em.state_dict()      # v
    xe, xt = _inputs(shape)
    _fwd_bwd(em, tm, xe, xt)
    _compare_grads(em, tm)
    P.remove_parametrizations(em, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
    _compare_state(em, tm)


@needs_torch
def test_weight_norm_loads_legacy_state_dict():
    with pytest.warns(FutureWarning):
        tm = torch.nn.utils.weight_norm(torch.nn.Linear(4, 3).double())     # weight_g / weight_v keys
    with torch.no_grad():
        tm.weight_g.mul_(torch.tensor(_rng().uniform(0.5, 2.0, (3, 1))))
    em = EP.weight_norm(enn.Linear(4, 3).double())
    em.load_state_dict(_t2e(tm.state_dict()))
    assert_close(em.parametrizations.weight.original0, tm.weight_g)
    assert_close(em.parametrizations.weight.original1, tm.weight_v)
    xe, xt = _inputs((2, 4))
    assert_close(em(xe), tm(xt))


# ---------------------------------------------------------------------- spectral_norm
@needs_torch
@pytest.mark.parametrize("ctor,shape,n_iter", [
    (lambda nn: nn.Linear(6, 4), (3, 6), 1),
    (lambda nn: nn.Conv2d(2, 3, 3), (2, 2, 5, 5), 2),
    (lambda nn: nn.ConvTranspose2d(3, 2, 3), (2, 3, 4, 4), 1),      # default dim=1
])
def test_spectral_norm_parametrization(ctor, shape, n_iter):
    tm0 = ctor(torch.nn).double()
    em = ctor(enn).double()
    em.load_state_dict(_t2e(tm0.state_dict()))
    tm = torch.nn.utils.parametrizations.spectral_norm(tm0, n_power_iterations=n_iter)
    EP.spectral_norm(em, n_power_iterations=n_iter)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert "parametrizations.weight.0._u" in em.state_dict()
    bufs = ["parametrizations.weight.0._u", "parametrizations.weight.0._v"]
    _set_buffers(em, tm, bufs)
    for step in range(3):                       # training: one power-iteration update per access
        em.zero_grad()
        tm.zero_grad()
        xe, xt = _inputs(shape)
        _fwd_bwd(em, tm, xe, xt)
        _compare_grads(em, tm)
        _compare_state(em, tm, rtol=1e-8, atol=1e-10)
        with ember.no_grad(), torch.no_grad():     # a small update, so the iteration keeps moving
            for pe, pt in zip(em.parameters(), tm.parameters()):
                d = 0.1 * _rng().standard_normal(tuple(pt.shape))
                pe.add_(ember.tensor(d))
                pt.add_(torch.tensor(d))
    em.eval()
    tm.eval()
    u_before = em.parametrizations.weight[0]._u.numpy().copy()
    for _ in range(2):                          # eval: the buffers stay put
        xe, xt = _inputs(shape)
        assert_close(em(xe), tm(xt), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(em.parametrizations.weight[0]._u.numpy(), u_before)
    _compare_state(em, tm, rtol=1e-8, atol=1e-10)
    P.remove_parametrizations(em, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(tm, "weight")
    _compare_state(em, tm, rtol=1e-8, atol=1e-10)


def test_spectral_norm_sigma_is_one_and_1d():
    lin = enn.Linear(7, 5).double()
    # a clear spectral gap (sigma2 / sigma1 = 0.5): power iteration converges in a few steps
    # (a random draw with two close top singular values did not within 20)
    u, _ = np.linalg.qr(_rng().standard_normal((5, 5)))
    v, _ = np.linalg.qr(_rng().standard_normal((7, 5)))
    with ember.no_grad():
        lin.weight.copy_(ember.tensor(u @ np.diag([2.0, 1.0, 0.5, 0.3, 0.1]) @ v.T))
    m = EP.spectral_norm(lin, n_power_iterations=1)
    for _ in range(20):
        w = m.weight
    sv = np.linalg.svd(w.detach().numpy(), compute_uv=False)
    np.testing.assert_allclose(sv[0], 1.0, rtol=1e-6)
    b = enn.Module()
    b.register_parameter("w", enn.Parameter(ember.tensor(_rng().standard_normal(4))))
    EP.spectral_norm(b, "w")
    np.testing.assert_allclose(np.linalg.norm(b.w.detach().numpy()), 1.0, rtol=1e-6)


# ---------------------------------------------------------------------- orthogonal
@needs_torch
@pytest.mark.parametrize("orth_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 5), (2, 4, 3)])
def test_orthogonal(orth_map, shape):
    def make(nn):
        m = nn.Module()
        m.register_parameter("weight", nn.Parameter(ember.zeros(shape) if nn is enn else torch.zeros(shape)))
        return m
    tm = make(torch.nn).double()
    em = make(enn).double()
    W = _rng().standard_normal(shape)
    with torch.no_grad(), ember.no_grad():
        tm.weight.copy_(torch.tensor(W))
        em.weight.copy_(ember.tensor(W))
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=orth_map)
    EP.orthogonal(em, orthogonal_map=orth_map)
    assert list(em.state_dict()) == list(tm.state_dict())      # ...original, ...0.base
    if shape[-2] != shape[-1]:                  # the rectangular base is completed with randn
        _set_buffers(em, tm, ["parametrizations.weight.0.base"])
    _compare_state(em, tm)
    assert_close(em.weight, tm.weight)
    # move off the base point (original = -I) to exercise the map itself
    X = 0.5 * _rng().standard_normal(shape)
    if orth_map == "householder":               # the map reads the diagonal's sign (as int): keep it +-1
        k = min(shape[-2:])
        X[..., np.arange(k), np.arange(k)] = _rng().choice([-1.0, 1.0], size=shape[:-2] + (k,))
    with torch.no_grad(), ember.no_grad():
        tm.parametrizations.weight.original.copy_(torch.tensor(X))
        em.parametrizations.weight.original.copy_(ember.tensor(X))
    we, wt = em.weight, tm.weight
    assert_close(we, wt, rtol=1e-9, atol=1e-10)
    Q = we.detach().numpy()
    Qn = Q if shape[-2] >= shape[-1] else np.swapaxes(Q, -1, -2)
    np.testing.assert_allclose(np.swapaxes(Qn, -1, -2) @ Qn, np.broadcast_to(np.eye(Qn.shape[-1]),
                               Qn.shape[:-2] + (Qn.shape[-1],) * 2), atol=1e-10)
    C = _rng().standard_normal(shape)
    (we * ember.tensor(C)).sum().backward()
    (wt * torch.tensor(C)).sum().backward()
    assert_close(em.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad,
                 rtol=1e-8, atol=1e-10)
    # assigning an orthogonal matrix re-bases (right_inverse)
    Qt = torch.linalg.qr(torch.tensor(_rng().standard_normal(shape if shape[-2] >= shape[-1]
                                                            else shape[:-2] + shape[-2:][::-1])))[0]
    Qt = Qt if shape[-2] >= shape[-1] else Qt.mT
    Qt = Qt.contiguous()
    em.weight = ember.tensor(Qt.numpy())
    tm.weight = Qt
    assert_close(em.weight, tm.weight, rtol=1e-9, atol=1e-10)


@needs_torch
@pytest.mark.parametrize("orth_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_without_trivialization(orth_map):
    em, tm = _pair(lambda nn: nn.Linear(3, 5))         # weight (5, 3)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=orth_map, use_trivialization=False)
    EP.orthogonal(em, orthogonal_map=orth_map, use_trivialization=False)
    assert list(em.state_dict()) == list(tm.state_dict())      # no base buffer
    _compare_state(em, tm)          # householder: geqrf-based right_inverse; else original kept
    xe, xt = _inputs((4, 3))
    _fwd_bwd(em, tm, xe, xt)
    _compare_grads(em, tm)


def test_orthogonal_errors():
    with pytest.raises(ValueError, match="orthogonal_map"):
        EP.orthogonal(enn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match="matrix"):
        m = enn.Module()
        m.register_parameter("weight", enn.Parameter(ember.ones(3)))
        EP.orthogonal(m)
    m = EP.orthogonal(enn.Linear(4, 4), use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        m.weight = ember.eye(4)


# ---------------------------------------------------------------------- legacy hook-based API
@needs_torch
@pytest.mark.parametrize("dim", [0, 1, None])
def test_legacy_weight_norm(dim):
    em, tm = _pair(lambda nn: nn.Conv1d(3, 4, 2))
    U.weight_norm(em, dim=dim)
    with pytest.warns(FutureWarning):
        torch.nn.utils.weight_norm(tm, dim=dim)
    assert [n for n, _ in em.named_parameters()] == ["bias", "weight_g", "weight_v"]
    _compare_state(em, tm)
    with pytest.raises(RuntimeError, match="two weight_norm"):
        U.weight_norm(em, dim=dim)
    for _ in range(2):
        em.zero_grad()
        tm.zero_grad()
        xe, xt = _inputs((2, 3, 7))
        _fwd_bwd(em, tm, xe, xt)
        _compare_grads(em, tm)
        with ember.no_grad(), torch.no_grad():
            em.weight_g.mul_(1.5)
            tm.weight_g.mul_(1.5)
    U.remove_weight_norm(em)
    torch.nn.utils.remove_weight_norm(tm)
    assert isinstance(em.weight, enn.Parameter) and "weight_g" not in em._parameters
    _compare_state(em, tm)
    with pytest.raises(ValueError):
        U.remove_weight_norm(em)


@needs_torch
def test_legacy_spectral_norm():
    em, tm = _pair(lambda nn: nn.Linear(5, 4))
    U.spectral_norm(em)
    torch.nn.utils.spectral_norm(tm)
    assert list(em.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert list(em.state_dict()) == list(tm.state_dict())
    _set_buffers(em, tm, ["weight_u", "weight_v"])
    for _ in range(3):
        em.zero_grad()
        tm.zero_grad()
        xe, xt = _inputs((3, 5))
        _fwd_bwd(em, tm, xe, xt)
        _compare_grads(em, tm)
        _compare_state(em, tm, rtol=1e-8, atol=1e-10)
        assert_close(em.weight, tm.weight, rtol=1e-8, atol=1e-10)
    em.eval()
    tm.eval()
    u = em.weight_u.numpy().copy()
    xe, xt = _inputs((3, 5))
    assert_close(em(xe), tm(xt), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(em.weight_u.numpy(), u)
    sd = em.state_dict()
    assert sd._metadata[""]["spectral_norm"] == {"weight.version": 1}
    em.load_state_dict(sd)
    U.remove_spectral_norm(em)
    torch.nn.utils.remove_spectral_norm(tm)
    assert list(em.state_dict()) == ["bias", "weight"]
    _compare_state(em, tm, rtol=1e-8, atol=1e-10)
    assert not em._state_dict_hooks and not em._forward_pre_hooks


# ---------------------------------------------------------------------- fusion, skip_init
@needs_torch
@pytest.mark.parametrize("kind", ["conv2d", "conv_transpose2d", "conv1d_nobias", "linear"])
def test_fuse_bn_eval(kind):
    rng = _rng()
    if kind == "conv2d":
        ctor, bn_ctor, shape = (lambda nn: nn.Conv2d(3, 4, 3)), (lambda nn: nn.BatchNorm2d(4)), (2, 3, 6, 6)
    elif kind == "conv_transpose2d":
        ctor, bn_ctor, shape = (lambda nn: nn.ConvTranspose2d(3, 4, 3)), (lambda nn: nn.BatchNorm2d(4)), (2, 3, 4, 4)
    elif kind == "conv1d_nobias":
        ctor, bn_ctor, shape = (lambda nn: nn.Conv1d(3, 4, 2, bias=False)), (lambda nn: nn.BatchNorm1d(4)), (2, 3, 5)
    else:
        ctor, bn_ctor, shape = (lambda nn: nn.Linear(5, 4)), (lambda nn: nn.BatchNorm1d(4)), (3, 5)
    ce, ct = _pair(ctor)
    be, bt = _pair(bn_ctor)
    sd = {"weight": rng.uniform(0.5, 2, 4), "bias": rng.standard_normal(4),
          "running_mean": rng.standard_normal(4), "running_var": rng.uniform(0.5, 2, 4)}
    with torch.no_grad(), ember.no_grad():
        for k, v in sd.items():
            getattr(bt, k).copy_(torch.tensor(v))
            getattr(be, k).copy_(ember.tensor(v))
    for m in (ce, ct, be, bt):
        m.eval()
    if kind == "linear":
        fe, ft = U.fuse_linear_bn_eval(ce, be), torch.nn.utils.fuse_linear_bn_eval(ct, bt)
    else:
        tr = kind == "conv_transpose2d"
        fe, ft = U.fuse_conv_bn_eval(ce, be, transpose=tr), torch.nn.utils.fuse_conv_bn_eval(ct, bt, transpose=tr)
    assert fe is not ce and isinstance(fe.weight, enn.Parameter) and isinstance(fe.bias, enn.Parameter)
    _compare_state(fe, ft)
    xe, xt = _inputs(shape)
    assert_close(fe(xe), ft(xt))
    assert_close(fe(xe), be(ce(xe)), rtol=1e-10, atol=1e-10)       # fused == conv then bn
    ce.train()
    with pytest.raises(AssertionError, match="eval"):
        U.fuse_conv_bn_eval(ce, be)


@needs_torch
def test_fuse_weights_functions():
    rng = _rng()
    arrs = [rng.standard_normal((4, 3, 2, 2)), rng.standard_normal(4), rng.standard_normal(4),
            rng.uniform(0.5, 2, 4), rng.uniform(0.5, 2, 4), rng.standard_normal(4)]
    e = [ember.tensor(a) for a in arrs]
    t = [torch.tensor(a) for a in arrs]
    we, be_ = U.fuse_conv_bn_weights(e[0], None, e[1], e[3], 1e-5, None, e[5])
    wt, bt_ = torch.nn.utils.fuse_conv_bn_weights(t[0], None, t[1], t[3], 1e-5, None, t[5])
    assert_close(we, wt)
    assert_close(be_, bt_)
    we, be_ = U.fuse_linear_bn_weights(e[0][:, :, 0, 0], e[2], e[1], e[3], 1e-3, e[4], e[5])
    wt, bt_ = torch.nn.utils.fuse_linear_bn_weights(t[0][:, :, 0, 0], t[2], t[1], t[3], 1e-3, t[4], t[5])
    assert_close(we, wt)
    assert_close(be_, bt_)


def test_skip_init():
    m = U.skip_init(enn.Linear, 5, 3)
    assert type(m) is enn.Linear and tuple(m.weight.shape) == (3, 5) and tuple(m.bias.shape) == (3,)
    assert isinstance(m.weight, enn.Parameter) and m.weight.device.type == "cpu"
    c = U.skip_init(enn.Conv2d, 2, 4, 3, dtype=ember.float64, device="cpu")
    assert c.weight.dtype == ember.float64 and tuple(c.weight.shape) == (4, 2, 3, 3)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        U.skip_init(int)

    class NoDevice(enn.Module):
        def __init__(self, n):
            super().__init__()
    with pytest.raises(RuntimeError, match="device"):
        U.skip_init(NoDevice, 3)


# ---------------------------------------------------------------------- ember.compile
@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm", "legacy_weight_norm", "legacy_spectral_norm"])
def test_compiled_parametrized_module_matches_eager(kind):
    """A weight_norm / spectral_norm module under ember.compile gives eager's outputs, gradients
    and power-iteration buffers, in train and eval mode, after parameter updates."""
    rng = _rng()
    base = enn.Linear(5, 4).double()
    apply = {"weight_norm": EP.weight_norm, "spectral_norm": EP.spectral_norm,
             "legacy_weight_norm": U.weight_norm, "legacy_spectral_norm": U.spectral_norm}[kind]
    eager = apply(copy.deepcopy(base))
    comp_mod = apply(copy.deepcopy(base))
    comp_mod.load_state_dict(eager.state_dict())
    comp = ember.compile(comp_mod)
    for step in range(4):
        if step == 3:
            eager.eval()
            comp_mod.eval()
        x = rng.standard_normal((3, 5))
        c = ember.tensor(rng.standard_normal((3, 4)))
        eager.zero_grad()
        comp_mod.zero_grad()
        ye = eager(ember.tensor(x))
        yc = comp(ember.tensor(x))
        np.testing.assert_allclose(yc.detach().numpy(), ye.detach().numpy(), rtol=1e-10, atol=1e-12)
        (ye * c).sum().backward()
        (yc * c).sum().backward()
        pe, pc = dict(eager.named_parameters()), dict(comp_mod.named_parameters())
        assert list(pe) == list(pc)
        for k in pe:
            np.testing.assert_allclose(pc[k].grad.numpy(), pe[k].grad.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=k)
        se, sc = eager.state_dict(), comp_mod.state_dict()
        for k in se:
            np.testing.assert_allclose(sc[k].numpy(), se[k].numpy(), rtol=1e-10, atol=1e-12, err_msg=k)
        with ember.no_grad():                    # an optimizer-like in-place update
            for k in pe:
                d = ember.tensor(0.1 * rng.standard_normal(tuple(pe[k].shape)))
                pe[k].add_(d)
                pc[k].add_(d)
