"""ember.func: torch.func's transforms (grad, vjp, jvp, jacrev, jacfwd, hessian, linearize,
vmap, functional_call, stack_module_state) -- values against torch.func where PyTorch is
installed, and against finite differences / manual loops everywhere."""
import re

import numpy as np
import pytest
from oracle import HAVE_TORCH, assert_close, needs_torch

import ember
import ember.func as ef
from ember.func import functional_call

if HAVE_TORCH:
    import torch
    import torch.func as tf

RNG = np.random.default_rng()
F64 = ember.float64


def _pair(*shape):
    """The same fresh float64 data as an ember and (if available) a torch tensor."""
    a = RNG.standard_normal(shape) + 0.1
    return ember.tensor(a, dtype=F64), (torch.tensor(a) if HAVE_TORCH else None)


def _e(*shape, grad=False):
    return ember.tensor(RNG.standard_normal(shape) + 0.1, dtype=F64, requires_grad=grad)


def _np(t):
    return np.asarray(t.detach().numpy())


def _fd_jacobian(f, x, eps=1e-6):
    """Central finite differences of f: R^x.shape -> R^out.shape, shape out.shape + x.shape."""
    base = _np(x).astype(np.float64)
    out_shape = tuple(f(x).shape)
    jac = np.zeros(out_shape + base.shape)
    for idx in np.ndindex(*base.shape):
        hi, lo = base.copy(), base.copy()
        hi[idx] += eps
        lo[idx] -= eps
        d = (_np(f(ember.tensor(hi, dtype=F64))) - _np(f(ember.tensor(lo, dtype=F64)))) / (2 * eps)
        jac[(Ellipsis,) + idx] = d
    return jac


def sin_mul(m):
    return lambda x, y: (m.sin(x) * y).sum()


def mlp_loss(m):
    def loss(w1, w2, x):
        return (m.tanh(x @ w1) @ w2).pow(2).mean()
    return loss


# ------------------------------------------------------------------------------- grad

@needs_torch
def test_grad_and_argnums_match_torch_func():
    (x, tx), (y, ty) = _pair(5), _pair(5)
    assert_close(ef.grad(sin_mul(ember))(x, y), tf.grad(sin_mul(torch))(tx, ty))
    assert_close(ef.grad(sin_mul(ember), argnums=1)(x, y), tf.grad(sin_mul(torch), argnums=1)(tx, ty))
    assert_close(ef.grad(sin_mul(ember), argnums=-1)(x, y), tf.grad(sin_mul(torch), argnums=-1)(tx, ty))
    got = ef.grad(sin_mul(ember), argnums=(0, 1))(x, y)
    want = tf.grad(sin_mul(torch), argnums=(0, 1))(tx, ty)
    assert isinstance(got, tuple) and len(got) == 2
    assert_close(got, want)
    g, v = ef.grad_and_value(sin_mul(ember))(x, y)
    tg, tv = tf.grad_and_value(sin_mul(torch))(tx, ty)
    assert_close(g, tg)
    assert_close(v, tv)


@needs_torch
def test_grad_has_aux_and_pytree_args_match_torch():
    (w1, tw1), (w2, tw2), (x, tx) = _pair(3, 4), _pair(4), _pair(6, 3)

    def f(m):
        def loss(params, x):
            h = m.tanh(x @ params["w1"])
            out = h @ params["w2"][0]
            return out.pow(2).mean(), {"h": h, "n": [out.sum()]}
        return loss

    (g, aux) = ef.grad(f(ember), has_aux=True)({"w1": w1, "w2": [w2]}, x)
    (tg, taux) = tf.grad(f(torch), has_aux=True)({"w1": tw1, "w2": [tw2]}, tx)
    assert set(g) == {"w1", "w2"} and isinstance(g["w2"], list)
    assert_close(g["w1"], tg["w1"])
    assert_close(g["w2"][0], tg["w2"][0])
    assert_close(aux["h"], taux["h"])
    assert_close(aux["n"][0], taux["n"][0])
    assert not aux["h"].requires_grad
    g2, (v, aux2) = ef.grad_and_value(f(ember), argnums=(0, 1), has_aux=True)({"w1": w1, "w2": [w2]}, x)
    tg2, (tv, _) = tf.grad_and_value(f(torch), argnums=(0, 1), has_aux=True)({"w1": tw1, "w2": [tw2]}, tx)
    assert_close(g2[1], tg2[1])
    assert_close(v, tv)


def test_grad_matches_finite_differences_and_leaves_outer_tensors_alone():
    x, y = _e(4, grad=True), _e(4)
    g = ef.grad(sin_mul(ember))(x, y)
    np.testing.assert_allclose(_np(g), np.cos(_np(x)) * _np(y), rtol=1e-12)
    np.testing.assert_allclose(_np(g), _fd_jacobian(lambda a: sin_mul(ember)(a, y), x), rtol=1e-6, atol=1e-8)
    assert x.grad is None and y.grad is None
    # plain inputs give plain results; inputs that require grad stay differentiable by ordinary autograd
    assert not ef.grad(sin_mul(ember))(x.detach(), y).requires_grad
    assert g.requires_grad
    g.sum().backward()            # d/dx sum(cos(x) y) = -sin(x) y
    np.testing.assert_allclose(_np(x.grad), -np.sin(_np(x)) * _np(y), rtol=1e-12)
    # a gradient that is a constant carries no graph, as in torch
    assert not ef.grad(lambda a: a.sum() * 3)(x).requires_grad
    # unused argument: zeros
    np.testing.assert_array_equal(_np(ef.grad(lambda a, b: b.sum(), argnums=0)(x, y)), np.zeros(4))
    # outer no_grad is ignored by the transform, an inner one is respected
    with ember.no_grad():
        g = ef.grad(sin_mul(ember))(x, y)
    assert not g.requires_grad
    np.testing.assert_allclose(_np(g), np.cos(_np(x)) * _np(y), rtol=1e-12)

    def f(a):
        with ember.no_grad():
            c = a ** 2
        return (a - c).sum()
    np.testing.assert_allclose(_np(ef.grad(f)(x)), np.ones(4))


@needs_torch
def test_grad_of_grad_and_third_order_match_torch():
    x, tx = _pair(5)

    def f(m):
        return lambda x: (m.sin(x) ** 3 * x).sum()

    second = ef.grad(lambda a: ef.grad(f(ember))(a).sum())(x)
    assert_close(second, tf.grad(lambda a: tf.grad(f(torch))(a).sum())(tx))
    third = ef.grad(lambda a: ef.grad(lambda b: ef.grad(f(ember))(b).sum())(a).sum())(x)
    assert_close(third, tf.grad(lambda a: tf.grad(lambda b: tf.grad(f(torch))(b).sum())(a).sum())(tx))
    # closure over the outer input (no perturbation confusion): d/dx [d/dy (x*y)]|y=x = 1
    x1 = ember.tensor(RNG.standard_normal(()), dtype=F64)
    got = ef.grad(lambda a: ef.grad(lambda b: a * b)(a))(x1)
    assert_close(got, tf.grad(lambda a: tf.grad(lambda b: a * b)(a))(torch.tensor(float(x1), dtype=torch.float64)))


def test_grad_of_grad_matches_analytic():
    x = _e(6)
    f = lambda a: (a ** 4).sum() / 12           # noqa: E731
    np.testing.assert_allclose(_np(ef.grad(lambda a: ef.grad(f)(a).sum())(x)), _np(x) ** 2, rtol=1e-12)


# ------------------------------------------------------------------------------- vjp / jvp / linearize

@needs_torch
def test_vjp_and_jvp_match_torch_func():
    (x, tx), (y, ty), (u, tu), (v, tv) = _pair(3, 4), _pair(4), _pair(3, 4), _pair(4)

    def f(m):
        return lambda x, y: (m.sin(x) * y, (x @ y).tanh())

    out, fn = ef.vjp(f(ember), x, y)
    tout, tfn = tf.vjp(f(torch), tx, ty)
    assert_close(out, tout)
    ct = (u, ember.tensor(_np(u)[:, 0], dtype=F64))
    tct = (tu, tu[:, 0])
    for _ in range(2):            # vjp_fn can be called again
        assert_close(fn(ct), tfn(tct))
    out, jv = ef.jvp(f(ember), (x, y), (u, v))
    tout, tjv = tf.jvp(f(torch), (tx, ty), (tu, tv))
    assert_close(out, tout)
    assert_close(jv, tjv)
    # has_aux and pytree primals
    g = lambda m: lambda d: ((m.exp(d["a"]) * d["b"]).sum(0), d["a"].mean())   # noqa: E731
    o, fn, aux = ef.vjp(g(ember), {"a": x, "b": u}, has_aux=True)
    to, tfn2, taux = tf.vjp(g(torch), {"a": tx, "b": tu}, has_aux=True)
    assert_close(aux, taux)
    got, want = fn(y)[0], tfn2(ty)[0]
    assert_close(got["a"], want["a"])
    assert_close(got["b"], want["b"])
    o, jv, aux = ef.jvp(g(ember), ({"a": x, "b": u},), ({"a": u, "b": x},), has_aux=True)
    to, tjv, taux = tf.jvp(g(torch), ({"a": tx, "b": tu},), ({"a": tu, "b": tx},), has_aux=True)
    assert_close(jv, tjv)
    assert_close(aux, taux)


def test_jvp_and_linearize_match_finite_differences():
    x, t = _e(5), _e(5)
    f = lambda a: ember.sin(a) * a.sum() + a ** 3       # noqa: E731
    out, jv = ef.jvp(f, (x,), (t,))
    want = _fd_jacobian(f, x) @ _np(t)
    np.testing.assert_allclose(_np(jv), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(out), _np(f(x)), rtol=1e-12)
    assert not jv.requires_grad and not out.requires_grad
    out2, jvp_fn = ef.linearize(f, x)
    np.testing.assert_allclose(_np(jvp_fn(t)), _np(jv), rtol=1e-10, atol=1e-12)
    t2 = _e(5)
    np.testing.assert_allclose(_np(jvp_fn(t2)), _fd_jacobian(f, x) @ _np(t2), rtol=1e-6, atol=1e-7)
    # an output that does not depend on the input has a zero tangent (strict=True refuses)
    _, jv = ef.jvp(lambda a: (a * 2, ember.ones(3, dtype=F64)), (x,), (t,))
    np.testing.assert_array_equal(_np(jv[1]), np.zeros(3))
    with pytest.raises(RuntimeError, match="independent of the inputs"):
        ef.jvp(lambda a: ember.ones(3, dtype=F64), (x,), (t,), strict=True)
    # vjp against the transposed finite-difference jacobian
    c = _e(5)
    _, fn = ef.vjp(f, x)
    np.testing.assert_allclose(_np(fn(c)[0]), _fd_jacobian(f, x).T @ _np(c), rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------------------- jacobians / hessian

@needs_torch
@pytest.mark.parametrize("which", ["jacrev", "jacfwd"])
def test_jacobians_match_torch_func(which):
    (x, tx), (y, ty) = _pair(3), _pair(2, 3)
    J, tJ = getattr(ef, which), getattr(tf, which)

    def f(m):
        return lambda x, y: (m.sin(x) * y, (x * y).sum())

    assert_close(J(f(ember))(x, y), tJ(f(torch))(tx, ty))
    assert_close(J(f(ember), argnums=1)(x, y), tJ(f(torch), argnums=1)(tx, ty))
    got, want = J(f(ember), argnums=(0, 1))(x, y), tJ(f(torch), argnums=(0, 1))(tx, ty)
    assert len(got) == 2 and all(len(g) == 2 for g in got)
    assert_close(got, want)
    # pytree input, has_aux
    g = lambda m: lambda d: ((d["a"] * d["b"].exp()).sum(1), d["a"].mean())   # noqa: E731
    (jac, aux) = J(g(ember), has_aux=True)({"a": y, "b": y * 2})
    (tjac, taux) = tJ(g(torch), has_aux=True)({"a": ty, "b": ty * 2})
    assert_close(jac["a"], tjac["a"])
    assert_close(jac["b"], tjac["b"])
    assert_close(aux, taux)


def test_jacobians_match_finite_differences_and_each_other():
    x = _e(4)
    f = lambda a: ember.tanh(a).outer(a).sum(0) + a.exp()   # noqa: E731
    fd = _fd_jacobian(f, x)
    np.testing.assert_allclose(_np(ef.jacrev(f)(x)), fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(ef.jacfwd(f)(x)), fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(ef.jacrev(f, chunk_size=1)(x)), fd, rtol=1e-6, atol=1e-7)
    s = lambda a: (ember.sin(a) * a).sum()                   # noqa: E731
    H = ef.hessian(s)(x)
    np.testing.assert_allclose(_np(H), _np(ef.jacrev(ef.jacrev(s))(x)), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(H), _fd_jacobian(ef.grad(s), x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(H), np.diag(2 * np.cos(_np(x)) - _np(x) * np.sin(_np(x))), rtol=1e-10,
                               atol=1e-12)


@needs_torch
def test_hessian_of_small_mlp_loss_matches_torch():
    (w1, tw1), (w2, tw2), (x, tx) = _pair(3, 4), _pair(4), _pair(5, 3)
    assert_close(ef.hessian(mlp_loss(ember))(w1, w2, x), tf.hessian(mlp_loss(torch))(tw1, tw2, tx))
    got = ef.hessian(mlp_loss(ember), argnums=(0, 1))(w1, w2, x)
    want = tf.hessian(mlp_loss(torch), argnums=(0, 1))(tw1, tw2, tx)
    assert_close(got, want)
    assert_close(ef.jacrev(ef.jacrev(mlp_loss(ember), 1), 1)(w1, w2, x),
                 tf.jacrev(tf.jacrev(mlp_loss(torch), 1), 1)(tw1, tw2, tx))


# ------------------------------------------------------------------------------- vmap

@needs_torch
def test_vmap_in_dims_out_dims_and_pytrees_match_torch():
    (a, ta), (b, tb), (c, tc) = _pair(4, 3), _pair(3, 4), _pair(5)

    def f(x, y, c, scale=1.0):
        return {"s": (x * y).sum() * scale, "v": [x + y * c.sum()]}

    for in_dims, out_dims in [((0, 1, None), 0), ((0, -1, None), {"s": 0, "v": [1]}), ((0, 1, None), -1)]:
        got = ef.vmap(f, in_dims=in_dims, out_dims=out_dims)(a, b, c, scale=2.0)
        want = tf.vmap(f, in_dims=in_dims, out_dims=out_dims)(ta, tb, tc, scale=2.0)
        assert_close(got["s"], want["s"])
        assert_close(got["v"][0], want["v"][0])
    # nested in_dims for a dict argument, an unmapped output with out_dims=None
    g = lambda d, z: (d["p"] @ d["q"] + z, d["q"].sum() * 0 + 1.5)   # noqa: E731
    (p, tp), (q, tq), (z, tz) = _pair(4, 3, 3), _pair(3), _pair(3, 4)
    in_dims = ({"p": 0, "q": None}, 1)
    got = ef.vmap(g, in_dims=in_dims, out_dims=(1, None))({"p": p, "q": q}, z)
    want = tf.vmap(g, in_dims=in_dims, out_dims=(1, None))({"p": tp, "q": tq}, tz)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])
    # an output that ignores the mapped input is still stacked; torch.vmap alias
    assert_close(ember.vmap(lambda x: ember.ones(2, dtype=F64))(a),
                 torch.vmap(lambda x: torch.ones(2, dtype=torch.float64))(ta))
    assert ember.vmap is ef.vmap


def test_vmap_matches_a_manual_loop():
    a, b, c = _e(4, 3), _e(3, 4), _e(5)
    f = lambda x, y, c: (x @ y.tanh()) * c.mean()   # noqa: E731
    got = ef.vmap(f, in_dims=(0, 1, None))(a, b, c)
    want = np.stack([_np(f(a[i], b[:, i], c)) for i in range(4)])
    np.testing.assert_allclose(_np(got), want, rtol=1e-12)
    got = ef.vmap(lambda x: (x, x.sum()), out_dims=(1, 0))(a)
    np.testing.assert_allclose(_np(got[0]), _np(a).T)
    np.testing.assert_allclose(_np(got[1]), _np(a).sum(1))
    # data-dependent control flow works (each call sees a real slice)
    got = ef.vmap(lambda x: x * 2 if float(x.sum()) > 0 else -x)(a)
    want = np.stack([r * 2 if r.sum() > 0 else -r for r in _np(a)])
    np.testing.assert_allclose(_np(got), want)
    # in-place ops on a mapped input write into the input, as in torch
    d = ember.tensor(_np(a), dtype=F64)
    ef.vmap(lambda x: x.mul_(3))(d)
    np.testing.assert_allclose(_np(d), 3 * _np(a))
    # batch size 0
    assert tuple(ef.vmap(lambda x: x.sum(), out_dims=0)(ember.randn(0, 3)).shape) == (0,)
    # differentiable w.r.t. mapped inputs by ordinary autograd
    x = _e(3, 2, grad=True)
    ef.vmap(lambda r: (r.sin() * r).sum())(x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), np.cos(_np(x)) * _np(x) + np.sin(_np(x)), rtol=1e-12)


@needs_torch
def test_nested_vmap_matches_torch():
    (a, ta), (b, tb) = _pair(3, 2), _pair(4, 2)
    f = lambda x, y: (x * y).sum().sin()   # noqa: E731
    inner = lambda m: m(f, in_dims=(None, 0))          # noqa: E731
    got = ef.vmap(inner(ef.vmap), in_dims=(0, None))(a, b)
    want = tf.vmap(inner(tf.vmap), in_dims=(0, None))(ta, tb)
    assert tuple(got.shape) == (3, 4)
    assert_close(got, want)
    np.testing.assert_allclose(_np(ef.vmap(ef.vmap(lambda s: s * s))(a)), _np(a) ** 2)


# ------------------------------------------------------------------------------- per-sample grads, ensembles

def _linear_pair(n_in=3, n_out=2):
    m = ember.nn.Linear(n_in, n_out).double()
    tm = None
    if HAVE_TORCH:
        tm = torch.nn.Linear(n_in, n_out).double()
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(_np(m.weight)))
            tm.bias.copy_(torch.tensor(_np(m.bias)))
    return m, tm


def _per_sample(m, model, F):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(params, x, y):
        out = m.func.functional_call(model, params, (x.unsqueeze(0),))
        return F.mse_loss(out, y.unsqueeze(0))

    return params, loss


def test_per_sample_gradients_match_a_manual_loop():
    model, _ = _linear_pair()
    x, y = _e(6, 3), _e(6, 2)
    params, loss = _per_sample(ember, model, ember.nn.functional)
    grads = ef.vmap(ef.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    assert set(grads) == {"weight", "bias"}
    assert tuple(grads["weight"].shape) == (6, 2, 3) and tuple(grads["bias"].shape) == (6, 2)
    for i in range(6):
        model.zero_grad()
        ember.nn.functional.mse_loss(model(x[i:i + 1]), y[i:i + 1]).backward()
        np.testing.assert_allclose(_np(grads["weight"][i]), _np(model.weight.grad), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_np(grads["bias"][i]), _np(model.bias.grad), rtol=1e-10, atol=1e-12)
    assert not grads["weight"].requires_grad


@needs_torch
def test_per_sample_gradients_match_torch_func():
    model, tmodel = _linear_pair()
    (x, tx), (y, ty) = _pair(5, 3), _pair(5, 2)
    params, loss = _per_sample(ember, model, ember.nn.functional)
    tparams, tloss = _per_sample(torch, tmodel, torch.nn.functional)
    got = ef.vmap(ef.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    want = tf.vmap(tf.grad(tloss), in_dims=(None, 0, 0))(tparams, tx, ty)
    assert_close(got["weight"], want["weight"])
    assert_close(got["bias"], want["bias"])


def test_model_ensembling_with_stack_module_state():
    models = [ember.nn.Linear(3, 2).double() for _ in range(4)]
    params, buffers = ef.stack_module_state(models)
    assert tuple(params["weight"].shape) == (4, 2, 3) and buffers == {}
    assert params["weight"].requires_grad and params["weight"].grad_fn is None
    base = models[0]
    fmodel = lambda p, b, x: functional_call(base, (p, b), (x,))   # noqa: E731
    x = _e(5, 3)
    out = ef.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    assert tuple(out.shape) == (4, 5, 2)
    for i, m in enumerate(models):
        np.testing.assert_allclose(_np(out[i]), _np(m(x)), rtol=1e-12)
    out.sum().backward()            # the stacked params are optimizable leaves
    np.testing.assert_allclose(_np(params["bias"].grad), np.full((4, 2), 5.0))
    assert models[0].weight.grad is None
    # BatchNorm buffers are stacked too; errors as torch
    bns = [ember.nn.BatchNorm1d(3) for _ in range(2)]
    p, b = ef.stack_module_state(bns)
    assert tuple(b["running_mean"].shape) == (2, 3) and not b["running_mean"].requires_grad
    with pytest.raises(RuntimeError, match="Expected at least one model, got 0"):
        ef.stack_module_state([])
    with pytest.raises(RuntimeError, match="same class"):
        ef.stack_module_state([ember.nn.Linear(3, 2), ember.nn.Tanh()])
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        ef.stack_module_state([ember.nn.Linear(3, 2), ember.nn.Linear(3, 2).eval()])
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        functional_call(base, ({"weight": params["weight"][0]}, {"weight": params["weight"][1]}), (x,))


@needs_torch
def test_model_ensembling_matches_torch():
    pairs = [_linear_pair() for _ in range(3)]
    params, buffers = ef.stack_module_state([m for m, _ in pairs])
    tparams, tbuffers = tf.stack_module_state([t for _, t in pairs])
    x, tx = _pair(4, 3)
    got = ef.vmap(lambda p, b, x: functional_call(pairs[0][0], (p, b), (x,)), in_dims=(0, 0, None))(params, buffers, x)
    want = tf.vmap(lambda p, b, x: tf.functional_call(pairs[0][1], (p, b), (x,)), in_dims=(0, 0, None))(
        tparams, tbuffers, tx)
    assert_close(got, want.detach())


# ------------------------------------------------------------------------------- randomness

def test_vmap_randomness_modes():
    x = _e(4, 3)
    f = lambda r: r * 0 + ember.rand(3, dtype=F64)     # noqa: E731
    with pytest.raises(RuntimeError, match=re.escape("vmap: called random operation while in randomness error mode. "
                                                     "Please either use the 'same' or 'different' randomness flags")):
        ef.vmap(f)(x)
    diff = _np(ef.vmap(f, randomness="different")(x))
    assert not np.allclose(diff[0], diff[1])
    same = _np(ef.vmap(f, randomness="same")(x))
    assert all(np.array_equal(same[0], s) for s in same[1:])
    # "same" draws what one call would have drawn
    state = ember.get_rng_state()
    one = _np(ember.rand(3, dtype=F64))
    ember.set_rng_state(state)
    np.testing.assert_array_equal(_np(ef.vmap(f, randomness="same")(x))[2], one)
    # nested: the inner vmap's slices differ too
    nested = _np(ef.vmap(ef.vmap(lambda s: s * 0 + ember.rand(()), randomness="different"),
                         randomness="different")(x))
    assert len(np.unique(nested)) == nested.size
    with pytest.raises(RuntimeError, match="randomness error mode"):
        ef.jacfwd(lambda a: a * ember.rand(3, dtype=F64))(x[0])
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are 'error', 'different', or "
                                           "'same'. Got foo"):
        ef.vmap(f, randomness="foo")


# ------------------------------------------------------------------------------- error messages

def _errors(m, F):
    """(name, callable raising, exception type, torch's exact message). Shared by ember and torch."""
    t3 = lambda *s: m.ones(*s) * 0.5         # noqa: E731
    ident = lambda x: x                       # noqa: E731
    return [
        ("vmap sizes", lambda: F.vmap(lambda x, y: x + y)(t3(3), t3(4)), ValueError,
         "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes [3, 4] for the "
         "mapped dimension"),
        ("vmap no mapped", lambda: F.vmap(ident, in_dims=(None,))(t3(3)), ValueError,
         "vmap: Expected at least one Tensor to vmap over"),
        ("vmap structure", lambda: F.vmap(ident, in_dims=(0, 0))(t3(3)), ValueError,
         "vmap(<lambda>, in_dims=(0, 0), ...)(<inputs>): in_dims is not compatible with the structure of `inputs`. "
         "in_dims has structure TreeSpec(tuple, None, [*,\n  *]) but inputs has structure TreeSpec(tuple, None, [*])."),
        ("vmap range", lambda: F.vmap(ident, in_dims=2)(t3(3, 4)), ValueError,
         "vmap(<lambda>, in_dims=2, ...)(<inputs>): Got in_dim=2 for some input, but that input is a Tensor of "
         "dimensionality 2 so expected in_dim to satisfy -2 <= in_dim < 2."),
        ("vmap in_dims type", lambda: F.vmap(ident, in_dims=[0])(t3(3)), ValueError,
         "vmap(<lambda>, in_dims=[0], ...)(<inputs>): expected `in_dims` to be int or a (potentially nested) tuple "
         "matching the structure of inputs, got: <class 'list'>."),
        ("vmap in_dim float", lambda: F.vmap(ident, in_dims=(0.5,))(t3(3)), ValueError,
         "vmap(<lambda>, in_dims=(0.5,), ...)(<inputs>): Got in_dim=0.5 for an input but in_dim must be either an "
         "integer dimension or None."),
        ("vmap non-tensor", lambda: F.vmap(lambda x, y: x)(t3(3), 2.0), ValueError,
         "vmap(<lambda>, in_dims=0, ...)(<inputs>): Got in_dim=0 for an input but the input is of type <class "
         "'float'>. We cannot vmap over non-Tensor arguments, please use None as the respective in_dim"),
        ("vmap no inputs", lambda: F.vmap(lambda: 1)(), ValueError,
         "vmap(<lambda>)(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying to vmap over "
         "a function with no inputs. The latter is unsupported."),
        ("vmap float out", lambda: F.vmap(lambda x: 1.0)(t3(3)), ValueError,
         "vmap(<lambda>, ...): `<lambda>` must only return Tensors, got type <class 'float'>. Did you mean to set "
         "out_dims= to None for output?"),
        ("vmap out None", lambda: F.vmap(lambda x: x * 2, out_dims=None)(m.arange(3.0)), ValueError,
         "vmap(<lambda>, ...): `<lambda>` can not return a BatchedTensor when out_dim is None"),
        ("vmap out structure", lambda: F.vmap(lambda x: (x, x), out_dims=(0,))(t3(3)), ValueError,
         "vmap(<lambda>, ..., out_dims=(0,))(<inputs>): out_dims is not compatible with the structure of `outputs`. "
         "out_dims has structure TreeSpec(tuple, None, [*]) but outputs has structure "
         "TreeSpec(tuple, None, [*,\n  *])."),
        ("vmap out range", lambda: F.vmap(ident, out_dims=2)(t3(3, 4)), IndexError,
         "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
        ("vmap chunk", lambda: F.vmap(ident, chunk_size=0), ValueError,
         "vmap: chunk_size should be None or greater than 0. (got 0)"),
        ("grad non-scalar", lambda: F.grad(ident)(t3(3)), RuntimeError,
         "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with 1 dims. Maybe you "
         "wanted to use the vjp or jacrev APIs instead?"),
        ("grad non-tensor", lambda: F.grad(lambda x: 1.0)(t3(3)), RuntimeError,
         "grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got <class 'float'>"),
        ("grad aux", lambda: F.grad(lambda x: x.sum(), has_aux=True)(t3(3)), RuntimeError,
         "grad_and_value(f)(*args): output of function f should be a tuple: (output, aux) if has_aux is True"),
        ("grad aux type", lambda: F.grad(lambda x: (x.sum(), 1.0), has_aux=True)(t3(3)), RuntimeError,
         "Expected tensors, got unsupported type <class 'float'>"),
        ("argnum range", lambda: F.grad(lambda x: x.sum(), argnums=1)(t3(3)), RuntimeError,
         "Got argnum=1, but only 1 positional inputs"),
        ("argnums type", lambda: F.grad(lambda x: x.sum(), argnums=[0])(t3(3)), RuntimeError,
         "argnums must be int or Tuple[int, ...], got: <class 'list'>"),
        ("argnums unique", lambda: F.grad(lambda x, y: x.sum(), argnums=(0, 0))(t3(3), t3(3)), RuntimeError,
         "argnums elements must be unique, got (0, 0)"),
        ("argnums empty", lambda: F.grad(lambda x, y: x.sum(), argnums=())(t3(3), t3(3)), RuntimeError,
         "argnums must be non-empty"),
        ("grad float arg", lambda: F.grad(lambda x, y: x.sum(), argnums=1)(t3(3), 2.0), ValueError,
         "Thing passed to transform API must be Tensor, got <class 'float'>"),
        ("vjp output", lambda: F.vjp(lambda x: 1.0, t3(3)), RuntimeError,
         "vjp(f, *primals): expected f(*primals) to return only tensors, got unsupported type <class 'float'>"),
        ("vjp cotangents", lambda: F.vjp(lambda x: (x, x), t3(3))[1]([t3(3), t3(3)]), RuntimeError,
         "Expected pytree structure of cotangents to be the same as pytree structure of outputs to the function. "
         "cotangents: [*, *], primal output: (*, *)"),
        ("jvp primals", lambda: F.jvp(ident, t3(3), t3(3)), RuntimeError,
         "jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to call f(*primals)."),
        ("jvp structure", lambda: F.jvp(ident, (t3(3),), [t3(3)]), RuntimeError,
         "jvp(f, primals, tangents): Expected primals and tangents to have the same python structure. For example, "
         "if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure TreeSpec(tuple, "
         "None, [*]) and tangents with structure TreeSpec(list, None, [*])"),
        ("jvp non-tensor primal", lambda: F.jvp(ident, (1.0,), (1.0,)), RuntimeError,
         "jvp(f, primals, tangents): Expected primals to only contain Tensors, got <class 'float'>"),
        ("jvp output", lambda: F.jvp(lambda x: 1.0, (t3(3),), (t3(3),)), RuntimeError,
         "jvp(f, primals, tangents): expected f(*primals) to return only tensors, got unsupported type <class "
         "'float'>"),
        ("jacrev chunk", lambda: F.jacrev(ident, chunk_size=0), ValueError,
         "jacrev: `chunk_size` should be greater than 0."),
    ]


@pytest.mark.parametrize("case", range(len(_errors(ember, ef))), ids=[c[0] for c in _errors(ember, ef)])
def test_error_messages_are_torchs(case):
    name, fn, exc, msg = _errors(ember, ef)[case]
    with pytest.raises(exc) as info:
        fn()
    assert str(info.value) == msg, name


@needs_torch
def test_the_expected_error_messages_are_what_torch_raises():
    for name, fn, exc, msg in _errors(torch, tf):
        with pytest.raises(exc) as info:
            fn()
        assert str(info.value) == msg, name


def test_functional_call_still_importable_and_accepts_dicts():
    from ember.func import functional_call as fc
    m = ember.nn.Linear(3, 2).double()
    w, b, x = _e(2, 3), _e(2), _e(4, 3)
    np.testing.assert_allclose(_np(fc(m, {"weight": w, "bias": b}, x)), _np(x) @ _np(w).T + _np(b), rtol=1e-12)
    np.testing.assert_allclose(_np(fc(m, ({"weight": w}, {"bias": b}), (x,))), _np(x) @ _np(w).T + _np(b),
                               rtol=1e-12)


@needs_torch
def test_transforms_compose_like_torch():
    (x, tx), (c, tc), (X, tX) = _pair(4), _pair(4), _pair(3, 4)
    f = lambda m: (lambda x: m.sin(x) * x)   # noqa: E731
    assert_close(ef.grad(lambda a: ef.vjp(f(ember), a)[1](c)[0].sum())(x),
                 tf.grad(lambda a: tf.vjp(f(torch), a)[1](tc)[0].sum())(tx))
    assert_close(ef.grad(lambda a: ef.jvp(f(ember), (a,), (c,))[1].sum())(x),
                 tf.grad(lambda a: tf.jvp(f(torch), (a,), (tc,))[1].sum())(tx))
    assert_close(ef.jacrev(ef.jacfwd(f(ember)))(x), tf.jacrev(tf.jacfwd(f(torch)))(tx))
    s = lambda a: (a.sin() ** 2).sum()   # noqa: E731
    assert_close(ef.vmap(ef.hessian(s))(X), tf.vmap(tf.hessian(s))(tX))
    assert_close(ef.grad(lambda w: ef.vmap(lambda r: (r * w).sin().sum())(X).sum())(x),
                 tf.grad(lambda w: tf.vmap(lambda r: (r * w).sin().sum())(tX).sum())(tx))
    # results stay connected to outer tensors that require grad, as torch's unwrapped outputs
    xr, txr = x.detach().requires_grad_(), tx.detach().requires_grad_()
    J, tJ = ef.jacrev(f(ember))(xr), tf.jacrev(f(torch))(txr)
    assert J.requires_grad and tJ.requires_grad
    J.sum().backward()
    tJ.sum().backward()
    assert_close(xr.grad, txr.grad)
    _, fn = ef.linearize(f(ember), x)
    assert_close(fn(c), tf.jvp(f(torch), (tx,), (tc,))[1])
