"""Session 33's random streams: integer-dtype fills (``randint``/``random_``/``randint_like`` of
every dtype, ranges from 2**28 on drawn from 64-bit words, the full 64-bit range), ``randperm``
of every dtype and its argument errors, bit for bit with torch and taking as many words of the
Mersenne Twister (each case draws ``rand(5)`` afterwards and compares it too)."""
import warnings

import numpy as np
import pytest

import ember
from ember import _mt19937

torch = pytest.importorskip("torch")

_INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "bool"]
_FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
_ALL = _INT_DTYPES + _FLOAT_DTYPES + ["uint16", "uint32", "uint64"]


def _arr(t):
    t = t.detach()
    if t.dtype in (torch.bfloat16, ember.bfloat16):
        t = t.float()
    return t.numpy()


def _outcome(m, seed, fn):
    """The values (and a rand(5) after them), or the error's type name and text; the warnings."""
    m.manual_seed(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = ("ok", _arr(fn(m)), _arr(m.rand(5)))
        except Exception as e:                      # noqa: BLE001 -- compared with torch's
            out = (type(e).__name__, str(e))
    msgs = [str(w.message).split(" (Triggered internally")[0] for w in caught
            if issubclass(w.category, UserWarning)]
    return out, msgs


def _same(fn, seed=None):
    seed = int(np.random.SeedSequence().entropy % 2 ** 63) if seed is None else seed
    (t, tw), (e, ew) = _outcome(torch, seed, fn), _outcome(ember, seed, fn)
    assert t[0] == e[0], (seed, t, e)
    if t[0] == "ok":
        for a, b in zip(t[1:], e[1:]):
            assert a.shape == b.shape and a.dtype == b.dtype, (seed, a.dtype, b.dtype)
            assert np.array_equal(a, b), (seed, a.ravel()[:8], b.ravel()[:8])
    else:
        assert t[1] == e[1], seed
    assert tw == ew
    return t


@pytest.mark.parametrize("dtype", _INT_DTYPES + _FLOAT_DTYPES)
@pytest.mark.parametrize("lo,hi", [(0, 2), (0, 100), (-3, 100), (0, 2 ** 28 - 1), (0, 2 ** 28), (-5, 2 ** 30),
                                   (0, 2 ** 32), (-1, 2 ** 32), (0, 2 ** 40), (0, 2 ** 53 + 5), (-2 ** 60, 2 ** 60),
                                   (-2 ** 63, 2 ** 63 - 1)])
def test_randint_every_dtype_and_range(dtype, lo, hi):
    out = _same(lambda m: m.randint(lo, hi, (13,), dtype=getattr(m, dtype)))
    if (dtype, lo, hi) in (("int64", 0, 100), ("bool", 0, 2)):
        assert out[0] == "ok"                       # (the comparison was of values, not of two errors)


_RANDOM_CALLS = {
    "()": lambda t: t.random_(), "(0)": lambda t: t.random_(0), "(7)": lambda t: t.random_(7),
    "(to=9)": lambda t: t.random_(to=9), "(from=2,to=9)": lambda t: t.random_(**{"from": 2, "to": 9}),
    "(1,None)": lambda t: t.random_(1, None), "(-3,None)": lambda t: t.random_(-3, None),
    "(3,to=None)": lambda t: t.random_(3, to=None),
    "(min,None)": lambda t: t.random_(-2 ** 63, None), "(min+1,None)": lambda t: t.random_(-2 ** 63 + 1, None),
    "(-5,5)": lambda t: t.random_(-5, 5), "(0,65504)": lambda t: t.random_(0, 65504),
    "(0,65505)": lambda t: t.random_(0, 65505), "(2**30)": lambda t: t.random_(2 ** 30),
    "(2**40)": lambda t: t.random_(2 ** 40), "(2**60,2**61)": lambda t: t.random_(2 ** 60, 2 ** 61),
    "(2**24+1,None)": lambda t: t.random_(2 ** 24 + 1, None), "(256,None)": lambda t: t.random_(256, None),
    "(255,257)": lambda t: t.random_(255, 257), "(257,258)": lambda t: t.random_(257, 258),
    "(2**53-1,None)": lambda t: t.random_(2 ** 53 - 1, None),
    "(min,max)": lambda t: t.random_(-2 ** 63, 2 ** 63 - 1),
}


@pytest.mark.parametrize("dtype", _ALL)
@pytest.mark.parametrize("call", list(_RANDOM_CALLS))
def test_random_overloads_values_errors_and_warnings(dtype, call):
    fn = _RANDOM_CALLS[call]
    _same(lambda m: fn(m.empty(2, 3, dtype=getattr(m, dtype))))
    _same(lambda m: fn(m.empty(0, dtype=getattr(m, dtype))))       # empty: the bounds errors, no kernel's


@pytest.mark.parametrize("dtype", ["int32", "float64", "bool", "float16"])
def test_random_fills_a_strided_tensor_in_memory_order(dtype):
    _same(lambda m: m.empty(4, 6, dtype=getattr(m, dtype)).t().random_(2 ** 29 if dtype != "bool" else 2))
    _same(lambda m: m.empty(4, 6, dtype=getattr(m, dtype))[:, ::2].random_())


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "bool", "float16", "float32", "float64"])
def test_randint_like(dtype):
    _same(lambda m: m.randint_like(m.empty(3, 5, dtype=getattr(m, dtype)), 2))
    _same(lambda m: m.randint_like(m.empty(3, 5, dtype=getattr(m, dtype)), 0, 2))
    _same(lambda m: m.randint_like(m.empty(7, dtype=getattr(m, dtype)), -1, 100))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "float16", "bfloat16", "float32",
                                   "float64", "bool", "uint16", "complex64"])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 127, 128, 129, 256, 257, 1000, 2049, 2050, 30000])
def test_randperm_every_dtype(dtype, n):
    _same(lambda m: m.randperm(n, dtype=getattr(m, dtype)))


def test_randperm_argument_errors():
    for n in (-1, -5):
        _same(lambda m: m.randperm(n))
    _same(lambda m: m.randperm(2 ** 24 + 2, dtype=m.float32))        # the precision check (no draw)
    _same(lambda m: m.randperm(2 ** 31 + 1, dtype=m.int32))          # n - 1 overflows int (no draw)
    for bad in (2.5, None):
        with pytest.raises(TypeError) as te:
            torch.randperm(bad)
        with pytest.raises(TypeError) as ee:
            ember.randperm(bad)
        assert str(ee.value) == str(te.value)


def test_randperm_inside_out_shuffle_from_the_threshold():
    """From n = 2**32 / 20 on, torch's shuffle is the inside-out one of 64-bit words (too large to
    compare with torch in a unit test: the native loop is checked against a direct transcription,
    run over a small n)."""
    n = 1000
    s1, s2 = _mt19937.MTStream(5), _mt19937.MTStream(5)
    L = _mt19937._lib()
    if L is None:
        pytest.skip("no C++ compiler: ember's native random loops are unavailable")
    w = np.ascontiguousarray(s1.words64(n))
    r = np.empty(n, dtype=np.int64)
    L.ember_randperm_inside_out(0, 600, w[:600].ctypes.data, r.ctypes.data)
    w2 = np.ascontiguousarray(w[600:])
    L.ember_randperm_inside_out(600, 400, w2.ctypes.data, r.ctypes.data)
    ref = [0] * n
    for i, word in enumerate(s2.words64(n).tolist()):
        z = word % (i + 1)
        ref[i] = ref[z]
        ref[z] = i
    assert r.tolist() == ref
    assert sorted(ref) == list(range(n))


def test_draws_follow_a_generator_object():
    tg, eg = torch.Generator().manual_seed(17), ember.Generator().manual_seed(17)
    for fn in (lambda m, g: m.randint(-9, 2 ** 30, (11,), generator=g, dtype=m.int32),
               lambda m, g: m.empty(9, dtype=m.int16).random_(generator=g),
               lambda m, g: m.empty(9, dtype=m.float64).random_(-2 ** 63, None, generator=g),
               lambda m, g: m.randperm(50, generator=g, dtype=m.int16)):
        assert np.array_equal(_arr(fn(torch, tg)), _arr(fn(ember, eg)))
    assert np.array_equal(_arr(torch.rand(4, generator=tg)), _arr(ember.rand(4, generator=eg)))


# ---------------------------------------------------------------------- multinomial's ties, Dirichlet's sums
@pytest.mark.parametrize("cats,positive,k", [(10, 3, 10), (50, 5, 20), (200, 2, 10), (640, 1, 10), (641, 4, 10),
                                             (5000, 30, 100), (64, 1, 2), (33, 0, 33)])
def test_multinomial_zero_probability_picks_in_torchs_order(cats, positive, k):
    """More samples without replacement than positive entries: the zero-probability picks come in
    the order torch's topk leaves its ties (its partial_sort when k * 64 <= cats, else nth_element
    and a sort)."""
    def run(m):
        p = m.rand(4, cats)
        if positive:
            p[:, positive:] = 0
        else:
            p[:, ::3] = 0
        return m.multinomial(p, k)
    for _ in range(3):
        _same(run)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (3, 5), (2, 7), (4, 33), (2, 100), (1, 1000), (2, 5000)])
def test_dirichlet_sums_in_torchs_order(dtype, shape):
    """``_sample_dirichlet`` divides the gammas by their sum added as torch's vectorised sum adds
    (from 5 categories on numpy's order differs in the last bit)."""
    from ember.ops import sampling_extra

    def run(m):
        a = m.rand(*shape, dtype=getattr(m, dtype)) * 3 + 0.1
        return (m._sample_dirichlet if m is torch else sampling_extra.sample_dirichlet)(a)
    _same(run)
    _same(lambda m: m.distributions.Dirichlet(m.rand(*shape, dtype=getattr(m, dtype)) + 0.2).sample((2,)))
