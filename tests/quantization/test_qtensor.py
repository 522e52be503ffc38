"""Quantized tensors against torch 2.13: integers bit for bit, dequantized values, printing,
views and their quantizer bookkeeping, errors, ember.save/load."""
from __future__ import annotations

import io
import re
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")

QD = ("qint8", "quint8", "qint32")


def _t(arr):
    return torch.from_numpy(np.array(arr, copy=True))


def _e(arr):
    return ember.tensor(np.array(arr, copy=True))


def _rand(rng, shape, scale=3.0):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    return x


def _ties(rng, n, s):
    """Values exactly halfway between two integers after scaling (rounding mode matters)."""
    return ((rng.integers(-300, 300, n) + 0.5) * np.float32(s)).astype(np.float32)


def _check_same(eq, tq):
    assert eq.dtype.name == str(tq.dtype).replace("torch.", "")
    assert tuple(eq.shape) == tuple(tq.shape)
    np.testing.assert_array_equal(eq.int_repr().numpy(), tq.int_repr().numpy())
    assert eq.qscheme().name == str(tq.qscheme()).replace("torch.", "")
    if tq.qscheme() == torch.per_tensor_affine:
        assert eq.q_scale() == tq.q_scale() and eq.q_zero_point() == tq.q_zero_point()
    else:
        np.testing.assert_array_equal(eq.q_per_channel_scales().numpy(), tq.q_per_channel_scales().numpy())
        np.testing.assert_array_equal(eq.q_per_channel_zero_points().numpy(),
                                      tq.q_per_channel_zero_points().numpy())
        assert eq.q_per_channel_axis() == tq.q_per_channel_axis()
    np.testing.assert_array_equal(eq.dequantize().numpy(), tq.dequantize().numpy())
    # (the stride of a size-1 dimension is a convention: compared for the others)
    assert [s for s, n in zip(eq.stride(), eq.shape) if n > 1] == \
        [s for s, n in zip(tq.stride(), tq.shape) if n > 1]
    assert eq.is_contiguous() == tq.is_contiguous()


@pytest.mark.parametrize("dtype", QD)
@pytest.mark.parametrize("seed", range(3))
def test_per_tensor_bit_exact(dtype, seed):
    rng = np.random.default_rng(seed)
    s = float(rng.uniform(0.001, 0.2))
    zp = int(rng.integers(-20, 20)) + (128 if dtype == "quint8" else 0)
    x = np.concatenate([_rand(rng, 2000), _ties(rng, 500, s),
                        np.array([np.inf, -np.inf, 1e10, -1e10, 0.0, -0.0], np.float32)])
    x = x[rng.permutation(len(x))]
    eq = ember.quantize_per_tensor(_e(x), s, zp, getattr(ember, dtype))
    tq = torch.quantize_per_tensor(_t(x), s, zp, getattr(torch, dtype))
    _check_same(eq, tq)


@pytest.mark.parametrize("dtype", QD)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_per_channel_bit_exact(dtype, axis):
    rng = np.random.default_rng(axis)
    shape = (5, 6, 7)
    x = _rand(rng, shape)
    n = shape[axis]
    scales = rng.uniform(0.005, 0.1, n)
    zps = rng.integers(-10, 10, n) + (128 if dtype == "quint8" else 0)
    # plant ties for channel 0
    idx = [slice(None)] * 3
    idx[axis] = 0
    x[tuple(idx)] = _ties(rng, x[tuple(idx)].size, scales[0]).reshape(x[tuple(idx)].shape)
    eq = ember.quantize_per_channel(_e(x), _e(scales), _e(zps), axis, getattr(ember, dtype))
    tq = torch.quantize_per_channel(_t(x), _t(scales), _t(zps), axis, getattr(torch, dtype))
    _check_same(eq, tq)


def test_tensor_qparams_list_and_dynamic():
    rng = np.random.default_rng(7)
    x = _rand(rng, (4, 5))
    eq = ember.quantize_per_tensor(_e(x), ember.tensor(0.05), ember.tensor(3), ember.qint8)
    tq = torch.quantize_per_tensor(_t(x), torch.tensor(0.05), torch.tensor(3), torch.qint8)
    _check_same(eq, tq)
    el = ember.quantize_per_tensor([_e(x), _e(x[0])], ember.tensor([0.1, 0.2]), ember.tensor([1, 2]), ember.quint8)
    tl = torch.quantize_per_tensor([_t(x), _t(x[0])], torch.tensor([0.1, 0.2]), torch.tensor([1, 2]), torch.quint8)
    assert len(el) == len(tl)
    for a, b in zip(el, tl):
        _check_same(a, b)
    for a, b in zip(ember.dequantize(el), torch.dequantize(list(tl))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for dtype in ("qint8", "quint8"):
        for rr in (False, True):
            for sc in (3.0, 1e-6, 0.0):
                x = _rand(rng, (3, 50), sc) + (0.5 if sc == 3.0 and rr else 0.0)
                _check_same(ember.quantize_per_tensor_dynamic(_e(x), getattr(ember, dtype), rr),
                            torch.quantize_per_tensor_dynamic(_t(x), getattr(torch, dtype), rr))


def test_printing_matches_torch():
    rng = np.random.default_rng(1)
    cases = [
        (lambda m, x: m.quantize_per_tensor(x, 0.1, 3, m.qint8), (2, 3)),
        (lambda m, x: m.quantize_per_tensor(x, 0.05, 128, m.quint8), (3, 4, 5)),
        (lambda m, x: m.quantize_per_tensor(x[0, 0], 0.1, 3, m.qint32), (2, 2)),
        (lambda m, x: m.quantize_per_tensor(x[:0], 0.1, 3, m.qint8), (2, 3)),
        (lambda m, x: m.quantize_per_tensor(x, 0.02, 0, m.qint8), (40, 40)),
        (lambda m, x: m.quantize_per_channel(x, m.tensor([0.1, 0.2, 0.3], dtype=m.float64), m.tensor([1, 2, 3]),
                                             1, m.quint8), (2, 3)),
    ]
    for fn, shape in cases:
        x = _rand(rng, shape, 1.0)
        want = repr(fn(torch, _t(x))).replace("torch.", "ember.")
        got = repr(fn(ember, _e(x)))
        assert got == want
    assert repr(ember.per_tensor_affine) == "ember.per_tensor_affine"
    assert isinstance(ember.per_channel_symmetric, ember.qscheme)
    assert repr(ember.qint8) == "ember.qint8" and isinstance(ember.quint8, ember.dtype)
    assert ember.qint8.itemsize == torch.qint8.itemsize and ember.qint32.itemsize == torch.qint32.itemsize
    assert ember.qint8.is_floating_point is False


VIEWS = [
    ("view", lambda q: q.view(6, 4)), ("view-1", lambda q: q.view(-1)), ("reshape", lambda q: q.reshape(4, 6)),
    ("reshape_nc", lambda q: q.transpose(0, 2).reshape(-1)), ("flatten", lambda q: q.flatten()),
    ("flatten1", lambda q: q.flatten(1)), ("transpose", lambda q: q.transpose(0, 2)),
    ("permute", lambda q: q.permute(2, 0, 1)), ("select", lambda q: q.select(1, 2)), ("slice", lambda q: q[:, 1:]),
    ("step", lambda q: q[:, ::2, 1]), ("ellipsis", lambda q: q[..., None, 0]), ("neg", lambda q: q[-1]),
    ("contig", lambda q: q.transpose(0, 2).contiguous()), ("narrow", lambda q: q.narrow(1, 0, 2)),
    ("t", lambda q: q[0].t()), ("mT", lambda q: q.mT), ("unsqueeze", lambda q: q.unsqueeze(1)),
    ("squeeze", lambda q: q[:, :1].squeeze(1)), ("clone", lambda q: q[:, 1].clone()), ("detach", lambda q: q.detach()),
    ("fancy", lambda q: q[[1, 0, 1]]), ("chunk", lambda q: q.chunk(2, 2)[1]), ("unbind", lambda q: q.unbind(1)[2]),
    ("relu", lambda q: q.relu()),
]
PC_VIEWS = [
    ("view", lambda q: q.view(2, 3, 2, 2)), ("reshape", lambda q: q.reshape(2, 3, 4)), ("sel_axis", lambda q: q.select(1, 2)),
    ("sel0", lambda q: q.select(0, 1)), ("slice_axis", lambda q: q[:, 1:]), ("none", lambda q: q[None]), ("unsqueeze", lambda q: q.unsqueeze(0)),
    ("squeeze", lambda q: q.unsqueeze(0).squeeze()), ("clone", lambda q: q.clone()), ("narrow", lambda q: q.narrow(1, 0, 2)),
]
# torch 2.13 keeps a stale channel axis here (select/index before the axis: q[0] keeps axis=1 on a
# 2-d result; select after it moves the axis to 0): ember's axis follows the dimensions, checked
# against the same view of the dequantized tensor
PC_TORCH_WRONG = [("idx0_self", lambda q: q[0]), ("sel2_self", lambda q: q.select(2, 1)),
                  ("idx_ellipsis", lambda q: q[..., 1:3]), ("none_mid", lambda q: q[:, None, :, 1])]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_per_tensor(name, fn):
    x = _rand(np.random.default_rng(3), (2, 3, 4))
    eq = fn(ember.quantize_per_tensor(_e(x), 0.1, 3, ember.qint8))
    tq = fn(torch.quantize_per_tensor(_t(x), 0.1, 3, torch.qint8))
    _check_same(eq, tq)


@pytest.mark.parametrize("name,fn", PC_VIEWS, ids=[v[0] for v in PC_VIEWS])
def test_views_per_channel(name, fn):
    rng = np.random.default_rng(4)
    x = _rand(rng, (2, 3, 4))
    sc, zp = rng.uniform(0.01, 0.1, 3), rng.integers(-5, 5, 3)
    eq = fn(ember.quantize_per_channel(_e(x), _e(sc), _e(zp), 1, ember.qint8))
    tq = fn(torch.quantize_per_channel(_t(x), _t(sc), _t(zp), 1, torch.qint8))
    _check_same(eq, tq)


@pytest.mark.parametrize("name,fn", PC_VIEWS + PC_TORCH_WRONG, ids=[v[0] for v in PC_VIEWS + PC_TORCH_WRONG])
def test_views_per_channel_consistent(name, fn):
    rng = np.random.default_rng(8)
    x = _rand(rng, (2, 3, 4))
    q = ember.quantize_per_channel(_e(x), _e(rng.uniform(0.01, 0.1, 3)), _e(rng.integers(-5, 5, 3)), 1, ember.qint8)
    if name == "relu":
        return
    v = fn(q)
    np.testing.assert_array_equal(v.dequantize().numpy(), fn(q.dequantize()).numpy())
    np.testing.assert_array_equal(v.int_repr().numpy(), fn(q.int_repr()).numpy())


FUNCS = [("flatten", lambda m, q: m.flatten(q, 1)), ("relu", lambda m, q: m.relu(q)),
         ("nn.ReLU", lambda m, q: m.nn.ReLU()(q)), ("F.relu", lambda m, q: m.nn.functional.relu(q)),
         ("transpose", lambda m, q: m.transpose(q, 0, 2)), ("reshape", lambda m, q: m.reshape(q, (-1, 4))),
         ("squeeze", lambda m, q: m.squeeze(q[:, :1], 1)), ("unsqueeze", lambda m, q: m.unsqueeze(q, 0)),
         ("select", lambda m, q: m.select(q, 1, 0)), ("narrow", lambda m, q: m.narrow(q, 2, 1, 2)),
         ("narrow_neg", lambda m, q: m.narrow(q, 1, -2, 2)), ("clone", lambda m, q: m.clone(q)),
         ("permute", lambda m, q: m.permute(q, (2, 0, 1))), ("t", lambda m, q: m.t(q[0])),
         ("split", lambda m, q: m.split(q, 1, 1)[1]), ("chunk", lambda m, q: m.chunk(q, 2, 2)[0]),
         ("unbind", lambda m, q: m.unbind(q, 0)[1])]


@pytest.mark.parametrize("name,fn", FUNCS, ids=[f[0] for f in FUNCS])
def test_top_level_functions(name, fn):
    x = _rand(np.random.default_rng(13), (2, 3, 4))
    _check_same(fn(ember, ember.quantize_per_tensor(_e(x), 0.1, 3, ember.qint8)),
                fn(torch, torch.quantize_per_tensor(_t(x), 0.1, 3, torch.qint8)))


def test_views_share_memory_and_version():
    q = ember.quantize_per_tensor(ember.randn(3, 4), 0.1, 0, ember.qint8)
    v = q[1]
    assert v._base is q and v.data_ptr() == q.data_ptr() + 4 and v.storage_offset() == 4
    assert q.clone().data_ptr() != q.data_ptr()
    assert q.is_quantized and not ember.randn(2).is_quantized
    assert len(q) == 3 and [tuple(r.shape) for r in q] == [(4,)] * 3
    assert q[0, 0].item() == float(q.dequantize()[0, 0])


def _msg(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None, None


def _first_sentence(m):
    return re.sub(r"'aten::(\w+)(\.\w+)?'", r"'aten::\1'", m.split(". ")[0])


def test_errors_match_torch():
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    e = {"q": ember.quantize_per_tensor(_e(x), 0.1, 0, ember.qint8), "x": _e(x), "m": ember}
    t = {"q": torch.quantize_per_tensor(_t(x), 0.1, 0, torch.qint8), "x": _t(x), "m": torch}
    exact = [lambda d: d["q"] + 1, lambda d: 2 * d["q"], lambda d: d["q"] - 1.5, lambda d: d["q"] / 2,
             lambda d: d["q"] + d["x"], lambda d: d["x"] * d["q"], lambda d: d["q"].float(),
             lambda d: d["q"].numpy(), lambda d: d["q"].tolist(), lambda d: d["q"].requires_grad_(),
             lambda d: d["q"].transpose(0, 1).view(-1), lambda d: d["q"].q_per_channel_scales(),
             lambda d: d["m"].quantize_per_tensor(d["x"], 0.1, 300, d["m"].qint8),
             lambda d: d["m"].quantize_per_tensor(d["x"], 0.1, -1, d["m"].quint8),
             lambda d: d["m"].quantize_per_tensor(d["x"], 0.1, 0, d["m"].float32),
             lambda d: d["m"].quantize_per_tensor(d["x"].double(), 0.1, 0, d["m"].qint8),
             lambda d: d["m"].quantize_per_channel(d["x"], d["m"].ones(3), d["m"].zeros(3, dtype=d["m"].long), 2,
                                                   d["m"].qint8),
             lambda d: d["m"].quantize_per_channel(d["x"], d["m"].ones(2), d["m"].zeros(2, dtype=d["m"].long), 1,
                                                   d["m"].qint8),
             lambda d: d["m"].quantize_per_tensor_dynamic(d["x"], d["m"].qint32, False)]
    for f in exact:
        te, tm = _msg(lambda: f(t))
        ee, em = _msg(lambda: f(e))
        assert (ee, em) == (te, tm)
    for f in (lambda d: d["q"] + d["q"], lambda d: d["q"].exp(), lambda d: d["m"].exp(d["q"]),
              lambda d: d["q"].sum(), lambda d: d["q"] @ d["q"].t(), lambda d: d["x"].q_scale(),
              lambda d: d["x"].int_repr()):
        te, tm = _msg(lambda: f(t))
        ee, em = _msg(lambda: f(e))
        assert ee == te and _first_sentence(em) == _first_sentence(tm), (em, tm)
    # torch runs these; ember says clearly that it does not
    for f in (lambda: e["q"].repeat(2, 1),):
        with pytest.raises(NotImplementedError, match="ember.quantization"):
            f()
    with pytest.raises(NotImplementedError, match="assigning into a quantized tensor"):
        e["q"][0] = 1.0
    with pytest.raises(NotImplementedError, match="quint4x2"):
        ember.quantize_per_tensor(e["x"], 0.1, 0, ember.quint4x2)
    assert e["x"].dequantize() is e["x"]


def test_save_load_roundtrip(tmp_path):
    rng = np.random.default_rng(6)
    x = _rand(rng, (3, 4))
    q1 = ember.quantize_per_tensor(_e(x), 0.07, 5, ember.quint8)
    q2 = ember.quantize_per_channel(_e(x), _e(rng.uniform(0.01, 0.1, 4)), _e(rng.integers(-3, 3, 4)), 1, ember.qint8)
    q3 = q1.transpose(0, 1)[1:]
    buf = io.BytesIO()
    ember.save({"a": q1, "b": q2, "c": q3, "dt": ember.qint32}, buf)
    buf.seek(0)
    r = ember.load(buf)
    for k, q in (("a", q1), ("b", q2), ("c", q3)):
        assert r[k].equal(q) and repr(r[k]) == repr(q)
    assert r["dt"] is ember.qint32
