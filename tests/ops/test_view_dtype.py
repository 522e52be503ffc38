"""Tensor.view(dtype) (the op ``view_dtype``, ember/ops/dtype_view.py) against torch 2.13.

Random strided inputs (permuted, sliced with steps and offsets, expanded) of random bytes,
viewed as every dtype both libraries have: the outputs must agree byte for byte in shape,
strides, storage offset and dtype, and a rejected input must raise torch's error. Then the
view's aliasing (storage, version counter, ``_base``), autograd (never differentiable), the
argument parsing of ``Tensor.view``, fake/meta tensors and ``ember.compile``.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

import ember
from tests.fx.meta_check import check_meta

torch = pytest.importorskip("torch")

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
         "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"]


def _bytes(t):
    """A tensor's elements (logical order) as bytes, torch or ember."""
    if isinstance(t, torch.Tensor):
        if t.dtype == torch.bool:       # (a copy of a bool tensor writes its bytes as 0/1)
            t = t.view(torch.uint8)
        flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.reshape(-1))   # stride 1 even when 1 element
        return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return np.ascontiguousarray(t._data).tobytes()


def _make_pair(rng, name):
    """The same random-bytes tensor, made strided the same way, in torch and in ember."""
    tdt, edt = getattr(torch, name), getattr(ember, name)
    ndim = int(rng.integers(1, 4))
    base_shape = [int(rng.integers(1, 7)) for _ in range(ndim)]
    n = int(np.prod(base_shape))
    raw = rng.integers(0, 256, size=n * edt.itemsize, dtype=np.uint8)
    if name == "bool":
        raw = raw % 2
    data = raw.tobytes()
    t = torch.frombuffer(bytearray(data), dtype=tdt).reshape(base_shape)
    e = ember.tensor(np.frombuffer(data, dtype=edt.np).reshape(base_shape).copy())
    ops = []
    if ndim > 1 and rng.random() < 0.3:
        perm = [int(p) for p in rng.permutation(ndim)]
        ops.append(lambda x, p=perm: x.permute(*p))
    if rng.random() < 0.6:
        d = int(rng.integers(0, ndim))
        start = int(rng.integers(0, 4))
        step = int(rng.integers(1, 3))
        ops.append(lambda x, d=d, s=start, st=step: x[(slice(None),) * d + (slice(min(s, x.shape[d] - 1), None, st),)])
    if rng.random() < 0.1:
        ops.append(lambda x: x.unsqueeze(0).expand(2, *x.shape))
    if rng.random() < 0.1:
        ops.append(lambda x: x.reshape(-1)[0])     # a 0-dim tensor
    for op in ops:
        t, e = op(t), op(e)
    return t, e


def _compare(t, e, dst):
    try:
        r = t.view(getattr(torch, dst))
    except RuntimeError as err:
        with pytest.raises(RuntimeError) as got:
            e.view(getattr(ember, dst))
        assert str(got.value) == str(err).replace("torch.", "ember.")
        return False
    o = e.view(getattr(ember, dst))
    assert o.dtype is getattr(ember, dst)
    assert tuple(o.shape) == tuple(r.shape)
    if r.numel() > 1:
        assert o.stride() == r.stride(), (tuple(e.shape), e.stride(), dst)
    assert o.storage_offset() == r.storage_offset()
    assert _bytes(o) == _bytes(r)
    assert o._base is (e._base if e._base is not None else e)
    return True


@pytest.mark.parametrize("src", NAMES)
def test_random_strided_inputs_match_torch(src):
    rng = np.random.default_rng(1000 + NAMES.index(src))
    ok = bad = 0
    for _ in range(40):
        t, e = _make_pair(rng, src)
        assert _bytes(t) == _bytes(e)
        for dst in rng.choice(NAMES, size=3, replace=False):
            if _compare(t, e, str(dst)):
                ok += 1
            else:
                bad += 1
    assert ok > 20 and bad > 5      # both outcomes were exercised


@pytest.mark.parametrize("make, dst", [
    (lambda L: L.randn(2, 3), "float64"),               # size(-1) not divisible
    (lambda L: L.randn(4, 2).t(), "float64"),           # stride(-1) != 1
    (lambda L: L.randn(4, 2).t(), "float16"),
    (lambda L: L.randn(3, 3).t(), "float64"),           # size checked before stride
    (lambda L: L.randn(4, 4)[:, 1:3], "float64"),       # storage offset
    (lambda L: L.randn(3, 3)[:, 1:3], "float64"),       # offset checked before the other strides
    (lambda L: L.randn(4, 2, dtype=L.complex128).t(), "int64"),
    (lambda L: L.randn(3, 3)[:, :2], "float64"),        # stride(0) = 3
    (lambda L: L.randn(()), "float16"),                 # 0-dim
    (lambda L: L.randn(4, 3)[:, ::3], "float16"),       # size-1 last dim with stride 3
    (lambda L: L.randn(3, 1).expand(3, 4), "float16"),  # stride 0
    (lambda L: L.zeros(2, 0), "float64"),               # torch's strides of an empty tensor
    (lambda L: L.randn(3), "complex64"),
])
def test_rejected_geometries_raise_torch_errors(make, dst):
    with pytest.raises(RuntimeError) as want:
        make(torch).view(getattr(torch, dst))
    with pytest.raises(RuntimeError) as got:
        make(ember).view(getattr(ember, dst))
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("make, dst", [
    (lambda L: L.randn(4, 6)[:, 2:], "float64"),
    (lambda L: L.randn(6, 2)[::3], "float64"),
    (lambda L: L.randn(2, 3, 4).permute(1, 0, 2), "float64"),
    (lambda L: L.randn(2, 3, 4).permute(1, 0, 2), "int8"),
    (lambda L: L.randn(3).expand(2, 3), "float16"),
    (lambda L: L.randn(4, 2).t(), "int32"),
    (lambda L: L.zeros(0, 4), "float64"),
    (lambda L: L.zeros(4, 0), "float16"),
    (lambda L: L.randn(()), "int32"),
    (lambda L: L.randn(4, dtype=L.complex64), "float32"),
    (lambda L: L.randn(4, dtype=L.complex64), "int8"),
    (lambda L: L.randn(4, 2, dtype=L.complex128).t(), "complex128"),
    (lambda L: L.randn(3, 6)[::2, :4], "float64"),
])
def test_accepted_geometries_match_torch(make, dst):
    torch.manual_seed(0)
    t = make(torch)
    assert _compare(t, _same_geometry(t), dst)


def _same_geometry(t):
    """An ember tensor with ``t``'s storage bytes, shape, strides and storage offset."""
    n = t.untyped_storage().nbytes() // t.element_size()
    whole = t.as_strided((n,), (1,), 0)
    raw = np.frombuffer(_bytes(whole), dtype=getattr(ember, str(t.dtype).split(".")[1]).np).copy()
    return ember.as_strided(ember.tensor(raw), tuple(t.shape), tuple(t.stride()), t.storage_offset())


def test_python_types_and_keywords():
    x = ember.randn(3, 4)
    assert x.view(float).dtype is ember.float64          # torch reads float as double
    assert x.view(int).dtype is ember.int64 and x.view(int).shape == (3, 2)
    assert x.view(bool).shape == (3, 16)
    assert x.view(complex).dtype is ember.complex128
    assert x.view(dtype=ember.int32).dtype is ember.int32
    assert x.view(dtype=float).dtype is ember.float64
    assert x.view(size=[4, 3]).shape == (4, 3) and x.view(size=(12,)).shape == (12,)
    assert x.view(ember.Size([2, 6])).shape == (2, 6) and x.view([6, 2]).shape == (6, 2)
    assert x.view(np.int64(12)).shape == (12,) and x.view(ember.tensor(12)).shape == (12,)


@pytest.mark.parametrize("args, kwargs", [
    (("float16",), {}), ((np.float16,), {}), ((None,), {}), (("float16", 2), {}), ((2.0, 6), {}),
    (((2, 6), 1), {}), ((), {}), ((), {"size": 12}), ((), {"dtype": "float"}), ((), {"shape": (12,)}),
    (("dtype",), {"dtype": "x"}),
])
def test_invalid_combinations_raise_torch_type_error(args, kwargs):
    with pytest.raises(TypeError) as want:
        torch.zeros(3, 4).view(*args, **kwargs)
    with pytest.raises(TypeError) as got:
        ember.zeros(3, 4).view(*args, **kwargs)
    first = str(want.value).splitlines()[0].replace("torch.", "ember.")
    assert str(got.value).splitlines()[0] == first
    assert " * (ember.dtype dtype)" in str(got.value) and " * (tuple of ints size)" in str(got.value)


def test_dtype_with_other_arguments_is_refused_as_torch():
    for args in ((ember.float16, 2), (2, ember.float16)):
        with pytest.raises(TypeError, match=r"got \((ember.dtype, int|int, ember.dtype)\)"):
            ember.zeros(3, 4).view(*args)
    with pytest.raises(TypeError, match=r"got \(ember.dtype, dtype=ember.dtype\)"):
        ember.zeros(3, 4).view(ember.int32, dtype=ember.int32)


def test_shares_storage_version_counter_and_base():
    rng = np.random.default_rng(5)
    x = ember.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    y = x.view(ember.int32)
    assert y.data_ptr() == x.data_ptr() and y._base is x
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    y.add_(1)                               # one ulp up, through the int view
    assert x._version == y._version == 1
    t = torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    e = ember.tensor(t.numpy().copy())
    t.view(torch.int16)[:, 1::2].zero_()
    e.view(ember.int16)[:, 1::2].zero_()
    assert _bytes(t) == _bytes(e)
    # a view of a view has the first base
    z = x[1:].view(ember.int8)
    assert z._base is x and z.storage_offset() == 16 and z.shape == (2, 16)
    x.mul_(2)
    assert z._version == x._version == 2


@pytest.mark.parametrize("dst", ["float32", "int32", "float16", "float64", "complex64", "bfloat16"])
def test_autograd_never_differentiable(dst):
    t = torch.randn(3, 4, requires_grad=True)
    a = ember.tensor(t.detach().numpy(), requires_grad=True)
    r, o = t.view(getattr(torch, dst)), a.view(getattr(ember, dst))
    assert o.requires_grad == r.requires_grad == False      # noqa: E712
    assert o.grad_fn is None and r.grad_fn is None


def test_inplace_through_view_of_a_leaf_and_saved_version():
    a = ember.randn(3, 4, requires_grad=True)
    t = torch.tensor(a.detach().numpy(), requires_grad=True)
    a.view(ember.float32).add_(1)          # allowed: the view is not differentiable (as detach())
    t.view(torch.float32).add_(1)
    assert a._version == t._version == 1
    assert np.array_equal(a.detach().numpy(), t.detach().numpy())
    s, u = a.sin(), t.sin()
    a.view(ember.int32).add_(1)
    t.view(torch.int32).add_(1)
    with pytest.raises(RuntimeError) as want:
        u.sum().backward()
    with pytest.raises(RuntimeError) as got:
        s.sum().backward()
    assert "modified by an inplace operation" in str(want.value)
    assert "modified by an inplace operation" in str(got.value)


def test_bool_view_and_printing():
    e = ember.tensor([1, 0, 2], dtype=ember.uint8).view(ember.bool)
    t = torch.tensor([1, 0, 2], dtype=torch.uint8).view(torch.bool)
    assert repr(e) == repr(t).replace("torch", "ember")
    x = ember.tensor([1.0, -2.5, 3.25])
    assert repr(x.view(ember.int32)) == repr(torch.tensor([1.0, -2.5, 3.25]).view(torch.int32)).replace(
        "torch", "ember")


def test_limited_dtypes_and_quantized():
    x = ember.tensor([1.5, -2.0])
    assert x.view(ember.uint16).shape == (4,) and x.view(ember.float8_e4m3fn).shape == (8,)
    assert ember.equal(x.view(ember.uint32).view(ember.float32), x)
    with pytest.raises(NotImplementedError, match="quantized dtype"):
        x.view(ember.quint8)


def test_aten_op_and_schema():
    op = ember.ops.aten.view_dtype
    assert "ScalarType dtype" in str(op.default._schema)
    x = ember.randn(2, 4)
    assert op(x, ember.float64).shape == (2, 2)


def _views(x):
    return (x.view(ember.int32), x.view(ember.int8), x.t().view(ember.int32), x[:, 2:].view(ember.float64),
            x[1:, :4].view(ember.float16), x[0, 0].view(ember.int32))


def test_meta_function_matches_kernel():
    check_meta(_views, ember.randn(4, 6))
    check_meta(lambda x: x.view(ember.float32), ember.randn(3, 4, dtype=ember.complex64))


def test_meta_rejects_as_kernel():
    from ember.fx.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    f = mode.from_tensor(ember.randn(4, 6))
    with mode:
        for bad in (lambda: f[:, 1:].view(ember.float64), lambda: f.t().view(ember.float64),
                    lambda: f[:, :3].view(ember.float64)):
            with pytest.raises(RuntimeError, match="different element sizes"):
                bad()


def test_meta_device():
    m = ember.empty(3, 4, device="meta")
    o = m.view(ember.float16)
    assert o.device.type == "meta" and o.shape == (3, 8) and o.dtype is ember.float16
    with pytest.raises(RuntimeError, match="self.size\\(-1\\) must be divisible by 2"):
        ember.empty(3, 3, device="meta").view(ember.float64)


def test_symbolic_make_fx_runs_on_other_sizes():
    from ember.fx.experimental.proxy_tensor import make_fx

    def f(x):
        return (x.view(ember.int32) & 0xFFFF) + x.view(ember.int16)[..., ::2].to(ember.int32)
    gm = make_fx(f, tracing_mode="symbolic")(ember.randn(3, 4))
    assert "ember.ops.aten.view.dtype(" in gm.code       # torch's overload (node named view)
    for shape in ((3, 4), (5, 7), (2, 1)):
        x = ember.randn(*shape)
        assert ember.equal(gm(x), f(x))


def _compare_compiled(f, *inputs, close=False):
    ember.compiler.reset()
    eager_in = [x.clone() for x in inputs]
    comp_in = [x.clone() for x in inputs]
    want = f(*eager_in)
    got = ember.compile(f)(*comp_in)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        if close:
            assert ember.allclose(g, w)
        else:
            assert _bytes(g) == _bytes(w)
    for a, b in zip(eager_in, comp_in):
        assert _bytes(a) == _bytes(b)


def _mutate_through_view(x):
    y = x.view(ember.int32)
    y.add_(1)
    return x * 1


def _mutate_base_then_read_view(x):
    y = x.view(ember.int16)
    x.mul_(2)
    return y + 0


def _mutate_part_of_view(x):
    x.view(ember.int16)[:, :4].zero_()
    return x + 0


def _mixed(x):
    y = (x * 2).view(ember.int32)
    return (y & 0xFF) + 1, x.view(ember.float16) * 2, (x + 1).t().contiguous().view(ember.float64)


@pytest.mark.parametrize("f", [_mixed, _mutate_through_view, _mutate_base_then_read_view, _mutate_part_of_view,
                               lambda x: x.view(ember.int32), lambda x: x[:, 2:].view(ember.float64) + 1])
def test_compiled_matches_eager(f):
    _compare_compiled(f, ember.randn(4, 6))


def test_compiled_partial_element_write_runs_eagerly_with_a_reason(caplog):
    def f(x):
        x.view(ember.int16)[:, :3].zero_()
        return x + 0
    with caplog.at_level(logging.INFO):
        _compare_compiled(f, ember.randn(4, 6))
    assert any("dtype view" in r.getMessage() for r in caplog.records)


def test_compiled_fallback_is_logged(caplog):
    with caplog.at_level(logging.INFO, logger="ember.inductor"):
        _compare_compiled(lambda x: (x + 1).view(ember.int32) | 1, ember.randn(3, 4))
    assert any("view_dtype" in r.getMessage() for r in caplog.records)


def test_compiled_errors_as_eager():
    f = ember.compile(lambda x: x.view(ember.float64) * 2)
    for bad in (ember.randn(4, 6).t(), ember.randn(4, 6)[:, 1:5]):
        with pytest.raises(RuntimeError) as want:
            bad.view(ember.float64)
        with pytest.raises(RuntimeError) as got:
            f(bad)
        assert str(got.value) == str(want.value)


def test_compiled_with_grad():
    def f(x):
        return (x * 3).sum() + (x.view(ember.int32) & 1).sum()
    x = ember.randn(4, 6)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    f(a).backward()
    ember.compiler.reset()
    ember.compile(f)(b).backward()
    assert ember.equal(a.grad, b.grad)


def test_compiled_fullgraph_with_every_spelling():
    def f(x):
        return x.view(dtype=ember.int32) + 1, x.view(float) * 2, x.view(size=[4, 6]).view(ember.int16)
    ember.compiler.reset()
    x = ember.randn(6, 4)
    for got, want in zip(ember.compile(f, fullgraph=True)(x), f(x)):
        assert got.dtype == want.dtype and got.shape == want.shape and _bytes(got) == _bytes(want)
