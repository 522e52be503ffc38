"""Edge values of eager kernels against PyTorch (session 47): half-precision floor / trunc
division of two tensors (each step rounded), and searchsorted around NaN (PyTorch's binary
search's path, eagerly and in the traced closed form)."""
import math

import numpy as np
import pytest

import ember


def _torch():
    return pytest.importorskip("torch")


def _same(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    num = ~np.isnan(want)
    return np.array_equal(got, want, equal_nan=True) and \
        np.array_equal(np.signbit(got[num]), np.signbit(want[num]))    # a NaN's sign is not compared


# ---------------------------------------------------------------- half floor / trunc division
def _half_pairs(rng, n):
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-2, 6, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-2, 4, n)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("how", ["floor_divide", "floor", "trunc"])
def test_half_tensor_division_rounds_every_step_like_torch(dtype, how):
    """torch's Half/BFloat16 kernel rounds fmod, a - mod, the division and the -1/+1 fix-ups
    to the half type (77312 // -320 in bfloat16 is -243); ember used to compute it exactly in
    float32 and round once, off by one or more in a third of random arrays."""
    torch = _torch()
    rng = np.random.default_rng(47)
    a, b = _half_pairs(rng, 300)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, -2.5, 1e30], dtype=np.float32)
    a = np.concatenate([a, np.repeat(specials, len(specials))])
    b = np.concatenate([b, np.tile(specials, len(specials))])

    def run(T):
        x, y = T.tensor(a).to(getattr(T, dtype)), T.tensor(b).to(getattr(T, dtype))
        r = T.floor_divide(x, y) if how == "floor_divide" else T.div(x, y, rounding_mode=how)
        return r.float().numpy()
    got, want = run(ember), run(torch)
    assert _same(got, want), np.nonzero(~((got == want) | (np.isnan(got) & np.isnan(want))))


@pytest.mark.parametrize("how", ["floor", "trunc"])
def test_half_division_by_one_element_stays_float32(how):
    """A one-element second operand is read unrounded and the division done in float32 (the
    kernel's scalar path): the stepwise rounding must not apply there."""
    torch = _torch()
    rng = np.random.default_rng(3)
    a, _ = _half_pairs(rng, 200)
    for other in (3.3, -0.7):
        got = ember.div(ember.tensor(a).bfloat16(), other, rounding_mode=how).float().numpy()
        want = torch.div(torch.tensor(a).bfloat16(), other, rounding_mode=how).float().numpy()
        assert _same(got, want)
        got = ember.div(ember.tensor(a).bfloat16(), ember.tensor([other]), rounding_mode=how).float().numpy()
        want = torch.div(torch.tensor(a).bfloat16(), torch.tensor([other]), rounding_mode=how).float().numpy()
        assert _same(got, want)


# ---------------------------------------------------------------- searchsorted around NaN
def _nan_last_case(rng, batch):
    m, k = int(rng.integers(1, 40)), int(rng.integers(1, 12))
    lead = (3,) if batch else ()
    b = np.sort(rng.integers(-5, 6, lead + (m,)) * 0.5 + rng.uniform(-0.1, 0.1), axis=-1)
    q = int(rng.integers(0, m + 1))
    if q:
        b[..., m - q:] = np.nan
    v = rng.integers(-6, 7, lead + (k,)) * 0.5 + rng.uniform(-0.1, 0.1)
    v[rng.random(v.shape) < 0.15] = np.nan
    return b, v


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_searchsorted_nan_boundaries_follow_torchs_search(dtype):
    """[1, 2, 2, 3, nan] puts 2 at 5 with right=True in PyTorch (its search steps over the NaN);
    ember used to count the boundaries below (3)."""
    torch = _torch()
    rng = np.random.default_rng(7)
    for trial in range(60):
        b, v = _nan_last_case(rng, batch=trial % 2 == 1)
        for right in (False, True):
            got = ember.searchsorted(ember.tensor(b).to(getattr(ember, dtype)),
                                     ember.tensor(v).to(getattr(ember, dtype)), right=right)
            want = torch.searchsorted(torch.tensor(b).to(getattr(torch, dtype)),
                                      torch.tensor(v).to(getattr(torch, dtype)), right=right)
            assert got.tolist() == want.tolist(), (b, v, right)
    assert ember.searchsorted(ember.tensor([1.0, 2.0, 2.0, 3.0, math.nan]), ember.tensor([2.0]),
                              right=True).tolist() == [5]


def test_searchsorted_nan_with_sorter_side_and_scalar_match_torch():
    torch = _torch()
    rng = np.random.default_rng(8)
    for _ in range(30):
        b, v = _nan_last_case(rng, batch=False)
        perm = rng.permutation(b.shape[-1])
        sorter = np.argsort(perm)
        for side in ("left", "right"):
            got = ember.searchsorted(ember.tensor(b[perm]), ember.tensor(v), side=side,
                                     sorter=ember.tensor(sorter))
            want = torch.searchsorted(torch.tensor(b[perm]), torch.tensor(v), side=side,
                                      sorter=torch.tensor(sorter))
            assert got.tolist() == want.tolist()
            for x in (float(v[0]), math.nan, 0.25):
                assert ember.searchsorted(ember.tensor(b), x, side=side).item() == \
                    torch.searchsorted(torch.tensor(b), x, side=side).item()


def test_searchsorted_traced_closed_form_matches_the_search():
    """The traced form (no loop over a possibly symbolic length) against the eager replay and
    torch, and a compiled call."""
    torch = _torch()
    from ember.ops import search as S
    rng = np.random.default_rng(9)
    for trial in range(300):
        b, v = _nan_last_case(rng, batch=trial % 3 == 0)
        for right in (False, True):
            want = torch.searchsorted(torch.tensor(b), torch.tensor(v), right=right).numpy()
            assert np.array_equal(S._binary_search(ember.tensor(b), ember.tensor(v), right).numpy(), want)
            assert np.array_equal(S._binary_search_np(b, v, right), want)
    f = ember.compile(lambda b, v: ember.searchsorted(b, v, right=True) * 2, backend="inductor")
    b = np.array([1.0, 2.0, 2.0, 3.0, np.nan]) + rng.uniform(0, 0.01)
    v = np.array([np.nan, 1.0, 2.0, np.inf, 2.5]) + rng.uniform(0, 0.01)
    want = torch.searchsorted(torch.tensor(b), torch.tensor(v), right=True) * 2
    assert f(ember.tensor(b), ember.tensor(v)).tolist() == want.tolist()


def test_searchsorted_compares_in_the_promoted_dtype_like_torch():
    torch = _torch()
    cases = [([1.0, 16777216.0, 16777218.0], "float32", 16777217, True),
             ([1, 2, 3], "int64", 2.5, False),
             ([1.0, 2.0, 3.0], "float16", 2.0009765625, False)]
    for b, dt, x, right in cases:
        got = ember.searchsorted(ember.tensor(b, dtype=getattr(ember, dt)), x, right=right)
        want = torch.searchsorted(torch.tensor(b, dtype=getattr(torch, dt)), x, right=right)
        assert got.item() == want.item(), (b, dt, x)
    seq = [1.0, 16777216.0, 16777218.0]
    got = ember.searchsorted(ember.tensor(seq), ember.tensor(16777217.0, dtype=ember.float64))
    want = torch.searchsorted(torch.tensor(seq), torch.tensor(16777217.0, dtype=torch.float64))
    assert got.item() == want.item()


# ---------------------------------------------------------------- all / any over no dims
@pytest.mark.parametrize("name", ["any", "all"])
def test_all_any_with_empty_dim_list_reduce_nothing(name):
    """PyTorch's all/any with dim=() are elementwise (x != 0), unlike sum/amax; ember reduced
    every dim."""
    torch = _torch()
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 3))
    x[rng.random(x.shape) < 0.4] = 0
    for arr in (x, x.astype(np.uint8), np.zeros((0, 3))):
        for dim in ((), []):
            for kd in (False, True):
                got = getattr(ember, name)(ember.tensor(arr), dim=dim, keepdim=kd)
                want = getattr(torch, name)(torch.tensor(arr), dim=dim, keepdim=kd)
                assert got.tolist() == want.tolist() and str(got.dtype)[6:] == str(want.dtype)[6:]
                assert tuple(got.shape) == tuple(want.shape)


# ---------------------------------------------------------------- cumulative ops' accumulator
@pytest.mark.parametrize("dtype", ["float32", "complex64", "bfloat16"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "logcumsumexp"])
def test_cumulative_ops_accumulate_like_torch(name, dtype):
    """torch's CPU cumsum/cumprod/logcumsumexp add one term after another in acc_type (double
    for float32, complex<double> for complex64), each output rounded once: float32
    accumulation was an ulp off in most rows, complex64 cumsum accumulated in complex64."""
    torch = _torch()
    if name == "logcumsumexp" and dtype == "bfloat16":
        pytest.skip("covered by float32 (the same float64 scan)")
    rng = np.random.default_rng(11)
    wide = "complex128" if dtype == "complex64" else "float64"
    for trial in range(20):
        x = rng.standard_normal((3, 29)) * (0.3 if name == "cumprod" else 2) + (1 if name == "cumprod" else 0)
        if dtype == "complex64":
            x = x + 1j * rng.standard_normal(x.shape) * (0.1 if name != "cumsum" else 1)
        if name == "logcumsumexp" and trial % 4 == 0:
            x[rng.random(x.shape) < 0.3] = -np.inf
        d = trial % 2
        got = getattr(ember, name)(ember.tensor(x).to(getattr(ember, dtype)), d).to(getattr(ember, wide)).numpy()
        want = getattr(torch, name)(torch.tensor(x).to(getattr(torch, dtype)), d).to(getattr(torch, wide)).numpy()
        if dtype == "complex64" and name == "logcumsumexp":
            # the phase may differ by 2 pi (another association order): compare exp of it
            assert np.array_equal(got.real, want.real)
            np.testing.assert_allclose(np.exp(1j * got.imag), np.exp(1j * want.imag), atol=1e-6)
            continue
        assert np.array_equal(got, want, equal_nan=True), (trial, np.abs(got - want).max())


# ---------------------------------------------------------------- a number before a tensor
@pytest.mark.parametrize("name", ["bitwise_left_shift", "bitwise_right_shift", "bitwise_and", "bitwise_or",
                                  "bitwise_xor"])
def test_bitwise_ops_take_a_number_first_like_torch(name):
    """torch's Scalar_Tensor overloads: bitwise_left_shift(5, t) (ember raised TypeError); the
    number is cast to the tensor's dtype (300 wraps in int8)."""
    torch = _torch()
    rng = np.random.default_rng(14)
    for dt in ("int8", "int32", "int64", "uint8"):
        s = rng.integers(0, 9, 6)
        for n in (5, 300, -3, int(rng.integers(1, 100))):
            if dt == "uint8" and n < 0:
                continue
            got = getattr(ember, name)(n, ember.tensor(s, dtype=getattr(ember, dt)))
            want = getattr(torch, name)(n, torch.tensor(s, dtype=getattr(torch, dt)))
            assert got.tolist() == want.tolist() and str(got.dtype)[6:] == str(want.dtype)[6:], (dt, n)


def test_reflected_shifts_take_the_number_first():
    """``5 << t`` and ``100 >> t``: Tensor.__rlshift__/__rrshift__ (the Scalar_Tensor overloads)."""
    t = ember.tensor([0, 1, 3, 5, 7])
    assert (5 << t).tolist() == [5 << k for k in (0, 1, 3, 5, 7)]
    assert (1000 >> t).tolist() == [1000 >> k for k in (0, 1, 3, 5, 7)]
    assert ember.compile(lambda t: (5 << t) + (1000 >> t))(t).tolist() == \
        [(5 << k) + (1000 >> k) for k in (0, 1, 3, 5, 7)]


def test_compiled_any_all_over_no_dims_are_elementwise():
    """``any``/``all`` with ``dim=()`` reduce nothing (x != 0) compiled as in eager."""
    import numpy as np
    x = ember.tensor(np.random.default_rng(5).integers(-1, 2, size=(3, 4)).astype(np.float32))
    for fn in (lambda x: ember.any(x, dim=()), lambda x: x.all(dim=(), keepdim=True)):
        ember.compiler.reset()
        want = fn(x)
        got = ember.compile(fn)(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tolist() == want.tolist() == (np.asarray(x._data) != 0).tolist()
