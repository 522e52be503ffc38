"""ember's remaining samplers draw PyTorch's numbers: with the same seed, ``multinomial``,
``normal(tensor, ...)``, ``cauchy_``/``log_normal_``/``geometric_``, rrelu's noise, the dropout
variants, ``poisson``, ``binomial``, ``_standard_gamma``/``_sample_dirichlet`` and the
distributions built on them give torch's values bit for bit, and take as many words of the
Mersenne Twister (each test draws ``rand`` afterwards and compares it too)."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from ember.ops import sampling_extra

torch = pytest.importorskip("torch")

_SEEDS = st.integers(0, 2 ** 63 - 1)


def _arr(t):
    t = t.detach()
    if t.dtype in (torch.bfloat16, ember.bfloat16):
        t = t.float()
    return t.numpy()


def _both(seed, fn):
    out = []
    for m in (torch, ember):
        m.manual_seed(seed)
        out.append([_arr(x) for x in fn(m)] + [_arr(m.rand(5))])
    return out


def _same(seed, fn):
    t, e = _both(seed, fn)
    for a, b in zip(t, e):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a, b, equal_nan=True), (a.ravel()[:8], b.ravel()[:8])


def _gamma(m):
    return m._standard_gamma if m is torch else sampling_extra.standard_gamma


def _dirichlet(m):
    return m._sample_dirichlet if m is torch else sampling_extra.sample_dirichlet


# ---------------------------------------------------------------------- multinomial
@settings(max_examples=25, deadline=None)
@given(seed=_SEEDS, rows=st.integers(0, 4), cats=st.integers(1, 60), n=st.integers(1, 8), repl=st.booleans(),
       dtype=st.sampled_from(["float32", "float64", "float16", "bfloat16"]), one_d=st.booleans(),
       transposed=st.booleans())
def test_multinomial_matches_torch(seed, rows, cats, n, repl, dtype, one_d, transposed):
    n = n if repl else min(n, cats)

    def run(m):
        p = m.rand(cats, max(rows, 1)).t() if transposed else m.rand(max(rows, 1), cats)
        p = (p ** 2).to(getattr(m, dtype))         # (squared in float32: PyTorch's bf16 pow rounds its own way)
        if one_d:
            p = p[0]
        elif rows == 0:
            p = p[:0]
        return [m.multinomial(p, n, replacement=repl)]
    _same(seed, run)


def test_multinomial_generation_loop_and_zero_entries():
    def run(m):
        logits = m.randn(3, 50)
        logits[:, 10:] = -float("inf")                # top-k style filtering: zero probabilities
        outs = []
        for _ in range(5):
            probs = m.softmax(logits, -1)
            outs.append(m.multinomial(probs, 1))
        outs.append(m.multinomial(m.softmax(logits, -1), 10))       # all the positive entries
        outs.append(m.multinomial(m.rand(2, 5000), 300, replacement=True))
        return outs
    _same(3, run)


@pytest.mark.parametrize("call", [
    lambda m: m.multinomial(m.tensor([0.0, 0.0]), 1),
    lambda m: m.multinomial(m.tensor([[1.0, 2.0], [0.0, 0.0]]), 2, True),
    lambda m: m.multinomial(m.tensor([-1.0, 2.0]), 1),
    lambda m: m.multinomial(m.tensor([[1.0, 2.0], [-1.0, 2.0]]), 2, True),
    lambda m: m.multinomial(m.tensor([float("inf"), 2.0]), 2, True),
    lambda m: m.multinomial(m.tensor([float("nan"), 2.0]), 1),
    lambda m: m.multinomial(m.tensor(1.0), 1),
    lambda m: m.multinomial(m.ones(2, 2, 2), 1),
    lambda m: m.multinomial(m.ones(3), 0),
    lambda m: m.multinomial(m.ones(3), 4),
    lambda m: m.multinomial(m.ones(3, dtype=m.int64), 1),
])
def test_multinomial_errors_are_torchs(call):
    with pytest.raises(RuntimeError) as te:
        call(torch)
    with pytest.raises(RuntimeError) as ee:
        call(ember)
    assert str(ee.value) == str(te.value)


def test_multinomial_bad_row_advances_the_stream_as_torch():
    def run(m):
        try:
            m.multinomial(m.tensor([[1.0, 2.0], [3.0, 1.0], [1.0, -1.0]]), 3, True)
        except RuntimeError:
            pass
        return []
    _same(9, run)


# ---------------------------------------------------------------------- normal
@settings(max_examples=20, deadline=None)
@given(seed=_SEEDS, n=st.integers(1, 40), dtype=st.sampled_from(["float32", "float64", "float16", "bfloat16"]))
def test_normal_tensor_variants_match_torch(seed, n, dtype):
    def run(m):
        dt = getattr(m, dtype)
        mean, std = (m.rand(n) * 4 - 2).to(dt), (m.rand(n) + 0.1).to(dt)
        return [m.normal(mean, std), m.normal(mean, 2.5), m.normal(-1.5, std), m.normal(mean[:1], std),
                m.normal(0.5, 3.0, (n, 2), dtype=dt), m.empty(n, dtype=dt).normal_(1.0, 0.5)]
    _same(seed, run)


def test_normal_gradients_and_errors_are_torchs():
    for m in (torch, ember):
        mean, std = m.rand(4, requires_grad=True), m.rand(4, requires_grad=True)
        m.normal(mean, std).sum().backward()
        assert mean.grad.tolist() == [0.0] * 4 and std.grad.tolist() == [0.0] * 4
    for call in (lambda m: m.normal(m.rand(3), -1.0), lambda m: m.normal(m.rand(3), -m.rand(3) - 0.1),
                 lambda m: m.normal(0.0, -2.0, (3,)), lambda m: m.empty(3).normal_(0, -0.5),
                 lambda m: m.normal(m.rand(3), m.rand(4))):
        with pytest.raises(RuntimeError) as te:
            call(torch)
        with pytest.raises(RuntimeError) as ee:
            call(ember)
        assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- serial fills
@settings(max_examples=20, deadline=None)
@given(seed=_SEEDS, n=st.integers(0, 60), dtype=st.sampled_from(["float32", "float64", "float16", "bfloat16"]),
       a=st.floats(-3, 3), b=st.floats(0.05, 3), p=st.floats(0.01, 0.99))
def test_cauchy_log_normal_geometric_match_torch(seed, n, dtype, a, b, p):
    def run(m):
        dt = getattr(m, dtype)
        return [m.empty(n, dtype=dt).cauchy_(a, b), m.empty(n, dtype=dt).log_normal_(a / 3, b / 2),
                m.empty(n, dtype=dt).geometric_(p), m.empty(n, dtype=m.int64).geometric_(p),
                m.empty(5, 6, dtype=dt).t().log_normal_(), m.empty(4, 6, dtype=dt)[:, ::2].cauchy_(),
                m.empty(3000, dtype=dt).exponential_(b)]
    _same(seed, run)


def test_fill_errors_are_torchs():
    for call in (lambda m: m.empty(3).cauchy_(0, -1.5), lambda m: m.empty(3, dtype=m.int64).cauchy_(),
                 lambda m: m.empty(3).log_normal_(0, 0), lambda m: m.empty(3).geometric_(1.5)):
        with pytest.raises(RuntimeError) as te:
            call(torch)
        with pytest.raises(RuntimeError) as ee:
            call(ember)
        assert str(ee.value) == str(te.value)
    for call in (lambda m: m.empty(3, dtype=m.int32).log_normal_(), lambda m: m.empty(3, dtype=m.bool).geometric_(.5)):
        with pytest.raises(NotImplementedError) as te:
            call(torch)
        with pytest.raises(NotImplementedError) as ee:
            call(ember)
        assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- rrelu / dropout
@settings(max_examples=15, deadline=None)
@given(seed=_SEEDS, shape=st.sampled_from([(7,), (4, 9), (2, 3, 5)]), dtype=st.sampled_from(["float32", "float64", "bfloat16"]),
       p=st.floats(0.05, 0.95))
def test_rrelu_and_dropouts_match_torch(seed, shape, dtype, p):
    def run(m):
        F = m.nn.functional
        dt = getattr(m, dtype)
        x = m.randn(*shape).to(dt)
        x.view(-1)[:2] = 0                                   # zeros draw a slope too
        r = F.rrelu(x, 0.1, 0.3, training=True)
        outs = [r, F.rrelu(x.t() if x.dim() == 2 else x, training=True), F.rrelu(x, training=False)]
        if dtype != "bfloat16":
            y = m.randn(2, 6, 5, 4, dtype=dt)
            outs += [F.dropout(x, p), F.dropout(y.transpose(1, 3), p), F.alpha_dropout(x, p, training=True),
                     F.feature_alpha_dropout(y, p, training=True), F.dropout1d(y[0], p), F.dropout2d(y, p),
                     F.dropout3d(y[None], p), m.nn.AlphaDropout(p)(y)]
        return outs
    _same(seed, run)


def test_rrelu_gradient_is_the_noise():
    outs = []
    for m in (torch, ember):
        m.manual_seed(4)
        x = m.randn(30, requires_grad=True)
        m.nn.functional.rrelu(x, training=True).sum().backward()
        outs.append(x.grad.numpy())
    np.testing.assert_array_equal(*outs)
    with pytest.raises(NotImplementedError, match="rrelu_with_noise_out_cpu"):
        ember.nn.functional.rrelu(ember.ones(3, dtype=ember.float16), training=True)


def test_gumbel_softmax_within_a_last_bit():
    t, e = _both(6, lambda m: [m.nn.functional.gumbel_softmax(m.randn(4, 10), tau=0.5),
                               m.nn.functional.gumbel_softmax(m.randn(4, 10), hard=True)])
    np.testing.assert_allclose(e[0], t[0], rtol=1e-6, atol=1e-7)    # (numpy's float32 log, not SLEEF's)
    np.testing.assert_array_equal(e[1], t[1])
    np.testing.assert_array_equal(e[2], t[2])


# ---------------------------------------------------------------------- rejection samplers
@settings(max_examples=20, deadline=None)
@given(seed=_SEEDS, n=st.integers(0, 80), dtype=st.sampled_from(["float32", "float64"]), scale=st.floats(0.01, 60))
def test_poisson_binomial_gamma_dirichlet_match_torch(seed, n, dtype, scale):
    def run(m):
        dt = getattr(m, dtype)
        rates = m.rand(n, dtype=dt) * scale
        count = m.randint(0, int(scale) + 2, (n,)).to(dt)
        prob = m.rand(n, dtype=dt)
        if n > 4:
            prob[:2] = m.tensor([0.0, 1.0], dtype=dt)
            prob[2:4] = 0.97
        alpha = m.rand(n, dtype=dt) * scale
        if n:
            alpha[0] = 0.0
        return [m.poisson(rates), m.binomial(count, prob), _gamma(m)(alpha), _dirichlet(m)(alpha.reshape(-1, 1)[:, [0, 0, 0]] + 0.1),
                m.poisson(rates.half()), m.randn(3, dtype=m.float64)]     # (the scalar normal path's kept value)
    _same(seed, run)


def test_sampler_errors_are_torchs():
    pairs = [(lambda m: m.poisson(m.tensor([1.0, -1.0])), RuntimeError),
             (lambda m: m.poisson(m.ones(3, dtype=m.int64)), NotImplementedError),
             (lambda m: m.binomial(m.ones(3, dtype=m.int64), m.ones(3) / 2), ValueError),
             (lambda m: m.binomial(m.ones(3, dtype=m.float16), m.ones(3, dtype=m.float16) / 2), NotImplementedError),
             (lambda m: m.binomial(m.ones(3), m.ones(3, dtype=m.float64) / 2), RuntimeError),
             (lambda m: _gamma(m)(m.ones(3, dtype=m.float16)), NotImplementedError),
             (lambda m: _dirichlet(m)(m.ones(3, dtype=m.bfloat16)), NotImplementedError)]
    for call, exc in pairs:
        with pytest.raises(exc) as te:
            call(torch)
        with pytest.raises(exc) as ee:
            call(ember)
        assert str(ee.value) == str(te.value)


# ---------------------------------------------------------------------- distributions
_EXACT = {
    "Bernoulli": lambda m, r: m.distributions.Bernoulli(probs=m.rand(5)),
    "Beta": lambda m, r: m.distributions.Beta(r(5), r(5)),
    "Binomial": lambda m, r: m.distributions.Binomial(10, probs=m.rand(5)),
    "Categorical": lambda m, r: m.distributions.Categorical(probs=m.rand(5, 4)),
    "Cauchy": lambda m, r: m.distributions.Cauchy(m.randn(5), r(5)),
    "Chi2": lambda m, r: m.distributions.Chi2(r(5) * 3),
    "Dirichlet": lambda m, r: m.distributions.Dirichlet(r(3)),
    "Exponential": lambda m, r: m.distributions.Exponential(r(5)),
    "FisherSnedecor": lambda m, r: m.distributions.FisherSnedecor(r(5) * 3, r(5) * 3),
    "Gamma": lambda m, r: m.distributions.Gamma(r(5), r(5)),
    "Geometric": lambda m, r: m.distributions.Geometric(probs=m.rand(5) * 0.8 + 0.1),
    "HalfCauchy": lambda m, r: m.distributions.HalfCauchy(r(5)),
    "HalfNormal": lambda m, r: m.distributions.HalfNormal(r(5)),
    "InverseGamma": lambda m, r: m.distributions.InverseGamma(r(5), r(5)),
    "Kumaraswamy": lambda m, r: m.distributions.Kumaraswamy(r(5), r(5)),
    "MixtureSameFamily": lambda m, r: m.distributions.MixtureSameFamily(
        m.distributions.Categorical(probs=m.rand(4)), m.distributions.Normal(m.randn(4), r(4))),
    "Multinomial": lambda m, r: m.distributions.Multinomial(10, probs=m.rand(4)),
    "NegativeBinomial": lambda m, r: m.distributions.NegativeBinomial(5, probs=m.rand(5) * 0.8 + 0.1),
    "Normal": lambda m, r: m.distributions.Normal(m.randn(5), r(5)),
    "OneHotCategorical": lambda m, r: m.distributions.OneHotCategorical(probs=m.rand(4)),
    "Poisson": lambda m, r: m.distributions.Poisson(r(5) * 10),
    "StudentT": lambda m, r: m.distributions.StudentT(r(5) * 3),
    "Uniform": lambda m, r: m.distributions.Uniform(m.randn(5), m.randn(5) + 3),
    "VonMises": lambda m, r: m.distributions.VonMises(m.randn(5), r(5) * 3),
    "Weibull": lambda m, r: m.distributions.Weibull(r(5), r(5)),
}
# the same draws, values within float32 rounding (numpy's exp/log/matmul, not PyTorch's kernels)
_CLOSE = {
    "Gumbel": lambda m, r: m.distributions.Gumbel(m.randn(5), r(5)),
    "Laplace": lambda m, r: m.distributions.Laplace(m.randn(5), r(5)),
    "LogNormal": lambda m, r: m.distributions.LogNormal(m.randn(5), r(5)),
    "Pareto": lambda m, r: m.distributions.Pareto(r(5), r(5)),
    "RelaxedOneHotCategorical": lambda m, r: m.distributions.RelaxedOneHotCategorical(m.tensor(0.5), probs=m.rand(4)),
    "Wishart": lambda m, r: m.distributions.Wishart(m.tensor(4.0), scale_tril=m.eye(3) + m.tril(m.rand(3, 3), -1)),
}


# bit for bit with torch's AVX2 kernels; with its AVX512 ones (an AVX-512 host) the power in these
# samplers' transforms differs from numpy's in the last bit now and then (measured, session 38)
_LAST_BIT_ON_AVX512 = {"Kumaraswamy", "Weibull"}


@pytest.mark.parametrize("name", sorted(_EXACT) + sorted(_CLOSE))
def test_distribution_samples_match_torch(name):
    make = _EXACT.get(name) or _CLOSE[name]
    exact = name in _EXACT and not (name in _LAST_BIT_ON_AVX512 and
                                    torch.backends.cpu.get_cpu_capability() == "AVX512")

    def run(m):
        d = make(m, lambda *s: m.rand(*s) + 0.2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [d.sample((6,)), d.sample()]
    t, e = _both(11, run)
    for a, b in zip(t, e):
        if exact:
            np.testing.assert_array_equal(b, a)
        else:
            np.testing.assert_allclose(b, a, rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(e[-1], t[-1])         # the stream is where PyTorch's is
