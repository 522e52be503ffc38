"""Top-level torch names ember added (ember/_torch_level_gaps.py, _function_schema.py,
_generic_stream.py, _storage_classes.py, the absent-backend modules, Tensor methods in
_api_gaps.py, ember.func / ember.utils additions): values, gradients and errors vs torch 2.13."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _pair(shape, seed, dtype=np.float64, grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return ember.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _close(e, t, tol=1e-6):
    np.testing.assert_allclose(np.asarray(e.detach().numpy(), dtype=np.float64),
                               t.detach().numpy().astype(np.float64), rtol=tol, atol=tol)


def _err(f):
    try:
        f()
    except Exception as ex:        # noqa: BLE001 - the error is what is compared
        return type(ex).__name__, str(ex).replace("torch.", "ember.").replace("Torch", "ember")
    return None


# ---------------------------------------------------------------------- hash_tensor
@pytest.mark.parametrize("seed", range(3))
def test_hash_tensor_matches_torch(seed):
    for dt in (np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_):
        rng = np.random.default_rng(seed)
        a = (rng.standard_normal((3, 4)) * 50).astype(dt)
        e, t = ember.tensor(a), torch.tensor(a)
        assert ember.hash_tensor(e).item() == torch.hash_tensor(t).item(), dt
        for dim in (0, 1, (0, 1), [-1]):
            for keepdim in (False, True):
                r, w = ember.hash_tensor(e, dim, keepdim=keepdim), torch.hash_tensor(t, dim, keepdim=keepdim)
                assert r.dtype is ember.uint64 and tuple(r.shape) == tuple(w.shape)
                assert r.tolist() == w.tolist()
        assert e.hash_tensor(1).tolist() == t.hash_tensor(1).tolist()


def test_hash_tensor_errors():
    assert _err(lambda: ember.hash_tensor(ember.empty(0))) == _err(lambda: torch.hash_tensor(torch.empty(0)))
    assert _err(lambda: ember.hash_tensor(ember.ones(2), mode=1))[0] == "RuntimeError"
    for d in ("float8_e4m3fn", "uint16", "complex64"):
        assert _err(lambda: ember.hash_tensor(ember.ones(3).to(getattr(ember, d)))) == \
            _err(lambda: torch.hash_tensor(torch.ones(3).to(getattr(torch, d))))
    assert ember.hash_tensor(ember.ones(3).bfloat16()).item() == torch.hash_tensor(torch.ones(3).bfloat16()).item()
    with pytest.raises(TypeError, match="argument 'input'"):
        ember.hash_tensor([1.0])


# ---------------------------------------------------------------------- slice_inverse
@pytest.mark.parametrize("seed", range(2))
def test_slice_inverse_values_and_grad(seed):
    for dim, start, end, step in ((1, 1, 6, 2), (1, 2, 5, 1), (0, 1, None, 1)):
        e, t = _pair((2, 6), seed, grad=True)
        idx = [slice(None), slice(None)]
        idx[dim] = slice(start, end, step)
        ye, yt = e[tuple(idx)], t[tuple(idx)]
        re = ember.slice_inverse(ye, ember.zeros(2, 6), dim, start, end, step)
        rt = torch.slice_inverse(yt, torch.zeros(2, 6), dim, start, end, step)
        _close(re, rt)
        assert tuple(re.stride()) == tuple(rt.stride())
        we, wt = _pair((2, 6), seed + 10)
        (re * we).sum().backward()
        (rt * wt).sum().backward()
        _close(e.grad, t.grad)
    # a view of the base: writes go through
    b = ember.arange(12.).reshape(2, 6)
    v = ember.slice_inverse(b[:, 1::2], b, 1, 1, 6, 2)
    v[0, 0] = 100.0
    assert b[0, 0].item() == 100.0


def test_slice_inverse_storage_error():
    e = _err(lambda: ember.slice_inverse(ember.zeros(2, 3), ember.zeros(2, 6), 1, 1, 4))
    t = _err(lambda: torch.slice_inverse(torch.zeros(2, 3), torch.zeros(2, 6), 1, 1, 4))
    assert e == t


# ---------------------------------------------------------------------- embedding_renorm_, channel shuffle, grid samplers
@pytest.mark.parametrize("seed", range(3))
def test_embedding_renorm_(seed):
    e, t = _pair((6, 4), seed)
    idx = np.random.default_rng(seed).integers(0, 6, 5)
    for max_norm, p in ((1.0, 2.0), (0.5, 1.0), (1.5, 3.0)):
        r = ember.embedding_renorm_(e, ember.tensor(idx), max_norm, p)
        torch.embedding_renorm_(t, torch.tensor(idx), max_norm, p)
        assert r is e
        _close(e, t, 1e-6)


def test_embedding_renorm_errors():
    for bad in (lambda lib: lib.embedding_renorm_(lib.randn(5, 3), lib.tensor([0.0, 1.0]), 1.0, 2.0),
                lambda lib: lib.embedding_renorm_(lib.randn(5), lib.tensor([0, 1]), 1.0, 2.0),
                lambda lib: lib.embedding_renorm_(lib.randn(5, 3, requires_grad=True), lib.tensor([0]), 1.0, 2.0)):
        assert _err(lambda: bad(ember)) == _err(lambda: bad(torch))


@pytest.mark.parametrize("groups", [1, 2, 3, 6])
def test_native_channel_shuffle(groups):
    e, t = _pair((2, 6, 3, 2), groups)
    _close(ember.native_channel_shuffle(e, groups), torch.native_channel_shuffle(t, groups))
    _close(ember.nn.functional.native_channel_shuffle(e, groups), torch.nn.functional.native_channel_shuffle(t, groups))
    for bad in ((ember.randn(2, 3, 4), 2), (ember.randn(3), 1), (ember.randn(2, 4, 2), 0), (ember.randn(2, 4, 2), -1)):
        tb = (torch.tensor(bad[0].numpy()), bad[1])
        assert _err(lambda: ember.native_channel_shuffle(*bad)) == _err(lambda: torch.native_channel_shuffle(*tb))


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding", [0, 1, 2])
def test_grid_sampler_2d(mode, padding):
    x_e, x_t = _pair((2, 3, 5, 4), mode * 3 + padding, grad=True)
    g = np.random.default_rng(7).uniform(-1.1, 1.1, (2, 3, 4, 2))
    g_e, g_t = ember.tensor(g, requires_grad=True), torch.tensor(g, requires_grad=True)
    for align in (False, True):
        re = ember.grid_sampler_2d(x_e, g_e, mode, padding, align)
        rt = torch.grid_sampler_2d(x_t, g_t, mode, padding, align)
        _close(re, rt, 1e-6)
    re.sum().backward()
    rt.sum().backward()
    _close(x_e.grad, x_t.grad, 1e-6)
    if mode != 1:
        _close(g_e.grad, g_t.grad, 1e-5)


def test_grid_sampler_3d_and_errors():
    x_e, x_t = _pair((1, 2, 3, 4, 3), 1)
    g = np.random.default_rng(2).uniform(-1, 1, (1, 2, 2, 3, 3))
    for mode in (0, 1):
        _close(ember.grid_sampler_3d(x_e, ember.tensor(g), mode, 1, False),
               torch.grid_sampler_3d(x_t, torch.tensor(g), mode, 1, False))
    assert _err(lambda: ember.grid_sampler_3d(x_e, ember.tensor(g), 2, 0, False)) == \
        _err(lambda: torch.grid_sampler_3d(x_t, torch.tensor(g), 2, 0, False))
    assert _err(lambda: ember.grid_sampler_3d(ember.randn(1, 2, 3, 3), ember.randn(1, 2, 2, 2), 0, 0, False)) == \
        _err(lambda: torch.grid_sampler_3d(torch.randn(1, 2, 3, 3), torch.randn(1, 2, 2, 2), 0, 0, False))
    with pytest.raises(RuntimeError, match="interpolation_mode"):
        ember.grid_sampler_2d(ember.randn(1, 1, 2, 2), ember.randn(1, 1, 1, 2), 5, 0, False)


# ---------------------------------------------------------------------- SyncBatchNorm kernels (CUDA-only in torch)
@pytest.mark.parametrize("seed", range(3))
def test_batch_norm_kernels_compose_to_batch_norm(seed):
    """stats + elemt give batch_norm's training output; backward_reduce + backward_elemt give its
    gradients (checked against torch's CPU batch_norm and its autograd)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 3, 5))
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    eps = 1e-5
    xe = ember.tensor(x)
    mean, invstd = ember.batch_norm_stats(xe, eps)
    np.testing.assert_allclose(mean.numpy(), x.mean((0, 2)), rtol=1e-10)
    np.testing.assert_allclose(invstd.numpy(), 1 / np.sqrt(x.var((0, 2)) + eps), rtol=1e-10)
    y = ember.batch_norm_elemt(xe, ember.tensor(w), ember.tensor(b), mean, invstd, eps)
    xt = torch.tensor(x, requires_grad=True)
    wt, bt = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    yt = torch.nn.functional.batch_norm(xt, None, None, wt, bt, training=True, eps=eps)
    _close(y, yt, 1e-10)
    dy = rng.standard_normal(x.shape)
    yt.backward(torch.tensor(dy))
    dye = ember.tensor(dy)
    sum_dy, sum_dy_xmu, gw, gb = ember.batch_norm_backward_reduce(dye, xe, mean, invstd, ember.tensor(w),
                                                                  True, True, True)
    _close(gw, wt.grad, 1e-10)
    _close(gb, bt.grad, 1e-10)
    gx = ember.batch_norm_backward_elemt(dye, xe, mean, invstd, ember.tensor(w), sum_dy, sum_dy_xmu,
                                         ember.tensor([20], dtype=ember.int32))
    _close(gx, xt.grad, 1e-10)
    assert ember.batch_norm_backward_reduce(dye, xe, mean, invstd, None, False, True, False)[::3] == (None, None)


@pytest.mark.parametrize("seed", range(3))
def test_batch_norm_gather_and_update_stats(seed):
    """gather_stats_with_counts of per-replica stats equals the stats of the whole batch, and the
    running statistics follow torch's batch_norm update (unbiased variance, momentum)."""
    rng = np.random.default_rng(seed)
    parts = [rng.standard_normal((n, 3, 4)) for n in (2, 3, 5)]
    whole = np.concatenate(parts)
    eps, mom = 1e-5, 0.1
    stats = [ember.batch_norm_stats(ember.tensor(p), eps) for p in parts]
    means = ember.stack([s[0] for s in stats])
    invstds = ember.stack([s[1] for s in stats])
    counts = ember.tensor([float(p.shape[0] * p.shape[2]) for p in parts])
    rm_e, rv_e = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    gm, gi = ember.batch_norm_gather_stats_with_counts(ember.tensor(whole), means, invstds, rm_e, rv_e, mom, eps,
                                                      counts)
    np.testing.assert_allclose(gm.numpy(), whole.mean((0, 2)), rtol=1e-10)
    np.testing.assert_allclose(gi.numpy(), 1 / np.sqrt(whole.var((0, 2)) + eps), rtol=1e-10)
    rm_t, rv_t = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    torch.nn.functional.batch_norm(torch.tensor(whole), rm_t, rv_t, training=True, momentum=mom, eps=eps)
    _close(rm_e, rm_t, 1e-10)
    _close(rv_e, rv_t, 1e-10)
    # equal counts: gather_stats
    same = [rng.standard_normal((2, 3, 4)) for _ in range(3)]
    st = [ember.batch_norm_stats(ember.tensor(p), eps) for p in same]
    gm2, _ = ember.batch_norm_gather_stats(ember.tensor(same[0]), ember.stack([s[0] for s in st]),
                                           ember.stack([s[1] for s in st]), None, None, mom, eps, 8)
    np.testing.assert_allclose(gm2.numpy(), np.concatenate(same).mean((0, 2)), rtol=1e-10)
    # update_stats
    rm_e, rv_e = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    m, v = ember.batch_norm_update_stats(ember.tensor(whole), rm_e, rv_e, mom)
    np.testing.assert_allclose(m.numpy(), whole.mean((0, 2)), rtol=1e-10)
    np.testing.assert_allclose(v.numpy(), whole.var((0, 2), ddof=1), rtol=1e-10)
    _close(rm_e, rm_t, 1e-10)
    _close(rv_e, rv_t, 1e-10)
    with pytest.raises(RuntimeError, match="count to be an integer"):
        ember.batch_norm_backward_elemt(ember.ones(2, 3), ember.ones(2, 3), ember.zeros(3), ember.ones(3), None,
                                        ember.zeros(3), ember.zeros(3), ember.tensor([2.0]))


# ---------------------------------------------------------------------- symbolic sizes
def test_sym_constrain_range():
    for f in (lambda lib: lib.sym_constrain_range(5, min=0, max=3), lambda lib: lib.sym_constrain_range(5, max=10),
              lambda lib: lib.sym_constrain_range_for_size(5), lambda lib: lib.sym_constrain_range_for_size(-1),
              lambda lib: lib.sym_constrain_range_for_size(5, min=6)):
        assert _err(lambda: f(ember)) == _err(lambda: f(torch))
    assert ember.sym_fresh_size(5) == 5 and ember.sym_fresh_size(ember.tensor(3)) == 3


# ---------------------------------------------------------------------- sparse x dense
def _sparse_pair(seed):
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((4, 5)) * (rng.random((4, 5)) < 0.4)
    d[1] = 0.0                                  # an empty row
    return ember.tensor(d).to_sparse(), torch.tensor(d).to_sparse()


@pytest.mark.parametrize("seed", range(3))
def test_sparse_dense_products(seed):
    se, st = _sparse_pair(seed)
    m_e, m_t = _pair((5, 3), seed + 5)
    _close(ember.dsmm(se, m_e), torch.dsmm(st, m_t))
    re, rt = ember.hsmm(se, m_e), torch.hsmm(st, m_t)
    assert re.is_sparse and tuple(re.shape) == tuple(rt.shape)
    _close(re.to_dense(), rt.to_dense())
    base_e, base_t = _sparse_pair(seed + 100)
    base_e = ember.tensor(base_e.to_dense().numpy()[:, :3]).to_sparse()
    base_t = torch.tensor(base_t.to_dense().numpy()[:, :3]).to_sparse()
    for beta, alpha in ((1, 1), (0.5, 2.0)):
        re = ember.sspaddmm(base_e, se, m_e, beta=beta, alpha=alpha)
        rt = torch.sspaddmm(base_t, st, m_t, beta=beta, alpha=alpha)
        _close(re.to_dense(), rt.to_dense())
        np.testing.assert_array_equal(re._indices().numpy(), rt._indices().numpy())
        _close(ember.saddmm(base_e, se, m_e, beta=beta, alpha=alpha).to_dense(),
               torch.saddmm(base_t, st, m_t, beta=beta, alpha=alpha).to_dense())
    _close(base_e.sspaddmm(se, m_e).to_dense(), base_t.sspaddmm(st, m_t).to_dense())


def test_dsmm_grad_and_errors():
    se, st = _sparse_pair(3)
    m_e, m_t = _pair((5, 3), 9, grad=True)
    ember.dsmm(se, m_e).sum().backward()
    torch.dsmm(st, m_t).sum().backward()
    _close(m_e.grad, m_t.grad)
    assert _err(lambda: ember.sspaddmm(ember.randn(4, 3), se, m_e)) == \
        _err(lambda: torch.sspaddmm(torch.randn(4, 3), st, m_t))[:1] + (
            "tensor.sspaddmm(...) can only be called on sparse tensors",)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        ember.dsmm(se, ember.randn(4, 2))
    with pytest.raises(RuntimeError, match="sparse COO"):
        ember.hsmm(ember.randn(4, 5), ember.randn(5, 2))
    with pytest.raises(RuntimeError, match="sparse COO"):
        ember.randn(4, 5).smm(ember.randn(5, 2))


def test_sparse_part_copies():
    d = np.array([[0, 1.5, 0], [2.0, 0, 3.0]])
    ce, ct = ember.tensor(d).to_sparse_csr(), torch.tensor(d).to_sparse_csr()
    for fn in ("values_copy", "crow_indices_copy", "col_indices_copy"):
        re, rt = getattr(ember, fn)(ce), getattr(torch, fn)(ct)
        np.testing.assert_array_equal(re.numpy(), rt.numpy())
    ke, kt = ember.tensor(d).to_sparse_csc(), torch.tensor(d).to_sparse_csc()
    for fn in ("ccol_indices_copy", "row_indices_copy"):
        np.testing.assert_array_equal(getattr(ember, fn)(ke).numpy(), getattr(torch, fn)(kt).numpy())
    se = ember.tensor(d).to_sparse()
    np.testing.assert_array_equal(ember.indices_copy(se).numpy(), se.indices().numpy())
    v = ember.values_copy(ce)
    v[0] = 99.0
    assert ce.values()[0].item() == 1.5                 # a copy, not a view
    with pytest.raises(RuntimeError, match="layout"):
        ember.crow_indices_copy(se)


# ---------------------------------------------------------------------- quantized
def test_quantized_max_pool3d_and_empty_quantized():
    warnings.simplefilter("ignore")
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    qe = ember.quantize_per_tensor(ember.tensor(x), 0.1, 3, ember.quint8)
    qt = torch.quantize_per_tensor(torch.tensor(x), 0.1, 3, torch.quint8)
    for args in ((2,), ((2, 2, 3), (1, 1, 2), 1), (3, 1, 1, 1, True)):
        re, rt = ember.quantized_max_pool3d(qe, *args), torch.quantized_max_pool3d(qt, *args)
        np.testing.assert_array_equal(re.int_repr().numpy(), rt.int_repr().numpy())
        assert re.q_scale() == rt.q_scale() and re.q_zero_point() == rt.q_zero_point()
    e = ember.empty_quantized([2, 3], qe)
    t = torch.empty_quantized([2, 3], qt)
    assert tuple(e.shape) == tuple(t.shape) and e.dtype is ember.quint8 and e.q_scale() == t.q_scale()
    with pytest.raises(RuntimeError, match="quantized"):
        ember.empty_quantized([2], ember.ones(2))


# ---------------------------------------------------------------------- schemas
SCHEMAS = ["aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
           "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
           "foo(int[2] x, float? y=None, str s=\"hi\", bool b=True, int[] l=[1, 2]) -> (Tensor a, Tensor b)",
           "aten::split(Tensor(a -> *) self, int split_size, int dim=0) -> Tensor(a)[]",
           "f(Tensor[] xs, ScalarType? dtype=None, Device? device=None, *, Layout? layout=None, "
           "MemoryFormat mf=contiguous_format) -> ()",
           "f(SymInt[] q, SymInt n, Tensor? t, Scalar? s, Storage st, Generator? g=None, Stream? x=None, "
           "int[1] dd=0, bool[3] m=[True, True, True], float[] fs=[1., 2.], Tensor(b)? y=None) -> (Tensor(a!), Tensor)",
           "aten::x.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
           "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
           "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
           "g(...) -> ..."]


def _describe(f):
    args = [(a.name, str(a.type), a.default_value, a.has_default_value(), a.kwarg_only, a.N, a.is_out, a.is_write,
             a.alias_info and (a.alias_info.is_write, a.alias_info.before_set, a.alias_info.after_set))
            for a in f.arguments + f.returns]
    return str(f), f.name, f.overload_name, f.is_mutable, args


@pytest.mark.parametrize("schema", SCHEMAS)
def test_parse_schema_matches_torch(schema):
    e, t = ember.parse_schema(schema), torch.parse_schema(schema)
    assert isinstance(e, ember.FunctionSchema) and all(isinstance(a, ember.Argument) for a in e.arguments)
    assert _describe(e) == _describe(t)
    assert ember.parse_schema(str(e)) == e


def test_parse_schema_errors():
    for bad in ("aten::add(Tensor self", "add(Foo x) -> Tensor", "f(int x=1, int y) -> ()"):
        assert _err(lambda: ember.parse_schema(bad))[0] == _err(lambda: torch.parse_schema(bad))[0], bad
    with pytest.raises(TypeError):
        ember.parse_schema(3)


# ---------------------------------------------------------------------- small objects
def test_tag_stream_event_symfloat():
    assert list(ember.Tag.__members__) == list(torch.Tag.__members__)
    assert all(ember.Tag[n].value == torch.Tag.__members__[n].value for n in torch.Tag.__members__)
    s = ember.Stream()
    assert repr(s) == repr(torch.Stream()).replace("torch.", "ember.")
    assert s.query() and s.synchronize() is None and s == ember.Stream("cpu") and s.device == ember.device("cpu")
    ev = ember.Event()
    assert repr(ev) == repr(torch.Event()).replace("torch.", "ember.")
    assert ev.query()
    for f in (lambda lib: lib.Event().record(), lambda lib: lib.Stream().wait_stream(lib.Stream()),
              lambda lib: lib.Event().elapsed_time(lib.Event()),
              lambda lib: lib.Event(enable_timing=True).elapsed_time(lib.Event(enable_timing=True))):
        assert _err(lambda: f(ember)) == _err(lambda: f(torch))
    assert _err(lambda: ember.Stream("cuda"))[0] == "RuntimeError"
    x = ember.SymFloat(2.5)
    assert isinstance(x, ember.SymFloat) and x * 2 == 5.0 and x < 3 and float(x) == 2.5 and not x.is_integer()


def test_fork_wait_flags_and_files():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fut = ember.fork(lambda a, b: a + b, 2, 3)
        assert ember.wait(fut) == 5
    assert isinstance(fut, ember.Future) and ember.Future is ember.futures.Future
    assert ember.has_lapack and ember.has_spectral and ember.has_openmp and isinstance(ember.has_mkl, bool)
    assert ember.legacy_contiguous_format is ember.contiguous_format
    assert ember.compiled_with_cxx11_abi() is True and ember.init_num_threads() is None
    import os
    assert ember.get_file_path("_api_gaps.py") == os.path.join(os.path.dirname(ember.__file__), "_api_gaps.py")
    assert ember.is_vulkan_available() is False


def test_storage_names_and_version_module():
    assert ember.Storage is ember.FloatStorage
    assert isinstance(ember.UntypedStorage(3), ember.StorageBase)
    assert not isinstance(ember.FloatStorage(3), ember.StorageBase)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("QInt8Storage", "QUInt8Storage", "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage"):
            s = getattr(ember, name)(4)
            assert str(s.dtype).split(".")[-1] == str(getattr(torch, name)(4).dtype).split(".")[-1]
    assert ember.torch_version.TorchVersion("2.13.0") > "2.4"
    assert ember.torch_version.__version__ == ember.__version__


@pytest.mark.parametrize("name", ["mps", "xpu", "mtia"])
def test_absent_backend_modules(name):
    e, t = getattr(ember, name), getattr(torch, name)
    assert e.is_available() is False and e.device_count() == 0
    assert e.manual_seed(0) is None
    for fn in ("synchronize", "empty_cache", "get_rng_state", "current_allocated_memory", "current_device"):
        if not hasattr(t, fn):
            continue
        want = _err(lambda: getattr(t, fn)())
        got = _err(lambda: getattr(e, fn)())
        assert (got and got[0]) == (want and want[0]), fn
    with pytest.raises((RuntimeError, AssertionError)):
        e.Stream()


# ---------------------------------------------------------------------- Tensor methods
def test_tensor_flags_and_properties():
    x, t = ember.randn(3), torch.randn(3)
    for name in ("is_xpu", "is_mps", "is_mkldnn", "is_vulkan", "is_maia", "is_mtia", "is_ipu", "is_xla"):
        assert getattr(x, name) is False and getattr(t, name) is False
    assert x.name is None and x.is_distributed() is False
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert x.volatile is False
        x.volatile = True
    assert [str(m.message) for m in w] == ["volatile was removed (Variable.volatile is always False)",
                                         "volatile was removed and now has no effect. Use `with ember.no_grad():` "
                                         "instead."]
    leaf = ember.randn(2, requires_grad=True)
    assert leaf.grad_dtype is ember.float32
    leaf.grad_dtype = ember.float32
    with pytest.raises(NotImplementedError, match="grad_dtype"):
        leaf.grad_dtype = ember.float64
    assert _err(lambda: x.record_stream(ember.Stream()))[0] == "NotImplementedError"
    s = ember.randn(2, 2).to_sparse()
    with pytest.raises(NotImplementedError, match="resize_as_sparse_"):
        s.resize_as_sparse_(ember.randn(3, 3).to_sparse())
    with pytest.raises(RuntimeError, match="sparse"):
        x.resize_as_sparse_(s)
    with pytest.raises(NotImplementedError, match="first-class"):
        x.index((0,), None)
    for f in (lambda lib: lib.ones(2).xpu(), lambda lib: lib.ones(2).mtia(), lambda lib: lib.ones(2).ipu(),
              lambda lib: lib.ones(2).reinforce(1), lambda lib: lib.ones(2).sparse_resize_((3,), 1, 0)):
        got, want = _err(lambda: f(ember)), _err(lambda: f(torch))
        assert got[0] == want[0] and got[1].replace("Pyember", "ember").split("\n")[0][:30] == \
            want[1].replace("Pyember", "ember").split("\n")[0][:30]
    with pytest.raises(NotImplementedError, match="mkldnn"):
        x.to_mkldnn()
    with pytest.raises(NotImplementedError, match="sparse_resize_"):
        s.sparse_resize_and_clear_((3, 3), 2, 0)
    e, tt = _pair((2, 6), 0)
    _close(e[:, 1:4].slice_inverse(ember.zeros(2, 6), 1, 1, 4), tt[:, 1:4].slice_inverse(torch.zeros(2, 6), 1, 1, 4))


# ---------------------------------------------------------------------- func / utils
def test_func_and_utils_additions():
    x = ember.randn(3)
    assert ember.func.debug_unwrap(x) is x
    seen = []
    ember.func.vmap(lambda r: seen.append(ember.func.debug_unwrap(r)) or r * 2)(ember.randn(2, 3))
    assert all(type(s) is ember.Tensor for s in seen)

    def f():
        pass
    ember.utils.set_module(f, "mymod")
    assert f.__module__ == "mymod"
    with pytest.raises(TypeError, match="should be a string"):
        ember.utils.set_module(f, 3)
    det = ember.utils.deterministic
    assert det.fill_uninitialized_memory is True
    det.fill_uninitialized_memory = False
    assert det.fill_uninitialized_memory is False
    det.fill_uninitialized_memory = True
    with pytest.raises(NotImplementedError, match="custom device backends"):
        ember.utils.rename_privateuse1_backend("foo")
    with pytest.raises(NotImplementedError):
        ember.utils.backend_registration.generate_methods_for_privateuse1_backend()
    assert ember.utils.swap_tensors is not None
    assert ember.utils.weak.WeakTensorKeyDictionary is not None


def test_collect_env_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "ember.utils.collect_env"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ember version: " + str(ember.__version__) in out.stdout and "numpy version:" in out.stdout
