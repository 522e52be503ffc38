"""Top-level functions ember lacked (ember/ops/top_level_gaps.py, ember/amp/autocast_mode.py):
values, gradients and errors against torch 2.13."""
import warnings

import numpy as np
import pytest

import ember


def _pair(torch, a, requires_grad=False):
    return ember.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def _close(e, t, **kw):
    return np.allclose(e.detach().numpy(), t.detach().numpy(), **kw)


# ---------------------------------------------------------------------- detach_ and *_copy
def test_detach_():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(4).astype(np.float32)
    e = ember.tensor(a, requires_grad=True) * 2
    t = torch.tensor(a, requires_grad=True) * 2
    assert ember.detach_(e) is e and torch.detach_(t) is t
    assert e.grad_fn is None and not e.requires_grad and t.grad_fn is None and not t.requires_grad
    v_e, v_t = ember.randn(3, requires_grad=True)[1:], torch.randn(3, requires_grad=True)[1:]
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        ember.detach_(v_e)
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        torch.detach_(v_t)
    with pytest.raises(TypeError, match="must be Tensor"):
        ember.detach_(3)


def test_view_copy_variants_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    for _ in range(3):
        shape = tuple(int(s) for s in rng.integers(1, 4, size=2))
        c = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        r = rng.standard_normal(shape + (2,)).astype(np.float32)
        for name, arr in (("view_as_real_copy", c), ("view_as_complex_copy", r), ("_conj_copy", c),
                          ("_neg_view_copy", c)):
            e, t = _pair(torch, arr)
            re, rt = getattr(ember, name)(e), getattr(torch, name)(t)
            assert re.dtype.name == str(rt.dtype).split(".")[1] and re.shape == rt.shape
            assert _close(re, rt) and re.is_contiguous()
            assert re.untyped_storage().data_ptr() != e.untyped_storage().data_ptr()     # a copy
        e, t = _pair(torch, rng.standard_normal(6).astype(np.float32))
        assert _close(ember._reshape_alias_copy(e, (2, 3), (3, 1)), torch._reshape_alias_copy(t, (2, 3), (3, 1)))
    # view_as_complex_copy needs what view_as_complex needs
    e, t = _pair(torch, np.ones((1, 2), np.float32))
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
        ember.view_as_complex_copy(e.t())
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
        torch.view_as_complex_copy(t.t())


def test_view_as_real_copy_gradient_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    c = (rng.standard_normal(3) + 1j * rng.standard_normal(3)).astype(np.complex64)
    g = rng.standard_normal((3, 2)).astype(np.float32)
    e, t = _pair(torch, c, True)
    (ember.view_as_real_copy(e) * ember.tensor(g)).sum().backward()
    (torch.view_as_real_copy(t) * torch.tensor(g)).sum().backward()
    assert _close(e.grad, t.grad)


# ---------------------------------------------------------------------- in-place ATen spellings
@pytest.mark.parametrize("name", ["dropout_", "alpha_dropout_", "feature_alpha_dropout_", "feature_dropout_"])
def test_inplace_dropouts(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 3, 5)).astype(np.float32) + 0.5
    for p, train in ((0.3, False), (0.0, True)):
        e, t = _pair(torch, a)
        assert getattr(ember, name)(e, p, train) is e and getattr(torch, name)(t, p, train) is t
        assert _close(e, t)
    e = ember.tensor(a)
    out = getattr(ember, name)(e, 0.5, True)
    assert out is e and not np.allclose(e.numpy(), a)          # changed in place
    if name in ("dropout_", "feature_dropout_"):
        kept = e.numpy() != 0
        assert np.allclose(e.numpy()[kept], (a * 2)[kept], rtol=1e-6)
        if name == "feature_dropout_":                         # whole channels
            assert all(np.all(kept[i, j]) or not np.any(kept[i, j]) for i in range(4) for j in range(3))
    leaf_e = ember.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        getattr(ember, name)(leaf_e, 0.5, True)


def test_rrelu_as_strided_addmv_inplace_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a = rng.standard_normal(8).astype(np.float32)
    e, t = _pair(torch, a)
    assert ember.rrelu_(e, 0.1, 0.3, False) is e and torch.rrelu_(t, 0.1, 0.3, False) is t
    assert _close(e, t)
    e = ember.tensor(a)
    ember.rrelu_(e, 0.1, 0.3, True)
    neg = a < 0
    ratio = e.numpy()[neg] / a[neg]
    assert np.all((ratio >= 0.1 - 1e-6) & (ratio <= 0.3 + 1e-6)) and np.array_equal(e.numpy()[~neg], a[~neg])
    e, t = _pair(torch, a)
    assert ember.as_strided_(e, (2, 3), (3, 1), 1) is e and torch.as_strided_(t, (2, 3), (3, 1), 1) is t
    assert _close(e, t) and e.storage_offset() == t.storage_offset() == 1
    m = rng.standard_normal((3, 4)).astype(np.float32)
    v = rng.standard_normal(4).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    e, t = _pair(torch, b)
    assert ember.addmv_(e, ember.tensor(m), ember.tensor(v), beta=0.5, alpha=2) is e
    torch.addmv_(t, torch.tensor(m), torch.tensor(v), beta=0.5, alpha=2)
    assert _close(e, t, atol=1e-5)


# ---------------------------------------------------------------------- embedding_bag
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_bag_four_results_vs_torch(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    for draw in range(4):
        n_rows, dim = 10, int(rng.integers(1, 4))
        w = rng.standard_normal((n_rows, dim)).astype(dtype)
        idx = rng.integers(0, n_rows, size=int(rng.integers(3, 9))).astype(np.int64)
        cuts = np.sort(rng.integers(0, len(idx) + 1, size=2))
        offs = np.concatenate([[0], cuts]).astype(np.int64)
        for mode in (0, 1, 2):
            for include_last in (False, True):
                # (with include_last_offset the last offset is the number of indices, as documented)
                o = np.concatenate([offs, [len(idx)]]) if include_last else offs
                for padding_idx in (None, int(idx[0]), -1):
                    args = (False, mode, False, None, include_last, padding_idx)
                    re = ember.embedding_bag(ember.tensor(w), ember.tensor(idx), ember.tensor(o), *args)
                    rt = torch.embedding_bag(torch.tensor(w), torch.tensor(idx), torch.tensor(o), *args)
                    for i, (x, y) in enumerate(zip(re, rt)):
                        assert x.shape == tuple(y.shape), (draw, mode, include_last, padding_idx, i)
                        assert _close(x, y, atol=1e-6), (draw, mode, include_last, padding_idx, i, x, y)


def test_embedding_bag_gradient_and_errors_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    idx, offs = np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2, 2])
    psw = rng.standard_normal(6).astype(np.float32)
    for mode, weights in ((0, psw), (1, None), (2, None)):
        we, wt = _pair(torch, w, True)
        re = ember.embedding_bag(we, ember.tensor(idx), ember.tensor(offs), False, mode, False,
                                 None if weights is None else ember.tensor(weights))
        rt = torch.embedding_bag(wt, torch.tensor(idx), torch.tensor(offs), False, mode, False,
                                 None if weights is None else torch.tensor(weights))
        assert _close(re[0], rt[0])
        re[0].pow(2).sum().backward()
        rt[0].pow(2).sum().backward()
        assert _close(we.grad, wt.grad, atol=1e-5)
    with pytest.raises(RuntimeError, match="per_sample_weights only supported with mode='sum'"):
        ember.embedding_bag(ember.tensor(w), ember.tensor(idx), ember.tensor(offs), False, 1, False,
                            ember.tensor(psw))
    with pytest.raises(RuntimeError, match="per_sample_weights only supported with mode='sum'"):
        torch.embedding_bag(torch.tensor(w), torch.tensor(idx), torch.tensor(offs), False, 1, False,
                            torch.tensor(psw))
    with pytest.raises(TypeError, match="argument 'offsets' \\(position 3\\) must be Tensor, not NoneType"):
        ember.embedding_bag(ember.tensor(w), ember.tensor(idx), None)
    with pytest.raises(TypeError, match="argument 'offsets' \\(position 3\\) must be Tensor, not NoneType"):
        torch.embedding_bag(torch.tensor(w), torch.tensor(idx), None)


# ---------------------------------------------------------------------- conv_tbc
def test_conv_tbc_values_and_gradients_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    for _ in range(4):
        T, B, Ci, Co, K = (int(v) for v in rng.integers(1, 5, size=5))
        T += K
        pad = int(rng.integers(0, 3))
        x = rng.standard_normal((T, B, Ci)).astype(np.float32)
        w = rng.standard_normal((K, Ci, Co)).astype(np.float32)
        b = rng.standard_normal(Co).astype(np.float32)
        xe, xt = _pair(torch, x, True)
        we, wt = _pair(torch, w, True)
        be, bt = _pair(torch, b, True)
        re, rt = ember.conv_tbc(xe, we, be, pad), torch.conv_tbc(xt, wt, bt, pad)
        assert re.shape == tuple(rt.shape) and _close(re, rt, atol=1e-5)
        g = rng.standard_normal(tuple(rt.shape)).astype(np.float32)
        (re * ember.tensor(g)).sum().backward()
        (rt * torch.tensor(g)).sum().backward()
        for a, c in ((xe, xt), (we, wt), (be, bt)):
            assert _close(a.grad, c.grad, atol=1e-4)


def test_conv_tbc_errors_vs_torch():
    torch = pytest.importorskip("torch")
    cases = [((5, 2, 3), (2, 4, 4), (4,), "Input dim 2 \\(input channels\\) is not == dim 1 in the weight tensor"),
             ((5, 2), (2, 4, 4), (4,), "Input must have 3 dims: time, batch, in_channel"),
             ((5, 2, 3), (2, 3, 4), (5,), "Bias size must equal dim 2 in the weight tensor \\(output channels\\)")]
    for xs, ws, bs, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            ember.conv_tbc(ember.randn(*xs), ember.randn(*ws), ember.randn(*bs))
        with pytest.raises(RuntimeError, match=msg):
            torch.conv_tbc(torch.randn(*xs), torch.randn(*ws), torch.randn(*bs))


# ---------------------------------------------------------------------- norms
def test_norm_except_dim_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    for _ in range(4):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 4))))
        a = rng.standard_normal(shape).astype(np.float32)
        for pw in (2, 3, 1):
            for dim in [-1] + list(range(len(shape))):
                e, t = _pair(torch, a, True)
                re, rt = ember.norm_except_dim(e, pw, dim), torch.norm_except_dim(t, pw, dim)
                assert re.shape == tuple(rt.shape) and _close(re, rt, atol=1e-5), (shape, pw, dim)
                re.sum().backward()
                rt.sum().backward()
                assert _close(e.grad, t.grad, atol=1e-4)


def test_native_norm_raises_like_torch():
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError, match="aten::native_norm"):
        torch.native_norm(torch.tensor([3., 4.]))
    with pytest.raises(NotImplementedError, match="aten::native_norm"):
        ember.native_norm(ember.tensor([3., 4.]))
    with pytest.raises(NotImplementedError, match="native_norm.ScalarOpt_dim_dtype"):
        ember.native_norm(ember.tensor([3., 4.]), 2, [0], False, None)


# ---------------------------------------------------------------------- segment_reduce
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_vs_torch(reduce):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(abs(hash(reduce)) % 2**32)
    for _ in range(4):
        n = int(rng.integers(2, 8))
        lens = rng.multinomial(n, np.ones(4) / 4)             # some segments empty
        data = rng.standard_normal((n, 2)).astype(np.float64)
        offs = np.concatenate([[0], np.cumsum(lens)])
        for kw in ({"lengths": lens}, {"offsets": offs}):
            for initial in (None, 0.5):
                re = ember.segment_reduce(ember.tensor(data), reduce, initial=initial,
                                          **{k: ember.tensor(v) for k, v in kw.items()})
                rt = torch.segment_reduce(torch.tensor(data), reduce, initial=initial,
                                          **{k: torch.tensor(v) for k, v in kw.items()})
                assert re.shape == tuple(rt.shape)
                assert np.allclose(re.numpy(), rt.numpy(), equal_nan=True), (reduce, kw, initial)
        # axis 1 with per-row lengths
        data2 = rng.standard_normal((3, n)).astype(np.float64)
        lens2 = np.stack([rng.multinomial(n, np.ones(3) / 3) for _ in range(3)])
        re = ember.segment_reduce(ember.tensor(data2), reduce, lengths=ember.tensor(lens2), axis=1)
        rt = torch.segment_reduce(torch.tensor(data2), reduce, lengths=torch.tensor(lens2), axis=1)
        assert np.allclose(re.numpy(), rt.numpy(), equal_nan=True)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_segment_reduce_gradient_vs_torch(reduce):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    data = rng.standard_normal(7).astype(np.float64)
    lens = np.array([2, 3, 2])
    e, t = _pair(torch, data, True)
    ember.segment_reduce(e, reduce, lengths=ember.tensor(lens)).sum().backward()
    torch.segment_reduce(t, reduce, lengths=torch.tensor(lens)).sum().backward()
    assert _close(e.grad, t.grad)


def test_segment_reduce_errors_vs_torch():
    torch = pytest.importorskip("torch")
    d = [1., 2, 3, 4, 5, 6]
    cases = [
        (lambda m: m.segment_reduce(m.tensor(d), "sum", lengths=m.tensor([2, 2])), RuntimeError,
         "Expected all rows of lengths along axis to sum"),
        (lambda m: m.segment_reduce(m.tensor(d), "sum", indices=m.tensor([0, 0, 1])), RuntimeError,
         "indices based reduction is not supported yet"),
        (lambda m: m.segment_reduce(m.tensor(d), "foo", lengths=m.tensor([6])), RuntimeError,
         "reduce argument must be either sum, prod, mean, amax or amin, got foo"),
        (lambda m: m.segment_reduce(m.tensor(d), "sum"), RuntimeError, "Either lengths or offsets must be defined"),
        (lambda m: m.segment_reduce(m.tensor(d).long(), "sum", lengths=m.tensor([6])), NotImplementedError,
         "\"_segment_reduce_cpu\" not implemented for 'Long'"),
        (lambda m: m.segment_reduce(m.tensor(d), "sum", lengths=m.tensor([-1, 7])), RuntimeError,
         "lengths contains negative value"),
        (lambda m: m.segment_reduce(m.tensor(d).reshape(3, 2), "sum", lengths=m.tensor([1, 1]), axis=1),
         RuntimeError, "Expected axis to be the last dimension of lengths but got 1"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn(ember)
        with pytest.raises(exc, match=msg):
            fn(torch)
    assert ember.segment_reduce(ember.tensor(d), "sum", lengths=ember.tensor([3, 3]), unsafe=True).tolist() == \
        torch.segment_reduce(torch.tensor(d), "sum", lengths=torch.tensor([3, 3]), unsafe=True).tolist()


# ---------------------------------------------------------------------- autocast state
def test_autocast_state_functions_vs_torch():
    torch = pytest.importorskip("torch")
    script = [
        ("set_autocast_enabled", ("cpu", True)), ("is_autocast_enabled", ("cpu",)), ("get_autocast_dtype", ("cpu",)),
        ("set_autocast_dtype", ("cpu", "float16")), ("get_autocast_dtype", ("cpu",)),
        ("set_autocast_enabled", ("cpu", False)), ("is_autocast_enabled", ("cpu",)),
        ("get_autocast_dtype", ("cpu",)), ("set_autocast_dtype", ("cpu", "bfloat16")),
        ("set_autocast_enabled", (True,)), ("is_autocast_enabled", ()), ("set_autocast_enabled", (False,)),
        ("is_autocast_enabled", ()),
        ("is_autocast_cache_enabled", ()), ("set_autocast_cache_enabled", (False,)), ("is_autocast_cache_enabled", ()),
        ("set_autocast_cache_enabled", (True,)), ("clear_autocast_cache", ()),
        ("autocast_increment_nesting", ()), ("autocast_increment_nesting", ()), ("autocast_decrement_nesting", ()),
        ("autocast_decrement_nesting", ()),
        ("get_autocast_dtype", ("cuda",)), ("set_autocast_dtype", ("cuda", "bfloat16")), ("get_autocast_dtype", ("cuda",)),
        ("set_autocast_dtype", ("cuda", "float16")),
    ]

    def run(m):
        out = []
        for name, args in script:
            args = tuple(getattr(m, a) if a in ("float16", "bfloat16") else a for a in args)
            r = getattr(m, name)(*args)
            out.append(str(r).replace("torch.", "ember.") if r is not None else None)
        return out
    assert run(ember) == run(torch)


def test_autocast_state_drives_ops_and_regions_vs_torch():
    torch = pytest.importorskip("torch")
    for m in (ember, torch):
        m.set_autocast_enabled("cpu", True)
        try:
            assert (m.randn(2, 2) @ m.randn(2, 2)).dtype is m.bfloat16
        finally:
            m.set_autocast_enabled("cpu", False)
        assert (m.randn(2, 2) @ m.randn(2, 2)).dtype is m.float32
        m.set_autocast_dtype("cpu", m.float16)
        try:
            with m.autocast("cpu"):
                assert m.get_autocast_dtype("cpu") is m.float16
                assert (m.randn(2, 2) @ m.randn(2, 2)).dtype is m.float16
                assert m.autocast_increment_nesting() == 2 and m.autocast_decrement_nesting() == 1
                assert m.is_autocast_cache_enabled()
            with m.autocast("cpu", dtype=m.bfloat16, cache_enabled=False):
                assert m.get_autocast_dtype("cpu") is m.bfloat16 and not m.is_autocast_cache_enabled()
            assert m.get_autocast_dtype("cpu") is m.float16 and m.is_autocast_cache_enabled()
            assert not m.is_autocast_enabled("cpu")
        finally:
            m.set_autocast_dtype("cpu", m.bfloat16)


def test_autocast_deprecated_spellings_warn_vs_torch():
    torch = pytest.importorskip("torch")
    for name, args in (("is_autocast_cpu_enabled", ()), ("get_autocast_cpu_dtype", ()),
                       ("set_autocast_cpu_dtype", ("bfloat16",)), ("set_autocast_cpu_enabled", (False,)),
                       ("get_autocast_gpu_dtype", ()), ("set_autocast_gpu_dtype", ("float16",))):
        res = []
        for m in (ember, torch):
            a = tuple(getattr(m, x) if isinstance(x, str) else x for x in args)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = getattr(m, name)(*a)
            assert [x.category for x in w] == [DeprecationWarning], name
            res.append((str(r).replace("torch.", "ember."), str(w[0].message).split(" (Triggered")[0]))
        assert res[0] == res[1]


def test_autocast_state_errors_vs_torch():
    torch = pytest.importorskip("torch")
    for m in (ember, torch):
        with pytest.raises(TypeError, match="argument 'enabled' \\(position 2\\) must be bool, not int"):
            m.set_autocast_enabled("cpu", 1)
        with pytest.raises(TypeError, match="argument 'enabled' \\(position 1\\) must be bool, not str"):
            m.set_autocast_enabled("cpu")
        with pytest.raises(RuntimeError):
            m.set_autocast_dtype("foo", m.bfloat16)


# ---------------------------------------------------------------------- misc
def test_set_default_tensor_type_vs_torch():
    torch = pytest.importorskip("torch")
    for m in (ember, torch):
        try:
            with pytest.warns(UserWarning, match="set_default_tensor_type\\(\\) is deprecated as of PyTorch 2.1"):
                m.set_default_tensor_type(m.DoubleTensor)
            assert m.get_default_dtype() is m.float64 and m.tensor([1.5]).dtype is m.float64
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m.set_default_tensor_type("torch.FloatTensor")
                assert m.get_default_dtype() is m.float32
                with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
                    m.set_default_tensor_type("torch.LongTensor")
                with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
                    m.set_default_tensor_type(m.float64)
                with pytest.raises(ModuleNotFoundError, match="No module named 'foo'"):
                    m.set_default_tensor_type("foo.FloatTensor")
        finally:
            m.set_default_dtype(m.float32)


def test_to_dlpack_round_trip():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    e = ember.tensor(a)
    back = ember.from_dlpack(ember.to_dlpack(e))
    assert back.data_ptr() == e.data_ptr() and np.array_equal(back.numpy(), a)
    t = torch.from_dlpack(ember.to_dlpack(e))
    assert t.data_ptr() == e.data_ptr() and np.array_equal(t.numpy(), a)
    with pytest.raises(BufferError):
        ember.to_dlpack(ember.tensor(a, requires_grad=True))


def test_symbolic_types_exported():
    from ember.fx.experimental import symbolic_shapes as ss
    assert ember.SymInt is ss.SymInt and ember.SymBool is ss.SymBool
    # ember traces no symbolic floats: its SymFloat is torch's name for isinstance checks only
    assert isinstance(ember.SymFloat, type) and not isinstance(1.5, ember.SymFloat)
