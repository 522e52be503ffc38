"""float16/bfloat16 results bit for bit against PyTorch's CPU kernels (session 34): the norm
family's gradients (norm / linalg.vector_norm / dist / pairwise_distance / cosine_similarity /
normalize), eager and compiled."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")

from tests.ops.test_half_parity_s33 import DTS, _check, _run, _std, _within_ulp  # noqa: E402

TF = torch.nn.functional


def _ns(F):
    return ember if F.__name__.startswith("ember") else torch


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("p", [2, 3, 1.5, 0.5, 1, float("inf")])
def test_vector_norm_gradient_in_torchs_steps(dt, p):
    """torch's norm_backward rounds grad * (x / norm) (p=2), sgn * |x|^(p-1) and grad / norm^(p-1)
    (other p) step by step in the half dtype; ember rounded g * x first, thousands of elements
    an ulp off."""
    rng = np.random.default_rng(3)
    # bfloat16 p=0.5: torch's pow(x, -0.5) is its rsqrt, whose scalar tail (the last elements of
    # a vector loop) rounds the root first: a rare ulp
    check = _check_few_off if p == 0.5 and dt == "bfloat16" else _check
    for shape, dim in (((24, 96), -1), ((24, 96), 0), ((5, 6, 7), (0, 2)), ((40, 30), None)):
        x = _std(rng, shape)
        x[0, :3] = 0.0                         # zeros: the masked steps
        check(lambda F, t: _ns(F).linalg.vector_norm(t, p, dim), [(x, True)], dt, 3)
    check(lambda F, t: t.norm(p, -1, True), [(_std(rng, (9, 50)), True)], dt, 4)


def _check_few_off(fn, arrs, dt, seed):
    """The forward equal, the gradients within 2 ulps in at most one element in 500."""
    g = lambda shape: np.random.default_rng(seed + 99).standard_normal(shape).astype(np.float32)  # noqa: E731
    eo, eg = _run(ember, EF, fn, arrs, dt, g)
    to, tg = _run(torch, TF, fn, arrs, dt, g)
    np.testing.assert_array_equal(eo, to)
    for a, b in zip(eg, tg):
        _within_ulp(a, b, dt, 2)
        assert (a != b).sum() <= max(2, a.size // 500)


@pytest.mark.parametrize("dt", DTS)
def test_norm_family_gradients(dt):
    rng = np.random.default_rng(8)
    a, b = _std(rng, (32, 64)), _std(rng, (32, 64))
    pair = [(a, True), (b, True)]
    _check(lambda F, x: x.norm(), [(a, True)], dt, 8)
    _check(lambda F, x: _ns(F).norm(x, "fro", (0, 1)), [(_std(rng, (6, 7, 8)), True)], dt, 8)
    _check(lambda F, x, y: _ns(F).dist(x, y), pair, dt, 8)
    _check(lambda F, x, y: _ns(F).dist(x, y, 3), pair, dt, 8)
    _check(lambda F, x, y: F.pairwise_distance(x, y), pair, dt, 8)
    _check(lambda F, x, y: F.pairwise_distance(x, y, 3.0, keepdim=True), pair, dt, 8)
    for d in (1, 0):
        _check(lambda F, x, y: F.cosine_similarity(x, y, d), pair, dt, 8)
        _check(lambda F, x: F.normalize(x, dim=d), [(a, True)], dt, 8)
    _check(lambda F, x: F.normalize(x, 3.0, dim=1), [(a, True)], dt, 8)
    c = _std(rng, (5, 6, 12))
    _check(lambda F, x, y: F.cosine_similarity(x, y, -1), [(c, True), (_std(rng, (6, 12)), True)], dt, 8)


@pytest.mark.parametrize("dt", DTS)
def test_norm_family_compiled(dt):
    rng = np.random.default_rng(9)
    a, b = _std(rng, (16, 48)), _std(rng, (16, 48))
    _check(lambda F, x: x.norm(3, 0), [(a, True)], dt, 9, compiled=True)
    _check(lambda F, x, y: F.cosine_similarity(x, y), [(a, True), (b, True)], dt, 9, compiled=True)


@pytest.fixture
def threads(request, monkeypatch):
    """torch's and ember's thread counts set alike (torch splits these kernels' lanes by thread)."""
    import ember._settings as settings
    n = request.param
    monkeypatch.setattr(settings, "get_num_threads", lambda: n)
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    yield n
    torch.set_num_threads(old)


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("threads", [1, 2, 3], indirect=True)
def test_softmax_over_an_inner_dim_rounds_torchs_scalar_lanes_twice(dt, threads):
    """torch's half softmax over a dim that is not the last: lanes in whole vectors divide the
    float32 exp by the sum, the rest (a row's or a thread chunk's tail) divide the exp rounded
    to the half dtype: ~1 in 50 of those an ulp apart."""
    rng = np.random.default_rng(12)
    for shape, d in (((12, 7, 33), 1), ((4, 10, 40), 1), ((300, 5, 3), 1), ((3, 50, 17), 0), ((5, 9, 1), 1),
                     ((2, 6, 4, 20), 1)):
        x = _std(rng, shape, 2.0)
        _check(lambda F, t: F.softmax(t, d), [(x, True)], dt, 12, grads=False)
    # the gradient (float32 from the half result, rounded once) follows the forward
    _check(lambda F, t: F.softmax(t, 1), [(_std(rng, (6, 20, 19), 2.0), True)], dt, 13)


@pytest.mark.parametrize("dt", DTS)
def test_softmax_inner_dim_compiled_within_an_ulp(dt):
    rng = np.random.default_rng(14)
    x = ember.tensor(_std(rng, (4, 10, 24), 2.0)).to(getattr(ember, dt))
    e = EF.softmax(x, 1).float().numpy()
    c = ember.compile(lambda t: EF.softmax(t, 1))(x).float().numpy()
    _within_ulp(c, e, dt)


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_rsqrt_scalar_tail_rounds_the_root_first(dt, threads):
    """torch's half rsqrt: 1 / sqrt(x) in float32 rounded once on whole vectors, the root rounded
    to the half dtype first on the loop's tail (the last len % 32 elements of each thread's
    chunk on AVX2; every element of a tensor smaller than that)."""
    rng = np.random.default_rng(15)
    for shape in ((1,), (7,), (100,), (3000,), (40001,), (50, 70), (4, 16, 1)):
        x = np.abs(_std(rng, shape, 3.0)) + 0.01
        _check(lambda F, t: t.rsqrt(), [(x, True)], dt, 15)
        _check(lambda F, t: (t * 2).rsqrt_(), [(x, True)], dt, 15)
        if dt == "bfloat16":            # its pow(x, -0.5) is the rsqrt kernel
            _check(lambda F, t: t.pow(-0.5), [(x, True)], dt, 15)
    x = np.abs(_std(rng, (50, 70), 3.0)) + 0.01
    _check(lambda F, t: t.t().rsqrt(), [(x, True)], dt, 15)
    # an RMSNorm as written in user code: its (rows, 1) rsqrt is all tail
    x = _std(rng, (6, 64))
    _check(lambda F, t: t * (t.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt(), [(x, True)], dt, 16)


@pytest.mark.parametrize("dt", DTS)
def test_batch_norm_half_running_statistics(dt):
    """A training step's running_mean/running_var of float16/bfloat16 buffers as torch's kernel
    rounds them (bfloat16: c10 half arithmetic, each step rounded; float16: float32, rounded
    once); before, the composite's half ops were an ulp off in several channels."""
    rng = np.random.default_rng(17)
    for shape, mom in (((8, 16, 6, 8), 0.1), ((6, 5, 7, 9), 0.3), ((64, 12), 0.1), ((33, 7, 13), 0.01)):
        c = shape[1]
        rm0 = (rng.standard_normal(c) * 0.3).astype(np.float32)
        rv0 = rng.uniform(0.5, 2, c).astype(np.float32)
        xs = [_std(rng, shape, 2.0, 0.5) for _ in range(3)]
        res = []
        for ns, F in ((ember, EF), (torch, TF)):
            h = getattr(ns, dt)
            rm, rv = ns.tensor(rm0).to(h), ns.tensor(rv0).to(h)
            for x in xs:
                F.batch_norm(ns.tensor(x).to(h), rm, rv, training=True, momentum=mom)
            res.append((rm.float().numpy(), rv.float().numpy()))
        np.testing.assert_array_equal(res[0][0], res[1][0], err_msg="running_mean")
        np.testing.assert_array_equal(res[0][1], res[1][1], err_msg="running_var")


@pytest.mark.parametrize("dt", DTS)
def test_prod_in_torchs_half_products(dt):
    """torch's half prod multiplies in the half dtype (each product rounded): over trailing
    contiguous dims in four vector accumulators, then their lanes, then the row's rest; its
    gradient, where a slice has no zero, grad * (result / input) rounded step by step."""
    rng = np.random.default_rng(19)
    for shape, d in (((64, 192), -1), ((12, 7, 33), -1), ((12, 7, 33), 0), ((5, 6, 70), (1, 2)), ((9, 130), None)):
        x = (_std(rng, shape) * 0.1 + 1).astype(np.float32)
        f = (lambda F, t: t.prod()) if d is None else \
            (lambda F, t: t.prod(d)) if isinstance(d, int) else (lambda F, t: t.flatten(1).prod(-1))
        _check(f, [(x, True)], dt, 19)
    x = (_std(rng, (8, 40)) * 0.1 + 1).astype(np.float32)
    x[2, 5] = 0.0
    x[3, 1:3] = 0.0                                  # rows with one and two zeros
    # (a tensor holding a zero: torch takes its cumprod formula for every row, ember its exact
    # per-row one: equal forward, gradients close)
    g = lambda s: np.random.default_rng(20).standard_normal(s).astype(np.float32)  # noqa: E731
    eo, eg = _run(ember, EF, lambda F, t: t.prod(-1, keepdim=True), [(x, True)], dt, g)
    to, tg = _run(torch, TF, lambda F, t: t.prod(-1, keepdim=True), [(x, True)], dt, g)
    np.testing.assert_array_equal(eo, to)
    np.testing.assert_allclose(eg[0], tg[0], rtol=0.05, atol=1e-2)


@pytest.mark.parametrize("dt", DTS)
def test_cdist_half_only_on_the_matmul_path(dt):
    """torch's cdist kernel has no float16/bfloat16 version: only its matmul form (p=2 with more
    than 25 rows) runs in half; the rest raises its NotImplementedError."""
    rng = np.random.default_rng(21)
    for rows, p in ((20, 2.0), (30, 1.0), (10, 0.0)):
        errs = []
        for ns in (ember, torch):
            h = getattr(ns, dt)
            with pytest.raises(NotImplementedError) as ei:
                ns.cdist(ns.tensor(_std(rng, (rows, 4))).to(h), ns.tensor(_std(rng, (rows, 4))).to(h), p)
            errs.append(str(ei.value))
        assert errs[0] == errs[1]
    a, b = _std(rng, (30, 4)), _std(rng, (28, 4))
    r = [ns.cdist(ns.tensor(a).to(getattr(ns, dt)), ns.tensor(b).to(getattr(ns, dt))) for ns in (ember, torch)]
    assert r[0].dtype is getattr(ember, dt) and r[1].dtype is getattr(torch, dt)
    # (the matmul form's cancellation: values close, not bit-equal)
    np.testing.assert_allclose(r[0].float().numpy(), r[1].float().numpy(), rtol=0.05, atol=0.05)
