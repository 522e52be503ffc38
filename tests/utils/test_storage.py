"""Storages (ember/storage.py): UntypedStorage / TypedStorage / legacy FloatStorage..., Tensor.set_,
is_set_to, storage_offset consistency, shared memory, files -- values and errors against torch 2.13."""
import os
import pickle
import warnings

import numpy as np
import pytest

import ember
from ember import storage as _st

DTYPES = ["float32", "float64", "int64", "int32", "int16", "uint8", "bool", "float16", "complex64"]


def _data(rng, shape, dtype):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("complex"):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.startswith(("int", "uint")):
        return rng.integers(1, 100, size=shape).astype(dtype)
    return (rng.standard_normal(shape) + 0.5).astype(dtype)


def _views(t):
    """Views of a 3-d tensor (each shares t's storage)."""
    return [t[1:], t[:, 1], t.transpose(0, 2), t.view(-1), t.detach(), t.data, t[..., ::2], t.select(2, 1),
            t.narrow(1, 1, 1), t.unsqueeze(0), t.flatten()]


# ---------------------------------------------------------------------- untyped storage of a tensor
@pytest.mark.parametrize("dtype", DTYPES)
def test_untyped_storage_metadata_vs_torch(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(abs(hash(dtype)) % 2**32)
    for _ in range(3):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=3))
        a = _data(rng, shape, dtype)
        e, t = ember.tensor(a), torch.tensor(a)
        es, ts = e.untyped_storage(), t.untyped_storage()
        assert isinstance(es, ember.UntypedStorage)
        assert es.nbytes() == ts.nbytes() and es.size() == ts.size() and len(es) == len(ts)
        assert es.element_size() == ts.element_size() == 1
        assert str(es.device) == str(ts.device) == "cpu"
        assert es.tolist() == ts.tolist()              # the bytes themselves
        assert es.data_ptr() == e.data_ptr()
        assert not hasattr(es, "dtype") and not hasattr(ts, "dtype")


def test_views_share_data_ptr_and_offsets_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    for _ in range(4):
        a = rng.standard_normal((3, 4, 5)).astype(np.float32)
        e, t = ember.tensor(a), torch.tensor(a)
        base = e.untyped_storage().data_ptr()
        for ev, tv in zip(_views(e), _views(t)):
            s = ev.untyped_storage()
            assert s.data_ptr() == base
            assert s.nbytes() == tv.untyped_storage().nbytes()
            assert ev.storage_offset() == tv.storage_offset()
            assert ev.data_ptr() == s.data_ptr() + ev.storage_offset() * ev.element_size()
        # a copy has its own storage
        assert e.clone().untyped_storage().data_ptr() != base
        assert e.transpose(0, 1).contiguous().untyped_storage().data_ptr() != base


def test_parameter_and_from_numpy_share_storage():
    a = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    t = ember.from_numpy(a)
    p = ember.nn.Parameter(t)
    assert p.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() == a.ctypes.data
    # from_numpy of a slice: the storage starts at the slice (as torch.from_numpy)
    s = ember.from_numpy(a[1:])
    assert s.untyped_storage().data_ptr() == a[1:].ctypes.data and s.storage_offset() == 0
    assert s.untyped_storage().nbytes() == a[1:].nbytes


def test_negative_stride_root_offset_consistent():
    a = np.arange(10, dtype=np.float32)[::-1]
    t = ember.from_numpy(a.copy())[::1]
    r = ember.from_numpy(np.ascontiguousarray(a))
    for x in (t, r, r[3:], r[::2]):
        s = x.untyped_storage()
        assert x.data_ptr() == s.data_ptr() + x.storage_offset() * 4
        assert x.storage_offset() >= 0


# ---------------------------------------------------------------------- element access
def test_untyped_getitem_setitem_write_shared_memory_vs_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal(6).astype(np.float32)
    e, t = ember.tensor(a), torch.tensor(a)
    es, ts = e.untyped_storage(), t.untyped_storage()
    for i in (0, 5, 23, -1, -7):
        assert es[i] == ts[i]
    for idx, val in ((0, 7), (3, 300), (23, -1), (slice(4, 8), 9)):
        es[idx] = val
        ts[idx] = val
        assert es.tolist() == ts.tolist()
        assert np.array_equal(e.numpy().view(np.uint8), t.numpy().view(np.uint8))   # written through
    es[-2] = 5                   # (torch's __setitem__ refuses negative indices; ember wraps them as reads do)
    assert es[22] == 5
    ts[22] = 5
    sub_e, sub_t = es[4:8], ts[4:8]
    assert isinstance(sub_e, ember.UntypedStorage) and sub_e.tolist() == sub_t.tolist()
    assert sub_e.data_ptr() - es.data_ptr() == sub_t.data_ptr() - ts.data_ptr() == 4
    sub_e[0] = 1
    assert es[4] == 1
    for bad, exc in ((24, IndexError), (-25, IndexError)):
        with pytest.raises(exc):
            ts[bad]
        with pytest.raises(exc, match="out of range for storage of size 24"):
            es[bad]
    with pytest.raises(TypeError):
        ts[1.5]
    with pytest.raises(TypeError, match="can't index"):
        es[1.5]
    with pytest.raises(RuntimeError):
        ts[0] = 1.5
    with pytest.raises(RuntimeError, match="int types"):
        es[0] = 1.5
    with pytest.raises(RuntimeError, match="step of 2"):
        es[::2]
    with pytest.raises(RuntimeError, match="step of 2"):
        ts[::2]


def test_untyped_constructors_fill_copy_clone_resize_vs_torch():
    torch = pytest.importorskip("torch")
    assert ember.UntypedStorage([1, 2, 300]).tolist() == torch.UntypedStorage([1, 2, 300]).tolist()
    assert ember.UntypedStorage(5).nbytes() == torch.UntypedStorage(5).nbytes() == 5
    assert ember.UntypedStorage().nbytes() == 0
    with pytest.raises(RuntimeError, match="Expected a sequence type"):
        ember.UntypedStorage(ember.arange(3))
    with pytest.raises(RuntimeError):
        torch.UntypedStorage(torch.arange(3))
    with pytest.raises(RuntimeError, match="of type str instead of int"):
        ember.UntypedStorage("ab")
    x = ember.arange(6.)
    s = x.untyped_storage()
    assert s.fill_(300) is s
    assert s.tolist() == [44] * 24 and x.numpy().view(np.uint8).tolist() == [44] * 24
    src = ember.tensor([1.5, 2.5, 3.5, 4.5, 5.5, 6.5]).untyped_storage()
    s.copy_(src)
    assert x.tolist() == [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]
    with pytest.raises(RuntimeError, match="size does not match, self was 24 bytes but src was 4 bytes"):
        s.copy_(ember.UntypedStorage(4))
    with pytest.raises(RuntimeError, match="size does not match, self was 24 bytes but src was 4 bytes"):
        torch.arange(6.).untyped_storage().copy_(torch.UntypedStorage(4))
    c = s.clone()
    assert c.data_ptr() != s.data_ptr() and c.tolist() == s.tolist()
    c[0] = 0
    assert s[0] != 0 or x.numpy().view(np.uint8)[0] == s[0]
    # a standalone storage resizes (keeping its prefix), as torch's
    es, ts = ember.UntypedStorage([1, 2, 3]), torch.UntypedStorage([1, 2, 3])
    es.resize_(5), ts.resize_(5)
    assert es.nbytes() == ts.nbytes() == 5 and es.tolist()[:3] == ts.tolist()[:3] == [1, 2, 3]
    es.resize_(2), ts.resize_(2)
    assert es.tolist() == ts.tolist() == [1, 2]
    assert es.resizable()
    # a tensor's storage cannot move under the tensor's views in ember
    assert not s.resizable()
    with pytest.raises(NotImplementedError, match="resize_ of a storage that tensors view"):
        s.resize_(8)
    s.resize_(24)               # same size: nothing to do
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.UntypedStorage(3).resize_(-1)


def test_untyped_repr_and_type():
    s = ember.UntypedStorage([1, 2])
    assert repr(s) == " 1\n 2\n[ember.storage.UntypedStorage(device=cpu) of size 2]"
    assert s.type() == "ember.storage.UntypedStorage"
    assert s.get_device() == -1 and not s.is_cuda
    assert s.cpu() is s and s.to(device="cpu") is s


# ---------------------------------------------------------------------- TypedStorage
@pytest.fixture
def typed_warn_reset():
    _st._reset_warn_typed_storage_removal()
    yield
    _st._reset_warn_typed_storage_removal()


def test_typed_storage_warns_once_userwarning(typed_warn_reset):
    torch = pytest.importorskip("torch")
    import torch.storage as tst
    tst._reset_warn_typed_storage_removal()
    x = ember.arange(3.)
    with warnings.catch_warnings(record=True) as ew:
        warnings.simplefilter("always")
        x.storage()
        x.storage()
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        torch.arange(3.).storage()
        torch.arange(3.).storage()
    assert [w.category for w in ew] == [w.category for w in tw] == [UserWarning]
    assert str(ew[0].message) == str(tw[0].message)
    assert ew[0].filename == __file__            # attributed to the caller
    _st._set_always_warn_typed_storage_removal(True)
    try:
        with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
            ember.TypedStorage(3)
    finally:
        _st._set_always_warn_typed_storage_removal(False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_typed_storage_values_vs_torch(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(abs(hash(dtype + "t")) % 2**32)
    a = _data(rng, (2, 3), dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        es, ts = ember.tensor(a).storage(), torch.tensor(a).storage()
    assert isinstance(es, ember.TypedStorage)
    assert es.dtype is getattr(ember, dtype) and len(es) == len(ts) == 6 and es.size() == 6
    assert es.nbytes() == ts.nbytes() and es.element_size() == ts.element_size()
    assert es.tolist() == ts.tolist()
    assert es[-1] == ts[-1] and es[2] == ts[2]
    assert es.pickle_storage_type() == ts.pickle_storage_type()
    assert es.type() == ts.type().replace("torch.", "ember.")
    assert es.untyped().data_ptr() == es.data_ptr()


def test_typed_storage_setitem_fill_copy_errors_vs_torch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x, y = ember.tensor([1.5, 2.5, 3.5]), torch.tensor([1.5, 2.5, 3.5])
        es, ts = x.storage(), y.storage()
        for idx, val in ((0, 3.0), (-1, 7), (slice(0, 2), 1), (1, ember.tensor(4.))):
            es[idx] = val
            ts[idx] = torch.tensor(val.item()) if isinstance(val, ember.Tensor) else val
            assert es.tolist() == ts.tolist() == x.tolist()
        es.fill_(2.5), ts.fill_(2.5)
        assert x.tolist() == y.tolist() == [2.5] * 3
        for bad in (3, -4):
            with pytest.raises(IndexError, match="out of range for storage of size 3"):
                es[bad]
            with pytest.raises(IndexError):
                ts[bad]
        with pytest.raises(RuntimeError, match="slices are only supported in UntypedStorage.__getitem__"):
            es[0:2]
        with pytest.raises(TypeError, match="can't assign a str"):
            es[0] = "a"
        # copy_ is a byte copy: an int storage of equal bytes is reinterpreted (as torch)
        src_e, src_t = ember.tensor([1, 2, 3], dtype=ember.int32).storage(), torch.tensor(
            [1, 2, 3], dtype=torch.int32).storage()
        es.copy_(src_e), ts.copy_(src_t)
        assert es.tolist() == ts.tolist()
        with pytest.raises(RuntimeError, match="size does not match, self was 12 bytes but src was 24 bytes"):
            es.copy_(ember.arange(3).storage())
        # conversions
        assert es.double().dtype is ember.float64 and es.double().tolist() == ts.double().tolist()
        assert es.float() is es


def test_typed_storage_constructors_vs_torch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ember.TypedStorage([1.5, 2], dtype=ember.int64).tolist() == \
            torch.TypedStorage([1.5, 2], dtype=torch.int64).tolist() == [1, 2]
        assert ember.TypedStorage(2, dtype=ember.int64).size() == 2
        assert ember.TypedStorage().dtype is ember.float32 and len(ember.TypedStorage()) == 0
        w = ember.TypedStorage(wrap_storage=ember.UntypedStorage(9), dtype=ember.float32)
        assert w.size() == torch.TypedStorage(wrap_storage=torch.UntypedStorage(9), dtype=torch.float32).size() == 2
        with pytest.raises(TypeError, match="wrap_storage' must be UntypedStorage"):
            ember.TypedStorage(wrap_storage=ember.arange(3).storage(), dtype=ember.float32)
        assert repr(ember.TypedStorage([1, 2], dtype=ember.int64)) == \
            " 1\n 2\n[ember.storage.TypedStorage(dtype=ember.int64, device=cpu) of size 2]"
        # legacy classes: constructors of TypedStorage, isinstance by dtype
        f = ember.FloatStorage([1, 2, 3])
        assert type(f) is ember.TypedStorage and f.dtype is ember.float32 and f.tolist() == [1.0, 2.0, 3.0]
        assert isinstance(f, ember.FloatStorage) and not isinstance(f, ember.DoubleStorage)
        assert ember.FloatStorage(3).tolist() == [0.0] * 3 and len(torch.FloatStorage(3)) == 3
        assert isinstance(ember.arange(3).storage(), ember.LongStorage)
        assert ember.arange(3.).storage_type() is ember.FloatStorage
        assert repr(ember.FloatStorage) == "<class 'ember.FloatStorage'>"
        assert ember.FloatStorage(wrap_storage=ember.UntypedStorage(8)).size() == 2
        with pytest.raises(RuntimeError, match="'dtype' cannot be specified"):
            ember.FloatStorage(3, dtype=ember.float64)
        for name in ("DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "IntStorage",
                     "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage", "ComplexFloatStorage",
                     "ComplexDoubleStorage"):
            assert repr(getattr(ember, name).dtype).split(".")[1] == repr(getattr(torch, name).dtype).split(".")[1]


def test_is_storage():
    torch = pytest.importorskip("torch")
    x = ember.arange(3.)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e_obj, t_obj in ((x.untyped_storage(), torch.arange(3.).untyped_storage()),
                             (x.storage(), torch.arange(3.).storage()), (x, torch.arange(3.)), (3, 3)):
            assert ember.is_storage(e_obj) == torch.is_storage(t_obj)


# ---------------------------------------------------------------------- set_ / is_set_to
def test_set_storage_offset_size_stride_vs_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a = rng.standard_normal(24).astype(np.float32)
    base_e, base_t = ember.tensor(a), torch.tensor(a)
    se, st = base_e.untyped_storage(), base_t.untyped_storage()
    for offset, size, stride in ((2, (3,), (2,)), (0, (2, 3), (3, 1)), (5, (2, 2), (1, 4)), (1, (4, 2), (5, 2)),
                                 (0, (0,), (1,))):
        te = ember.tensor([]).set_(se, offset, size, stride)
        tt = torch.tensor([]).set_(st, offset, size, stride)
        assert te.tolist() == tt.tolist() and te.stride() == tt.stride()
        assert te.storage_offset() == tt.storage_offset()
        assert te.untyped_storage().data_ptr() == se.data_ptr()
    # stride defaults to contiguous; no size: the whole storage
    te, tt = ember.tensor([]).set_(se, 3, (2, 3)), torch.tensor([]).set_(st, 3, (2, 3))
    assert te.tolist() == tt.tolist() and te.stride() == tt.stride() == (3, 1)
    assert ember.tensor([]).set_(se).shape == (24,) and ember.tensor([]).set_().shape == (0,)
    # writes go to the shared memory, both ways
    te = ember.tensor([]).set_(se, 2, (2,), (2,))
    te[0] = 100.
    assert base_e[2].item() == 100.
    base_e[4] = -1.
    assert te[1].item() == -1.
    # views of the set_ tensor report the same storage
    assert te[1:].untyped_storage().data_ptr() == se.data_ptr() and te[1:].storage_offset() == 4


def test_set_typed_and_tensor_sources_vs_torch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y_e = ember.arange(6.).reshape(2, 3)
        y_t = torch.arange(6.).reshape(2, 3)
        te, tt = ember.tensor([]).set_(y_e), torch.tensor([]).set_(y_t)
        assert te.is_set_to(y_e) and y_e.is_set_to(te) and tt.is_set_to(y_t)
        assert te.shape == tt.shape and te.stride() == tt.stride()
        assert not y_e[0].is_set_to(y_e) and not y_t[0].is_set_to(y_t)
        assert not y_e.clone().is_set_to(y_e)
        v = y_e[:, 1:]
        tv = ember.tensor([]).set_(v)
        assert tv.storage_offset() == 1 and tv.is_set_to(v)
        assert ember.tensor([]).set_(y_e, 1, (2,)).tolist() == torch.tensor([]).set_(y_t, 1, (2,)).tolist()
        assert ember.tensor([]).set_(source=y_e, storage_offset=1, size=(2,)).tolist() == [1.0, 2.0]
        ts = y_e.storage()
        assert ember.tensor([]).set_(ts, 1, (2,)).tolist() == [1.0, 2.0]
        assert ember.tensor([], dtype=ember.int32).set_(y_e.untyped_storage(), 0, (1,)).tolist() == \
            torch.tensor([], dtype=torch.int32).set_(y_t.untyped_storage(), 0, (1,)).tolist()


def test_set_errors_vs_torch():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e_s, t_s = ember.arange(6.).untyped_storage(), torch.arange(6.).untyped_storage()
        cases = [
            (lambda m, s: m.tensor([], dtype=m.float32).set_(m.arange(3)), RuntimeError,
             "Could not set tensor of type long int to a tensor of type float"),
            (lambda m, s: m.tensor([], dtype=m.float32).set_(m.arange(3).storage()), RuntimeError,
             "Expected a Storage of type float or an UntypedStorage, but got type Long"),
            (lambda m, s: m.tensor([]).set_(s, -1, (3,)), RuntimeError, "invalid storage offset -1"),
            (lambda m, s: m.tensor([]).set_(s, 2), TypeError, "set_\\(\\) received an invalid combination"),
            (lambda m, s: m.tensor([]).set_(3), TypeError, "set_\\(\\) received an invalid combination"),
            (lambda m, s: m.tensor([]).set_(s, 0, (2, 2), (1,)), RuntimeError,
             "unequal size length \\(2\\) and stride length \\(1\\)"),
            (lambda m, s: m.tensor([1.]).requires_grad_().set_(s), RuntimeError,
             "a leaf Variable that requires grad is being used in an in-place operation"),
            (lambda m, s: m.tensor([1.]).is_set_to(3), TypeError,
             "is_set_to\\(\\): argument 'tensor' \\(position 1\\) must be Tensor, not int"),
        ]
        for fn, exc, msg in cases:
            with pytest.raises(exc, match=msg):
                fn(ember, e_s)
            with pytest.raises(exc):
                fn(torch, t_s)
        # torch grows the storage when set_ needs more; ember cannot grow memory that arrays view
        with pytest.raises(RuntimeError, match="out of bounds for storage of size 24"):
            ember.tensor([]).set_(e_s, 4, (3,))


def test_set_bumps_version_and_leaves_view_state():
    x = ember.arange(6.)
    v = x[1:]
    before = v._version
    v.set_(ember.arange(4.).untyped_storage())
    assert v._version == before + 1
    assert v._base is None and v.tolist() == [0.0, 1.0, 2.0, 3.0]
    v.detach_()                   # no longer a view: allowed


# ---------------------------------------------------------------------- shared memory, files, pickling
def test_share_memory_through_storage():
    x = ember.randn(4)
    s = x.untyped_storage()
    assert not s.is_shared()
    vals = x.tolist()
    assert s.share_memory_() is s
    assert s.is_shared() and x.is_shared() and x.tolist() == vals
    assert x.untyped_storage().data_ptr() == s.data_ptr()
    st = ember.UntypedStorage([1, 2, 3]).share_memory_()
    assert st.is_shared() and st.tolist() == [1, 2, 3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = ember.randn(3)
        assert y.storage().share_memory_().is_shared() and y.is_shared()


def test_from_file_vs_torch(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    vals = rng.standard_normal(4).astype(np.float32)
    for mod in (ember, torch):
        p = str(tmp_path / f"{mod.__name__}.bin")
        vals.tofile(p)
        t = mod.from_file(p, size=4)
        assert np.allclose(np.array(t.tolist(), dtype=np.float32), vals)
        t[1] = 9.                                     # private: the file keeps its bytes
        del t
        assert np.array_equal(np.fromfile(p, dtype=np.float32), vals)
        t = mod.from_file(p, shared=True, size=5)     # shared: grows the file, writes reach it
        t[0] = 7.
        del t
        got = np.fromfile(p, dtype=np.float32)
        assert got.shape == (5,) and got[0] == 7. and got[4] == 0.
        assert mod.from_file(p, size=2).tolist() == [7.0, float(vals[1])]
        assert mod.from_file(p, size=2, dtype=mod.int16).tolist() == \
            np.fromfile(p, dtype=np.int16)[:2].tolist()
        with pytest.raises(RuntimeError, match="smaller than the required mapping size"):
            mod.from_file(p, size=6)
        with pytest.raises(RuntimeError, match="No such file"):
            mod.from_file(str(tmp_path / "missing"), size=2)
    p = str(tmp_path / "u.bin")
    vals.tofile(p)
    assert ember.UntypedStorage.from_file(p, True, 8).tolist() == torch.UntypedStorage.from_file(p, True, 8).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ember.FloatStorage.from_file(p, False, 3).tolist() == torch.FloatStorage.from_file(p, False, 3).tolist()
        with pytest.raises(RuntimeError, match="from_file can only be called on derived classes"):
            ember.TypedStorage.from_file(p, False, 3)


def test_pickle_storages_round_trip():
    # (session 31: storages pickle as their bytes; they were refused before)
    s = (ember.randn(3) + 1).untyped_storage()
    r = pickle.loads(pickle.dumps(s))
    assert type(r) is ember.UntypedStorage and r.tolist() == s.tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = ember.randn(3).storage()
        r = pickle.loads(pickle.dumps(ts))
        assert r.dtype is ember.float32 and r.tolist() == ts.tolist()


def test_save_load_storages_round_trip(tmp_path):
    rng = np.random.default_rng(6)
    x = ember.tensor(rng.standard_normal(6).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obj = {"u": x.untyped_storage(), "view": x[2:].untyped_storage(), "t": x.storage(),
               "i": ember.tensor([1, 2, 3]).storage(), "x": x}
        path = os.path.join(tmp_path, "s.pt")
        # (torch's format, ember.save's default since session 31, refuses one storage saved as two
        # dtypes, as torch.save: "view the same data as different types"; ember's format keeps them)
        with pytest.raises(RuntimeError, match="view the same data as different types"):
            ember.save(obj, path)
        ember.save(obj, path, _use_new_zipfile_serialization=False)
        got = ember.load(path)
        assert isinstance(got["u"], ember.UntypedStorage) and got["u"].tolist() == obj["u"].tolist()
        assert got["u"] is got["view"]                      # one storage saved twice loads as one
        assert isinstance(got["t"], ember.TypedStorage) and got["t"].dtype is ember.float32
        assert got["t"].tolist() == obj["t"].tolist() and got["t"].untyped() is got["u"]
        assert got["i"].dtype is ember.int64 and got["i"].tolist() == [1, 2, 3]
        assert got["u"].data_ptr() != obj["u"].data_ptr()   # a copy in new memory
        assert ember.load(path, map_location="cpu")["t"].tolist() == obj["t"].tolist()
    from ember.fx.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        fs = ember.empty(3).untyped_storage()
    with pytest.raises(TypeError, match="storage of a fake tensor"):
        ember.save(fs, os.path.join(tmp_path, "f.pt"))


def test_copy_module_on_storages():
    import copy
    s = ember.UntypedStorage([1, 2, 3])
    c = copy.copy(s)
    d = copy.deepcopy(s)
    assert c.tolist() == d.tolist() == [1, 2, 3] and c.data_ptr() != s.data_ptr() != d.data_ptr()


def test_fake_tensor_storage_metadata():
    from ember.fx.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = ember.empty(2, 3, 4)
        s = x.untyped_storage()
        v = x[1]
        assert s.nbytes() == 96
        assert v.untyped_storage().data_ptr() == s.data_ptr()
        assert v.data_ptr() == s.data_ptr() + v.storage_offset() * 4
        assert v.storage_offset() == 12
        with pytest.raises(RuntimeError):
            s[0]


def test_aliasing_check_under_compile():
    def f(a, b):
        same = a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        return a * 2 if same else a + 1

    x = ember.randn(4)
    cf = ember.compile(f, backend="eager")
    assert cf(x, x[1:]).tolist() == (x * 2).tolist()
    assert cf(x, ember.randn(3)).tolist() == (x + 1).tolist()
