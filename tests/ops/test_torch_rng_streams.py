"""ember's generator draws PyTorch's numbers: the same seed gives the same ``rand``, ``randn``,
``randint``, ``randperm``, ``uniform_``/``normal_``/``bernoulli_``/``exponential_``, module
initialisation and dropout masks, bit for bit (``ember/_mt19937.py``)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember

torch = pytest.importorskip("torch")

_FLOATS = [("float32", 1), ("float64", 1), ("float16", 1), ("bfloat16", 1)]


def _same(t, e):
    t = t.detach()
    e = e.detach()
    if t.dtype == torch.bfloat16:
        t, e = t.float(), e.float()
    tn, en = t.numpy(), e.numpy()
    assert tn.shape == en.shape and tn.dtype == en.dtype
    assert np.array_equal(tn, en, equal_nan=True), (tn.ravel()[:8], en.ravel()[:8])


def _both(seed, fn):
    torch.manual_seed(seed)
    ember.manual_seed(seed)
    return fn(torch), fn(ember)


def test_the_tutorial_numbers():
    torch.manual_seed(0)
    ember.manual_seed(0)
    assert repr(ember.randn(3)) == repr(torch.randn(3)) == "tensor([ 1.5410, -0.2934, -2.1788])"


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2 ** 63 - 1), n=st.integers(0, 200), dtype=st.sampled_from([d for d, _ in _FLOATS]),
       lo=st.floats(-10, 10), width=st.floats(1e-3, 50))
def test_factories_and_fills_match_torch(seed, n, dtype, lo, width):
    def run(m):
        dt = getattr(m, dtype)
        return [m.rand(n, dtype=dt), m.randn(n, dtype=dt), m.empty(n, dtype=dt).uniform_(lo, lo + width),
                m.empty(n, dtype=dt).normal_(lo, width), m.randn(3, dtype=dt), m.randint(-7, 2 ** 35, (n,)),
                m.randint(0, 5, (n,), dtype=dt), m.randperm(n), m.empty(n, dtype=dt).bernoulli_(0.37),
                m.empty(n, dtype=dt).exponential_(1.5), m.rand(2)]
    for t, e in zip(*_both(seed, run)):
        _same(t, e)


@pytest.mark.parametrize("shape,view", [((5, 7), lambda x: x.t()), ((4, 30), lambda x: x.t()),
                                        ((2, 3, 4), lambda x: x.permute(2, 0, 1)), ((6, 8), lambda x: x[:, ::2])])
@pytest.mark.parametrize("fill", ["normal_", "uniform_", "bernoulli_"])
def test_strided_tensors_fill_in_memory_order(shape, view, fill):
    def run(m):
        return getattr(view(m.empty(*shape)), fill)()
    _same(*_both(11, run))


def test_normal_pairs_carry_across_calls():
    def run(m):
        return [m.randn(3, dtype=m.float64), m.randn(5), m.randn(1), m.randn(40)]
    for t, e in zip(*_both(5, run)):
        _same(t, e)


def test_module_initialisation_matches_torch():
    def build(m):
        return m.nn.Sequential(m.nn.Linear(20, 30), m.nn.Conv1d(3, 4, 5), m.nn.Embedding(10, 6),
                               m.nn.LayerNorm(6), m.nn.LSTM(4, 8), m.nn.MultiheadAttention(8, 2))
    t, e = _both(1234, build)
    ts, es = t.state_dict(), e.state_dict()
    assert list(ts) == list(es)
    for k in ts:
        _same(ts[k], es[k])


def test_dropout_masks_match_torch():
    def run(m):
        x = m.ones(64, 16)
        return [m.nn.functional.dropout(x, 0.3), m.nn.functional.dropout2d(m.ones(2, 8, 3, 3), 0.5),
                m.bernoulli(m.full((40,), 0.25)), m.bernoulli(m.full((40,), 0.25, dtype=m.float64))]
    for t, e in zip(*_both(77, run)):
        _same(t, e)


def test_generator_objects_and_state_round_trip():
    tg, eg = torch.Generator().manual_seed(99), ember.Generator().manual_seed(99)
    _same(torch.randn(20, generator=tg), ember.randn(20, generator=eg))
    state = eg.get_state()
    a = ember.rand(7, generator=eg)
    eg.set_state(state)
    _same(a, ember.rand(7, generator=eg))
    _same(torch.rand(7, generator=tg), a)
    ember.manual_seed(3)
    with ember.random.fork_rng():
        ember.randn(100)
    torch.manual_seed(3)
    _same(torch.randn(4), ember.randn(4))
    with pytest.raises(TypeError, match="ByteTensor"):
        eg.set_state(ember.zeros(3))


def test_shuffled_dataloader_order_matches_torch():
    from torch.utils.data import DataLoader as TL
    from ember.utils.data import DataLoader as EL
    torch.manual_seed(8)
    ember.manual_seed(8)
    t = [b.tolist() for b in TL(list(range(23)), batch_size=5, shuffle=True)]
    e = [b.tolist() for b in EL(list(range(23)), batch_size=5, shuffle=True)]
    assert t == e


@pytest.mark.parametrize("call", [lambda m, t: t.exponential_(-1.0), lambda m, t: t.exponential_(0.0),
                                  lambda m, t: t.random_(5, 5), lambda m, t: t.bernoulli_(1.5),
                                  lambda m, t: m.randint(3, 3, (2,))])
@pytest.mark.parametrize("n", [0, 3])
def test_argument_errors_are_torchs(call, n):
    with pytest.raises(RuntimeError) as te:
        call(torch, torch.empty(n))
    with pytest.raises(RuntimeError) as ee:
        call(ember, ember.empty(n))
    assert str(ee.value) == str(te.value)
