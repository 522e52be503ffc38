"""Complex dtypes against PyTorch: promotion, creation, printing, the part views (values,
strides, write-through), torch's errors for ops undefined on complex, values of the
supported ops, and gradients in torch's convention (random data, compared with
torch.autograd.grad)."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng(1234)


def cz(shape, dt=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dt)


def rz(shape, dt=np.float64):
    return RNG.standard_normal(shape).astype(dt)


def both(x):
    return torch.from_numpy(np.array(x)), ember.from_numpy(np.array(x))


def tnp(t):
    return t.detach().resolve_conj().numpy()


def enp(t):
    return np.asarray(t.detach()._data)


def same_dtype(tt, et):
    assert str(tt.dtype).replace("torch.", "") == et.dtype.name


# ---------------------------------------------------------------------- dtypes and promotion
def test_dtype_objects():
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128
    assert ember.complex64.is_complex and not ember.complex64.is_floating_point
    assert ember.complex64.to_real() is ember.float32 and ember.complex128.to_real() is ember.float64
    assert ember.float32.to_complex() is ember.complex64 and ember.float64.to_complex() is ember.complex128
    assert ember.float32.to_real() is ember.float32
    with pytest.raises(RuntimeError, match="Unknown Complex ScalarType for Int"):
        ember.int32.to_complex()
    with pytest.raises(TypeError, match="complex32"):
        ember.complex32
    assert ember.randn(2, dtype=ember.cfloat).is_complex() and ember.is_complex(ember.zeros(1, dtype=ember.cdouble))


TYPES = ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("a", TYPES)
@pytest.mark.parametrize("b", ["complex64", "complex128"])
def test_promote_types(a, b):
    assert ember.promote_types(getattr(ember, a), getattr(ember, b)).name == \
        str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")


@pytest.mark.parametrize("case", [
    ("float32", (3,), 1j), ("float64", (3,), 1j), ("int64", (3,), 1j), ("bool", (3,), 2j),
    ("float32", (3,), ("complex128", ())), ("float64", (3,), ("complex64", ())),
    ("int32", (3,), ("complex128", ())), ("complex64", (3,), ("float64", ())),
    ("complex64", (), 2.5), ("float64", (), 1j), ("bfloat16", (3,), 1j)])
@pytest.mark.parametrize("default", ["float32", "float64"])
def test_three_tier_promotion(case, default):
    dt, shape, other = case
    out = []
    for m in (torch, ember):
        m.set_default_dtype(getattr(m, default))
        try:
            x = m.ones(shape, dtype=getattr(m, dt))
            y = other if not isinstance(other, tuple) else m.ones(other[1], dtype=getattr(m, other[0]))
            out.append(str((x * y).dtype).split(".")[-1])
        finally:
            m.set_default_dtype(m.float32)
    assert out[0] == out[1]


def test_complex32_promotion_is_a_clear_error():
    with pytest.raises(TypeError, match="complex32"):
        ember.ones(2, dtype=ember.float16) + 1j


def test_creation():
    t = ember.tensor([1 + 2j, 3])
    assert t.dtype is ember.complex64 and t.tolist() == [1 + 2j, 3 + 0j]
    assert ember.tensor(np.array([1j])).dtype is ember.complex128
    assert ember.from_numpy(np.array([1j], dtype=np.complex64)).dtype is ember.complex64
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.tensor([1j]).dtype is ember.complex128
        assert (ember.ones(2, dtype=ember.int32) + 1j).dtype is ember.complex128
    finally:
        ember.set_default_dtype(ember.float32)
    assert ember.full((2,), 1 + 2j).dtype is ember.complex64
    assert ember.zeros(2, 3, dtype=ember.cfloat).tolist() == [[0j] * 3] * 2
    assert ember.ones(2, dtype=ember.cdouble).dtype is ember.complex128
    assert ember.empty(2, dtype=ember.cfloat).shape == (2,)
    z = ember.tensor([1.5 - 2j])
    assert z[0].item() == 1.5 - 2j and isinstance(z[0].item(), complex) and complex(z[0]) == 1.5 - 2j
    assert ember.randn(3).cfloat().dtype is ember.complex64 and ember.randn(3).cdouble().dtype is ember.complex128
    assert ember.randn(3).to(ember.complex64).dtype is ember.complex64
    with pytest.raises(RuntimeError, match="without overflow"):
        float(ember.tensor(1 + 1j))
    with pytest.raises(RuntimeError, match="without overflow"):
        ember.full((2,), 1j, dtype=ember.float32)
    with pytest.raises(NotImplementedError, match="arange_cpu"):
        ember.arange(3, dtype=ember.complex64)
    t = ember.linspace(0, 1, 5, dtype=ember.complex64)
    np.testing.assert_allclose(enp(t), tnp(torch.linspace(0, 1, 5, dtype=torch.complex64)))


def test_randn_complex_variance():
    ember.manual_seed(0)
    z = ember.randn(20000, dtype=ember.complex64)
    assert z.dtype is ember.complex64
    v = enp(z)
    assert abs(v.real.var() - 0.5) < 0.03 and abs(v.imag.var() - 0.5) < 0.03 and abs(np.mean(np.abs(v) ** 2) - 1) < 0.05


def test_complex_to_real_cast_warns_and_keeps_real_part():
    t, e = both(cz((3,), np.complex64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(enp(e.float()), tnp(t.float()))


# ---------------------------------------------------------------------- printing
@pytest.mark.parametrize("shape", [(), (1,), (4,), (2, 3), (2, 2, 2), (30,), (3, 40), (1200,)])
@pytest.mark.parametrize("scale", [1.0, 1e-6, 1e6, 1e10])
@pytest.mark.parametrize("dt", ["complex64", "complex128"])
def test_repr_matches_torch(shape, scale, dt):
    a = (cz(shape) * scale).astype(dt)
    assert repr(ember.from_numpy(np.asarray(a))) == repr(torch.from_numpy(np.asarray(a))).replace("torch", "ember")


@pytest.mark.parametrize("values", [[1 + 2j, -3 - 1j, 0j, -0.0 - 0.0j], [np.nan + 1j, np.inf - 2j, 1 + 1j * np.nan],
                                    [1 + 0j, 2 + 1j], [1.5 + 0j, 2 + 1e6j]])
@pytest.mark.parametrize("default", ["float32", "float64"])
def test_repr_special_values_and_dtype_suffix(values, default):
    outs = []
    for m in (torch, ember):
        m.set_default_dtype(getattr(m, default))
        try:
            for dt in (np.complex64, np.complex128):
                x = m.from_numpy(np.array(values, dtype=dt))
                outs.append(repr(x).replace("torch", "ember"))
            outs.append(repr(m.from_numpy(np.array(values, dtype=np.complex64)).requires_grad_() * 2).replace(
                "torch", "ember"))
        finally:
            m.set_default_dtype(m.float32)
    n = len(outs) // 2
    assert outs[:n] == outs[n:]


# ---------------------------------------------------------------------- views
@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=3), transpose=st.booleans(),
       dt=st.sampled_from([np.complex64, np.complex128]))
def test_part_views_match_torch(shape, transpose, dt):
    a = cz(tuple(shape), dt)
    t, e = both(a)
    if transpose and len(shape) >= 2:
        t, e = t.transpose(0, 1), e.transpose(0, 1)
    for f in (lambda m, x: m.view_as_real(x), lambda m, x: x.real, lambda m, x: x.imag):
        tv, ev = f(torch, t), f(ember, e)
        assert tv.shape == ev.shape and tv.stride() == ev.stride() and tv.storage_offset() == ev.storage_offset()
        same_dtype(tv, ev)
        np.testing.assert_array_equal(tnp(tv), enp(ev))


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=3), step=st.integers(1, 2))
def test_view_as_complex_matches_torch(shape, step):
    a = rz(tuple(shape) + (2 * step,))
    t, e = both(a)
    t, e = t[..., ::step], e[..., ::step]
    outs = []
    for m, x in ((torch, t), (ember, e)):
        try:
            v = m.view_as_complex(x)
            outs.append((tuple(v.shape), v.stride(), v.storage_offset(), (tnp if m is torch else enp)(v).tolist()))
        except RuntimeError as err:
            outs.append(str(err))
    assert outs[0] == outs[1]


def test_view_errors():
    for f in (lambda m: m.view_as_complex(m.zeros(3, 3)), lambda m: m.view_as_complex(m.zeros(2, 3).t()),
              lambda m: m.view_as_complex(m.zeros(7)[1:].reshape(3, 2)),
              lambda m: m.view_as_complex(m.zeros(3, 2, dtype=m.int32)), lambda m: m.view_as_real(m.zeros(3)),
              lambda m: m.zeros(3).imag, lambda m: m.imag(m.zeros(3)),
              lambda m: m.complex(m.zeros(2), m.zeros(2, dtype=m.float64)),
              lambda m: m.complex(m.zeros(2, dtype=m.int32), m.zeros(2, dtype=m.int32))):
        msgs = []
        for m in (torch, ember):
            with pytest.raises(RuntimeError) as info:
                f(m)
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1]
    x = ember.randn(3)
    assert x.real is x and ember.real(x) is x


def test_parts_write_through():
    t, e = both(cz((2, 3)))
    for m, x in ((torch, t), (ember, e)):
        x.real.mul_(2)
        x.imag[0] = 7.0
        m.view_as_real(x)[1, 1, 0] = -1.0
        x.imag = x.real
    np.testing.assert_array_equal(tnp(t), enp(e))
    v = ember.view_as_complex(ember.from_numpy(rz((3, 2))))
    v.mul_(1j)
    assert v._base is not None


def test_conj_is_materialised_consistently():
    z = ember.from_numpy(cz((3,)))
    c = z.conj()
    assert not c.is_conj() and not z.is_conj() and c.resolve_conj() is c and not c.is_neg()
    np.testing.assert_array_equal(enp(c), np.conj(enp(z)))
    np.testing.assert_array_equal(enp(ember.conj_physical(z)), np.conj(enp(z)))
    x = ember.randn(3)
    assert x.conj() is x


# ---------------------------------------------------------------------- torch's errors
REJECTED = {
    "lt": lambda m, z: z < z, "ge": lambda m, z: z >= 0, "max": lambda m, z: z.max(), "max_dim": lambda m, z: z.max(0),
    "argmax": lambda m, z: z.argmax(), "amin": lambda m, z: z.amin(), "maximum": lambda m, z: m.maximum(z, z),
    "relu": lambda m, z: m.relu(z), "clamp": lambda m, z: z.clamp(0, 1), "floor": lambda m, z: z.floor(),
    "round": lambda m, z: z.round(), "sign": lambda m, z: z.sign(), "sort": lambda m, z: z.sort(),
    "topk": lambda m, z: z.topk(1), "erf": lambda m, z: z.erf(), "atan2": lambda m, z: m.atan2(z, z),
    "remainder": lambda m, z: z % 2, "floor_div": lambda m, z: z // 2, "bitwise": lambda m, z: z & z,
    "gelu": lambda m, z: m.nn.functional.gelu(z), "softmax": lambda m, z: m.softmax(z, 0),
    "mse": lambda m, z: m.nn.functional.mse_loss(z, z), "nansum": lambda m, z: z.nansum(),
    "unique": lambda m, z: z.unique(), "cummax": lambda m, z: z.cummax(0),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_torch_errors_for_undefined_ops(name):
    t, e = both(cz((3, 4), np.complex64))
    errs = []
    for m, z in ((torch, t), (ember, e)):
        with pytest.raises((RuntimeError, NotImplementedError)) as info:
            REJECTED[name](m, z)
        errs.append((type(info.value), str(info.value)))
    assert errs[0] == errs[1]



@pytest.mark.parametrize("grad", [False, True])
def test_refusals_reach_every_binding_path(grad):
    """The refusal is tested inline in the generated fast path (real inputs skip the kernel
    wrapper): a complex tensor in any tensor position, with or without grad, in-place or
    through an alias of the binding, still gets torch's error, and real inputs still work."""
    t, e = both(cz((3, 4), np.complex64))
    tr, er = both(RNG.standard_normal((3, 4)).astype(np.float32))
    if grad:
        t.requires_grad_(True)
        e.requires_grad_(True)
    cases = [lambda m, z, r: r < z, lambda m, z, r: m.relu(z), lambda m, z, r: m.nn.functional.relu(z),
             lambda m, z, r: z.relu(), lambda m, z, r: m.maximum(r, z), lambda m, z, r: m.clamp(z, min=0)]
    for case in cases:
        errs = []
        for m, z, r in ((torch, t, tr), (ember, e, er)):
            with pytest.raises((RuntimeError, NotImplementedError)) as info:
                case(m, z, r)
            errs.append((type(info.value), str(info.value)))
        assert errs[0] == errs[1]
    for m, z in ((torch, t.detach().clone()), (ember, e.detach().clone())):
        with pytest.raises((RuntimeError, NotImplementedError)):
            z.relu_()
    np.testing.assert_array_equal(enp(ember.relu(er)), torch.relu(tr).numpy())
    np.testing.assert_array_equal(enp(er < er.flip(0)), (tr < tr.flip(0)).numpy())

# ---------------------------------------------------------------------- values
A, B, R, M, I = cz((3, 4)), cz((3, 4)), rz((3, 4)), cz((4, 5)), RNG.integers(1, 5, (3, 4))
VALUES = {
    "add": lambda m, c: c(A) + c(B), "add_real": lambda m, c: c(A) + c(R), "add_scalar": lambda m, c: c(R) + 1j,
    "int_scalar": lambda m, c: c(I) * (2 - 1j), "rsub": lambda m, c: 1j - c(A), "mul": lambda m, c: c(A) * c(B),
    "div": lambda m, c: c(A) / c(B), "rdiv": lambda m, c: 2 / c(A), "pow": lambda m, c: c(A) ** 2,
    "pow_c": lambda m, c: c(A) ** c(B), "rpow": lambda m, c: 2 ** c(A), "neg": lambda m, c: -c(A),
    "reciprocal": lambda m, c: c(A).reciprocal(), "exp": lambda m, c: c(A).exp(), "log": lambda m, c: c(A).log(),
    "sqrt": lambda m, c: c(A).sqrt(), "sin": lambda m, c: c(A).sin(), "cos": lambda m, c: c(A).cos(),
    "tanh": lambda m, c: c(A).tanh(), "sigmoid": lambda m, c: c(A).sigmoid(), "abs": lambda m, c: c(A).abs(),
    "angle": lambda m, c: c(A).angle(), "angle_real": lambda m, c: c(R).angle(), "sgn": lambda m, c: c(A).sgn(),
    "isreal": lambda m, c: m.isreal(c(A) * c(I % 2)), "sum": lambda m, c: c(A).sum(), "mean": lambda m, c: c(A).mean(0),
    "prod": lambda m, c: c(A).prod(1), "cumsum": lambda m, c: c(A).cumsum(1), "matmul": lambda m, c: c(A) @ c(M),
    "bmm": lambda m, c: m.bmm(c(A)[None], c(M)[None]), "einsum": lambda m, c: m.einsum("ij,jk->ik", c(A), c(M)),
    "vdot": lambda m, c: m.vdot(c(A)[0], c(B)[0]), "eq": lambda m, c: c(A) == c(A) * c(I % 2),
    "isclose": lambda m, c: m.isclose(c(A), c(A) + 1e-9 * c(B)), "var": lambda m, c: c(A).var(1),
    "std": lambda m, c: c(A).std(), "norm": lambda m, c: c(A).norm(), "mH": lambda m, c: c(A).mH,
    "polar": lambda m, c: m.polar(c(np.abs(R)), c(R)), "complex": lambda m, c: m.complex(c(R), c(R) * 2),
    "where": lambda m, c: m.where(c(R) > 0, c(A), 0.0), "masked_fill": lambda m, c: c(A).masked_fill(c(R) > 0, 1j),
    "nan_to_num": lambda m, c: c(A).nan_to_num(), "lerp": lambda m, c: m.lerp(c(A), c(B), 0.3),
}


@pytest.mark.parametrize("name", sorted(VALUES))
@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_values_match_torch(name, dt):
    def conv(m):
        return lambda a: m.from_numpy(np.array(a.astype(dt) if a.dtype.kind == "c" else a))
    tr, er = VALUES[name](torch, conv(torch)), VALUES[name](ember, conv(ember))
    same_dtype(tr, er)
    assert tuple(tr.shape) == tuple(er.shape)
    tol = 1e-4 if dt is np.complex64 else 1e-10
    np.testing.assert_allclose(enp(er), tnp(tr), rtol=tol, atol=tol)


def test_allclose_equal_item_tolist():
    t, e = both(cz((2, 2)))
    assert ember.allclose(e, e + 1e-12) and ember.equal(e, e.clone()) and not ember.equal(e, e.conj())
    assert e.tolist() == t.tolist() and e[1, 0].item() == t[1, 0].item()


# ---------------------------------------------------------------------- gradients
def _loss(m, y):
    w = np.random.default_rng(7).standard_normal(tuple(y.shape) + ((2,) if y.is_complex() else ()))
    w = m.from_numpy(w)
    return ((m.view_as_real(y.resolve_conj()) if y.is_complex() else y) * w).sum()


GRADS = {
    "mul": ([cz((3, 4)), cz((3, 4))], lambda m, a, b: a * b),
    "mul_real": ([rz((3, 4)), cz((3, 4))], lambda m, a, b: a * b),
    "div": ([cz((3, 4)), cz((3, 4))], lambda m, a, b: a / b),
    "add_broadcast": ([cz((3, 4)), cz((4,))], lambda m, a, b: a + b * 2),
    "pow": ([cz((3, 4)), cz((3, 4))], lambda m, a, b: a ** b), "pow_scalar": ([cz((3, 4))], lambda m, a: a ** (0.5 + 1j)),
    "exp_log_sqrt": ([cz((3, 4))], lambda m, a: a.exp() + a.log() * a.sqrt()),
    "trig": ([cz((3, 4))], lambda m, a: a.sin() * a.cos() + a.tanh() + a.sigmoid()),
    "reciprocal_neg": ([cz((3, 4))], lambda m, a: -a.reciprocal() + 2 / a),
    "abs": ([cz((3, 4))], lambda m, a: a.abs()), "angle": ([cz((3, 4))], lambda m, a: a.angle()),
    "real_imag": ([cz((3, 4))], lambda m, a: a.real * 2 + a.imag ** 2), "conj": ([cz((3, 4))], lambda m, a: a.conj() * a),
    "sgn": ([cz((3, 4))], lambda m, a: a.sgn()), "var_std_norm": ([cz((3, 4))], lambda m, a: a.var(1) + a.std() + a.norm()),
    "view_as_real": ([cz((3, 4))], lambda m, a: m.view_as_real(a) ** 2),
    "view_as_complex": ([rz((3, 4, 2))], lambda m, a: m.view_as_complex(a) ** 2),
    "complex_polar": ([np.abs(rz((3, 4))) + 0.1, rz((3, 4))], lambda m, a, b: m.complex(a, b) * m.polar(a, b)),
    "reductions": ([cz((3, 4))], lambda m, a: a.sum(0) + a.mean(0) + a.prod(0) + a.cumsum(0)[1]),
    "matmul": ([cz((3, 4)), cz((4, 4))], lambda m, a, b: a @ b + m.einsum("ij,jk->ik", a, b)),
    "cast": ([rz((3, 4))], lambda m, a: a.to(m.complex128) * 1j),
    "mH_vdot": ([cz((4, 4)), cz((4,))], lambda m, a, b: a.mH[0] * m.vdot(b, a[1])),
    "inplace_part": ([cz((3, 4))], lambda m, a: _inplace_part(a)),
}


def _inplace_part(a):
    b = a * 1
    b.real.mul_(2)
    return b * b


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grads_match_torch(name):
    inputs, f = GRADS[name]
    tin = [torch.from_numpy(x.copy()).requires_grad_() for x in inputs]
    ein = [ember.from_numpy(x.copy()).requires_grad_() for x in inputs]
    tg = torch.autograd.grad(_loss(torch, f(torch, *tin)), tin)
    eg = ember.autograd.grad(_loss(ember, f(ember, *ein)), ein)
    for a, b in zip(tg, eg):
        same_dtype(a, b)
        np.testing.assert_allclose(enp(b), tnp(a), rtol=1e-8, atol=1e-10)


def test_abs_grad_is_zero_at_zero():
    z = ember.tensor([0j, 3 + 4j], dtype=ember.complex128, requires_grad=True)
    (g,) = ember.autograd.grad(z.abs().sum(), [z])
    assert g.tolist()[0] == 0j
    np.testing.assert_allclose(g.tolist()[1], 0.6 + 0.8j, rtol=1e-12)


def test_gradcheck_complex():
    z = ember.from_numpy(cz((3,))).requires_grad_()
    w = ember.from_numpy(cz((3,)))
    for f in (lambda z: z * w, lambda z: z.abs(), lambda z: z.exp().conj(), lambda z: z.angle(),
              lambda z: ember.view_as_real(z.sqrt())):
        assert ember.autograd.gradcheck(f, (z,))
