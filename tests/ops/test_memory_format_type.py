"""ember.memory_format (ember/_memory_format.py): the type of contiguous_format / preserve_format /
channels_last / channels_last_3d, its string compatibility, and channels_last_3d wherever
channels_last works -- strides, contiguity and errors against torch 2.13."""
import pickle

import numpy as np
import pytest

import ember

NAMES = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32) + 0.25


def _shapes(rng, rank, n=4):
    out = [tuple(int(s) for s in rng.integers(1, 5, size=rank)) for _ in range(n)]
    out.append((2, 3) + (1,) * (rank - 2))            # size-1 spatial dims: torch's edge cases
    out.append((1, 3) + (2,) * (rank - 2))
    return out


# ---------------------------------------------------------------------- the type
def test_type_repr_and_identity():
    for n in NAMES:
        v = getattr(ember, n)
        assert isinstance(v, ember.memory_format)
        assert type(v) is ember.memory_format
        assert repr(v) == str(v) == f"ember.{n}"
        assert v == v and v is getattr(ember, n)
    assert repr(ember.memory_format) == "<class 'ember.memory_format'>"
    assert ember.channels_last != ember.channels_last_3d
    assert len({getattr(ember, n) for n in NAMES}) == 4


def test_repr_matches_torch_modulo_prefix():
    torch = pytest.importorskip("torch")
    for n in NAMES:
        assert repr(getattr(ember, n)).replace("ember.", "torch.") == repr(getattr(torch, n))


def test_string_compatibility():
    # ember's kernels compare with the names; user code passing the names keeps working
    for n in NAMES:
        v = getattr(ember, n)
        assert v == n and n == v and not (v != n)
        assert v in (n,) and {n: 1}[v] == 1 and {v: 2}[n] == 2
        assert hash(v) == hash(n)
    assert ember.channels_last != "contiguous_format"
    assert ember.channels_last != 3


def test_pickle_round_trip():
    for n in NAMES:
        v = getattr(ember, n)
        assert pickle.loads(pickle.dumps(v)) is v


# ---------------------------------------------------------------------- layouts vs torch
@pytest.mark.parametrize("rank,mf", [(4, "channels_last"), (5, "channels_last_3d")])
def test_clone_contiguous_to_empty_like_strides_vs_torch(rank, mf):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(rank)
    for shape in _shapes(rng, rank):
        a = _rand(rng, shape)
        e, t = ember.tensor(a), torch.tensor(a)
        em, tm = getattr(ember, mf), getattr(torch, mf)
        for fn in (lambda x, m: x.clone(memory_format=m), lambda x, m: x.contiguous(memory_format=m),
                   lambda x, m: x.to(memory_format=m), lambda x, m: x.to(torch.float64 if m is tm else ember.float64,
                                                                         memory_format=m)):
            re, rt = fn(e, em), fn(t, tm)
            assert re.stride() == rt.stride(), (shape, re.stride(), rt.stride())
            assert np.allclose(re.numpy(), rt.numpy())
            assert re.is_contiguous(memory_format=em) == rt.is_contiguous(memory_format=tm)
            assert re.is_contiguous() == rt.is_contiguous()
        for fn in ("empty_like", "zeros_like", "ones_like", "rand_like", "randn_like"):
            re = getattr(ember, fn)(e, memory_format=em)
            rt = getattr(torch, fn)(t, memory_format=tm)
            assert re.stride() == rt.stride(), (fn, shape)
        re = ember.full_like(e, 2.5, memory_format=em)
        rt = torch.full_like(t, 2.5, memory_format=tm)
        assert re.stride() == rt.stride() and np.array_equal(re.numpy(), rt.numpy())
        assert ember.empty(shape, memory_format=em).stride() == torch.empty(shape, memory_format=tm).stride()
        assert ember.empty(*shape, memory_format=em).stride() == torch.empty(*shape, memory_format=tm).stride()


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_is_contiguous_memory_format_vs_torch(rank):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10 + rank)
    import itertools
    for shape in _shapes(rng, rank, 3):
        a = _rand(rng, shape)
        for perm in itertools.islice(itertools.permutations(range(rank)), 0, 24, 5):
            e = ember.tensor(a).permute(*perm)
            t = torch.tensor(a).permute(*perm)
            for n in NAMES:
                assert e.is_contiguous(memory_format=getattr(ember, n)) == \
                    t.is_contiguous(memory_format=getattr(torch, n)), (shape, perm, n)
            e2 = ember.tensor(a)[..., ::2]
            t2 = torch.tensor(a)[..., ::2]
            for n in NAMES:
                assert e2.is_contiguous(memory_format=getattr(ember, n)) == \
                    t2.is_contiguous(memory_format=getattr(torch, n))


def test_to_and_contiguous_alias_rules_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a = _rand(rng, (2, 3, 4, 3, 5))
    e5 = ember.tensor(a).contiguous(memory_format=ember.channels_last_3d)
    t5 = torch.tensor(a).contiguous(memory_format=torch.channels_last_3d)
    assert (e5.to(memory_format=ember.channels_last_3d) is e5) == (t5.to(memory_format=torch.channels_last_3d) is t5)
    assert (e5.contiguous(memory_format=ember.channels_last_3d) is e5) == \
        (t5.contiguous(memory_format=torch.channels_last_3d) is t5)
    assert e5.clone().stride() == t5.clone().stride()                    # preserve_format keeps NDHWC
    assert ember.zeros_like(e5).stride() == torch.zeros_like(t5).stride()
    e4, t4 = ember.tensor(a[:, :, 0]), torch.tensor(a[:, :, 0])
    assert (e4.to(memory_format=ember.contiguous_format) is e4) == (t4.to(memory_format=torch.contiguous_format) is t4)
    assert (e4.to(memory_format=ember.preserve_format) is e4) == (t4.to(memory_format=torch.preserve_format) is t4)
    assert e4.contiguous(memory_format=ember.preserve_format) is e4
    p_e, p_t = e4.permute(0, 2, 3, 1), t4.permute(0, 2, 3, 1)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
        p_e.contiguous(memory_format=ember.preserve_format)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported by the contiguous operator"):
        p_t.contiguous(memory_format=torch.preserve_format)


def test_rank_errors_vs_torch():
    torch = pytest.importorskip("torch")
    e4, t4 = ember.randn(2, 3, 4, 3), torch.randn(2, 3, 4, 3)
    e5, t5 = ember.randn(2, 3, 4, 3, 1), torch.randn(2, 3, 4, 3, 1)
    cases = [
        (lambda m, x4, x5: x4.contiguous(memory_format=m.channels_last_3d), "required rank 5 tensor to use channels_last_3d format"),
        (lambda m, x4, x5: x5.contiguous(memory_format=m.channels_last), "required rank 4 tensor to use channels_last format"),
        (lambda m, x4, x5: x4.clone(memory_format=m.channels_last_3d), "required rank 5 tensor to use channels_last_3d format"),
        (lambda m, x4, x5: x4.to(memory_format=m.channels_last_3d), "required rank 5 tensor to use channels_last_3d format"),
        (lambda m, x4, x5: m.empty_like(x4, memory_format=m.channels_last_3d),
         "required rank 5 tensor to use channels_last_3d format"),
        (lambda m, x4, x5: m.empty((2, 3, 4), memory_format=m.channels_last_3d),
         "required rank 5 tensor to use channels_last_3d format"),
    ]
    for fn, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            fn(ember, e4, e5)
        with pytest.raises(RuntimeError, match=msg):
            fn(torch, t4, t5)
    with pytest.raises(TypeError, match="memory_format"):
        e4.to(memory_format=3)
    with pytest.raises(TypeError):
        t4.to(memory_format=3)


def test_gradient_through_channels_last_3d_clone_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    a = _rand(rng, (2, 3, 2, 3, 2))
    g = _rand(rng, (2, 3, 2, 3, 2))
    e = ember.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    (e.contiguous(memory_format=ember.channels_last_3d) * ember.tensor(g)).sum().backward()
    (t.contiguous(memory_format=torch.channels_last_3d) * torch.tensor(g)).sum().backward()
    assert np.allclose(e.grad.numpy(), t.grad.numpy())


def test_fake_tensor_meta_matches_eager():
    from ember.fx.fake_tensor import FakeTensorMode
    shape = (2, 3, 4, 3, 5)
    eager = ember.randn(*shape).clone(memory_format=ember.channels_last_3d)
    with FakeTensorMode():
        f = ember.empty(*shape).clone(memory_format=ember.channels_last_3d)
        assert f.stride() == eager.stride()
        assert f.is_contiguous(memory_format=ember.channels_last_3d)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_treats_memory_format_as_constant(backend):
    def f(x):
        return x.contiguous(memory_format=ember.channels_last_3d) * 2

    x = ember.randn(2, 3, 4, 3, 2)
    r = ember.compile(f, backend=backend, fullgraph=True)(x)
    assert r.stride() == f(x).stride() and ember.allclose(r, x * 2)


def test_string_arguments_still_accepted():
    x = ember.randn(2, 3, 4, 5)
    assert x.contiguous(memory_format="channels_last").stride() == \
        x.contiguous(memory_format=ember.channels_last).stride()
    assert x.clone(memory_format="contiguous_format").is_contiguous()


def test_module_to_memory_format_vs_torch():
    torch = pytest.importorskip("torch")
    for m in (ember, torch):
        c = m.nn.Conv2d(3, 4, 3)
        w = c.weight
        assert c.to(memory_format=m.channels_last) is c
        assert c.weight is w                                  # the Parameter object is kept
        assert c.weight.stride() == (27, 1, 9, 3) and c.bias.stride() == (1,)
        assert c.weight.is_contiguous(memory_format=m.channels_last)
        c3 = m.nn.Conv3d(3, 4, 3).to(m.float64, memory_format=m.channels_last_3d)
        assert c3.weight.stride() == (81, 1, 27, 9, 3) and c3.weight.dtype is m.float64
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            m.nn.Conv3d(3, 4, 3).to(memory_format=m.channels_last)
