"""ember.__version__ / ember.version, ember.accelerator, ember.get_device_module and
Tensor.pin_memory / is_pinned, against torch 2.13's CPU build.

This machine has no GPU and no cupy: ember answers as a CPU-only torch does. The cuda
path is exercised through the numpy-backed cupy stand-in of tests/cuda_device (loaded
by path, plus the pinned-memory and runtime queries these features use): what those
tests verify is verified against that stand-in only.
"""
import importlib.util
import os
import re
import sys
import types
import warnings

import numpy as np
import pytest

import ember
from oracle import assert_same_error
import ember.version as ev
from ember.version import EmberVersion

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _torch():
    return pytest.importorskip("torch")




# ----------------------------------------------------------------------------- version
def _pyproject_version():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["version"]


def test_version_value_and_type():
    v = ember.__version__
    assert isinstance(v, str) and isinstance(v, EmberVersion)
    assert v is ev.__version__
    from ember import __version__
    assert __version__ is v
    try:
        from importlib.metadata import version
        expected = version("ember")
    except Exception:
        expected = _pyproject_version()
    assert str(v) == expected
    assert v >= (0, 1) and v >= "0.1" and v == "0.1" and v < (1,) and v < "1.0" and v > "0.0.9"
    assert not (v != "0.1")
    assert {v: 1}[str(v)] == 1 and hash(v) == hash(str(v))


def test_version_falls_back_to_pyproject(monkeypatch):
    import importlib.metadata as md

    def missing(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "version", missing)
    assert ev._package_version() == _pyproject_version() == "0.1.0"


def test_version_module_attributes():
    torch = _torch()
    import torch.version as tv
    assert set(tv.__all__) <= set(ev.__all__)
    assert ev.debug is False and ev.hip is None and ev.rocm is None and ev.xpu is None
    assert ev.cuda is None                      # no usable cuda backend here (no cupy / GPU)
    assert ev.git_version == "Unknown" or re.fullmatch(r"[0-9a-f]{40}", ev.git_version)
    assert ember.version is ev
    with pytest.raises(AttributeError):
        ev.not_there
    del torch


def test_git_version_reads_the_checkout():
    if not os.path.isdir(os.path.join(ROOT, ".git")) and not os.path.isfile(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    import subprocess
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("git not runnable")
    # HEAD may move while other commits land: compare with a fresh read
    assert ev._git_version() in (head, subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                                                       capture_output=True, text=True).stdout.strip())


_VERSIONS = ["0.1.0", "2.13.0+cpu", "1.10.0a", "1.10.0a0+git12ab", "2.0.0rc1", "1.2.3.post4", "1.2.dev5",
             "1!0.5", "0.1", "parrot", "2.13.0"]
_OPERANDS = ["0.1", "0.1.0", "2.13", "2.13.0+cpu", "1.10.0a", "1.10", "1.10.0b1", "1.2.3", "1.2.3.post5", "1.2",
             "parrot", "zebra", (0, 1), (2, 13), (2, 13, 0), (1, 10), (1,), [0, 1, 0], ("a", "b"), 3, None, 1.5]


def test_comparisons_match_torch_version():
    _torch()
    from torch.torch_version import TorchVersion
    from torch._vendor.packaging.version import Version
    ops = ["__eq__", "__lt__", "__le__", "__gt__", "__ge__"]
    for s in _VERSIONS:
        e, t = EmberVersion(s), TorchVersion(s)
        assert str(e) == str(t)
        for o in _OPERANDS + [Version("0.1"), Version("2.13.0"), Version("1.10.0a0")]:
            for op in ops:
                sym = {"__eq__": "==", "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}[op]
                code = f"a {sym} b"
                try:
                    want = ("ok", eval(code, {"a": t, "b": o}))
                except TypeError as ex:
                    want = ("TypeError", None)
                    del ex
                try:
                    got = ("ok", eval(code, {"a": e, "b": o}))
                except TypeError:
                    got = ("TypeError", None)
                assert got == want, (s, op, o)
            # reflected: operand on the left
            if isinstance(o, str):
                assert (o < e) == (o < t) and (o >= e) == (o >= t) and (o == e) == (o == t)


def test_not_equal_is_consistent():
    """Deliberate difference: torch leaves != to str (torch.__version__ != (2, 13, 0) is True
    even when == says True); ember's != is the negation of ==."""
    v = EmberVersion("2.13.0")
    assert v == (2, 13, 0) and not (v != (2, 13, 0))
    assert EmberVersion("2.13.0+cpu") != (2, 13, 0)            # a local label is part of the version
    assert v != (2, 12) and v != "2.12"
    assert EmberVersion("0.1.0") == "0.1" and not (EmberVersion("0.1.0") != "0.1")
    assert (EmberVersion("x") != "y") and not (EmberVersion("x") != "x")
    assert EmberVersion("1.0") != 3 and EmberVersion("1.0") != None  # noqa: E711


def test_random_versions_order_like_packaging():
    _torch()
    from torch._vendor.packaging.version import Version
    rng = np.random.default_rng()
    for _ in range(300):
        def draw():
            s = ".".join(str(int(x)) for x in rng.integers(0, 4, size=int(rng.integers(1, 4))))
            r = rng.random()
            if r < 0.2:
                s += ["a", "b", "rc"][int(rng.integers(0, 3))] + str(int(rng.integers(0, 3)))
            elif r < 0.35:
                s += ".post" + str(int(rng.integers(0, 3)))
            if rng.random() < 0.2:
                s += ".dev" + str(int(rng.integers(0, 3)))
            if rng.random() < 0.2:
                s += "+" + ["cpu", "1", "cu121", "abc.2"][int(rng.integers(0, 4))]
            return s
        a, b = draw(), draw()
        for op in ("__lt__", "__eq__", "__gt__", "__le__"):
            assert getattr(EmberVersion(a), op)(b) == getattr(Version(a), op)(Version(b)), (a, op, b)


def test_nothing_relies_on_version_being_none():
    pattern = re.compile(r"__version__\s*(is|==)\s*None|__version__\", None\)\s*is None")
    for sub in ("ember", "tests", "benchmarks"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, sub)):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                        assert not pattern.search(f.read()), os.path.join(dirpath, name)


# ----------------------------------------------------------------------------- accelerator (no GPU here)
def _no_cuda():
    if ember.cuda.is_available():
        pytest.skip("this test describes a machine without a usable cuda backend")


def test_accelerator_queries_match_cpu_torch():
    torch = _torch()
    _no_cuda()
    A, TA = ember.accelerator, torch.accelerator
    assert A.current_accelerator() is None and TA.current_accelerator() is None
    assert A.current_accelerator(check_available=True) is None
    assert A.is_available() is False is TA.is_available()
    assert A.device_count() == 0 == TA.device_count()
    for name in ("current_device_index", "synchronize", "current_stream", "empty_cache", "memory_stats",
                 "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
                 "reset_peak_memory_stats", "reset_accumulated_memory_stats", "get_memory_info",
                 "empty_host_cache"):
        assert_same_error(getattr(A, name), getattr(TA, name))
    for arg in (0, 1):
        assert_same_error(lambda: A.set_device_index(arg), lambda: TA.set_device_index(arg))
        assert_same_error(lambda: A.synchronize(arg), lambda: TA.synchronize(arg))
        assert_same_error(lambda: A.current_stream(arg), lambda: TA.current_stream(arg))
    for arg in ("cuda:0", "cuda", "cpu"):
        assert_same_error(lambda: A.set_device_index(arg), lambda: TA.set_device_index(arg))
        assert_same_error(lambda: A.synchronize(arg), lambda: TA.synchronize(arg))
        assert_same_error(lambda: A.set_device_index(ember.device(arg)), lambda: TA.set_device_index(torch.device(arg)))
    assert_same_error(lambda: A.set_device_index(None), lambda: TA.set_device_index(None))

    def enter(mod, i):
        with mod.device_index(i):
            pass
    assert_same_error(lambda: enter(A, 0), lambda: enter(TA, 0))
    with A.device_index(None):              # None: nothing to switch, no accelerator needed
        pass
    with pytest.warns(FutureWarning, match="Use `current_device_index` instead."):
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available."):
            A.current_device_idx()
    with pytest.warns(FutureWarning, match="Use `set_device_index` instead."):
        with pytest.raises(RuntimeError):
            A.set_device_idx(0)
    with pytest.raises(TypeError):
        A.set_stream(None)
    with pytest.raises(TypeError):
        TA.set_stream(None)
    for name in TA.__all__:
        if name != "Graph" and name != "get_device_capability":
            assert hasattr(A, name), name


def test_get_device_module_matches_torch():
    torch = _torch()
    _no_cuda()
    cpu = ember.get_device_module()
    assert cpu is ember.get_device_module("cpu") is ember.get_device_module(ember.device("cpu"))
    assert torch.get_device_module() is torch.cpu
    for name in ("is_available", "device_count", "current_device", "is_initialized"):
        assert getattr(cpu, name)() == getattr(torch.cpu, name)()
    cpu.synchronize()
    cpu.set_device("cpu")
    s = cpu.Stream()
    assert cpu.current_stream() is not s
    with cpu.stream(s):
        assert cpu.current_stream() is s
    assert cpu.current_stream() is not s
    ev_ = cpu.Event()
    ev_.record()
    assert ev_.query() is True
    assert ember.get_device_module("cuda") is ember.cuda
    assert ember.get_device_module(ember.device("cuda:1")) is ember.cuda
    for bad in ("meta", 1, 2.5):
        assert_same_error(lambda: ember.get_device_module(bad), lambda: torch.get_device_module(bad))
    with pytest.raises(RuntimeError, match="foo"):
        ember.get_device_module("foo")


# ----------------------------------------------------------------------------- pin_memory (no GPU here)
def test_pin_memory_matches_cpu_torch():
    torch = _torch()
    _no_cuda()
    rng = np.random.default_rng()
    for shape in [(2,), (3, 4), ()]:
        x = rng.standard_normal(shape).astype(np.float32)
        e, t = ember.tensor(x), torch.from_numpy(x)
        assert e.is_pinned() is False is t.is_pinned()
        assert_same_error(lambda: e.pin_memory(), lambda: t.pin_memory())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert_same_error(lambda: ember.ones(2).pin_memory("cpu"), lambda: torch.ones(2).pin_memory("cpu"))
    with pytest.warns(DeprecationWarning, match="The argument 'device' of Tensor.is_pinned\\(\\) is deprecated"):
        assert ember.ones(2).is_pinned("cuda") is False
    with pytest.warns(DeprecationWarning, match="The argument 'device' of Tensor.pin_memory\\(\\) is deprecated"):
        with pytest.raises(RuntimeError):
            ember.ones(2).pin_memory("cuda")


def test_dataloader_pin_memory_warns_under_the_same_condition():
    _no_cuda()
    from ember.utils.data import DataLoader, TensorDataset
    ds = TensorDataset(ember.randn(4, 2))
    with pytest.warns(UserWarning, match="no accelerator is found"):
        batches = list(DataLoader(ds, batch_size=2, pin_memory=True))
    assert all(not b[0].is_pinned() for b in batches)


# ----------------------------------------------------------------------------- the cuda path, on the stand-in
@pytest.fixture
def fake_cuda(monkeypatch):
    """tests/cuda_device/fake_cupy.py (fresh copy) as ``cupy``, with two devices, pinned host
    memory (tracked address ranges) and the runtime queries ember.version / accelerator use."""
    from ember.inductor import config
    from ember.runtime import cuda as rc
    spec = importlib.util.spec_from_file_location("_ember_fake_cupy_va",
                                                  os.path.join(ROOT, "tests", "cuda_device", "fake_cupy.py"))
    fc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fc)
    fc.reset()
    fc.cuda.runtime.device_count = 2
    pinned = []

    def alloc_pinned_memory(nbytes):
        buf = bytearray(nbytes)
        arr = np.frombuffer(buf, dtype=np.uint8)
        pinned.append((arr.__array_interface__["data"][0], nbytes, buf))
        return buf

    def pointer_attributes(ptr):
        host = any(start <= ptr < start + n for start, n, _ in pinned)
        return types.SimpleNamespace(type=1 if host else 0)

    rt = fc.cuda.runtime
    rt.pointerGetAttributes = pointer_attributes
    rt.memGetInfo = lambda: (70 << 30, 80 << 30)
    rt.runtimeGetVersion = lambda: 12040
    fc.cuda.alloc_pinned_memory = alloc_pinned_memory
    host_pool = types.SimpleNamespace(freed=0)
    host_pool.free_all_blocks = lambda: setattr(host_pool, "freed", host_pool.freed + 1)
    fc.get_default_pinned_memory_pool = lambda: host_pool
    fc._host_pool = host_pool
    monkeypatch.setattr(config, "triton_precompile", False)
    monkeypatch.setitem(sys.modules, "cupy", fc)
    rc._reset()
    yield fc
    monkeypatch.delitem(sys.modules, "cupy")
    rc._reset()


def test_accelerator_with_cuda(fake_cuda):
    A = ember.accelerator
    assert A.current_accelerator() == ember.device("cuda") == A.current_accelerator(check_available=True)
    assert A.is_available() and A.device_count() == 2
    assert A.current_device_index() == 0
    A.set_device_index(1)
    assert A.current_device_index() == 1 == ember.cuda.current_device()
    A.set_device_index("cuda:0")
    assert A.current_device_index() == 0
    with pytest.raises(ValueError, match="cpu doesn't match the current accelerator cuda"):
        A.set_device_index("cpu")
    with pytest.raises(ValueError, match="Expected a ember.device with a specified index or an integer"):
        A.set_device_index(None)
    A.set_device_index(1)
    A.set_device_index("cuda")          # ember.device("cuda") has index 0 (torch's has None)
    assert A.current_device_index() == 0
    with A.device_index(1):
        assert A.current_device_index() == 1
    assert A.current_device_index() == 0
    n = fake_cuda.Device.synchronizations
    A.synchronize()
    A.synchronize(ember.device("cuda:1"))
    assert fake_cuda.Device.synchronizations == n + 2
    s = A.current_stream()
    assert isinstance(s, ember.cuda.Stream) and s == ember.cuda.current_stream()
    new = ember.cuda.Stream()
    A.set_stream(new)
    assert A.current_stream() == new
    with pytest.raises(TypeError, match="must be ember.cuda.Stream"):
        A.set_stream(ember.get_device_module("cpu").Stream())
    x = ember.ones(256, device="cuda")
    stats = A.memory_stats()
    assert list(stats) == sorted(stats) and A.memory_allocated() >= x.nbytes
    assert A.memory_reserved() >= A.memory_allocated() and A.max_memory_allocated() >= A.memory_allocated()
    A.empty_cache()
    assert A.get_memory_info() == (70 << 30, 80 << 30)
    A.empty_host_cache()
    assert fake_cuda._host_pool.freed == 1
    for name in ("max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats"):
        with pytest.raises(NotImplementedError, match=name):
            getattr(A, name)()
    assert ember.get_device_module() is ember.cuda
    assert ember.version.cuda == "12.4"


def test_pin_memory_with_cuda(fake_cuda):
    rng = np.random.default_rng()
    for shape in [(3, 4), (5,), ()]:
        x = rng.standard_normal(shape).astype(np.float32)
        t = ember.tensor(x, requires_grad=True)
        assert not t.is_pinned()
        p = t.pin_memory()
        assert p is not t and p.is_pinned() and not t.is_pinned()
        assert p.device == ember.device("cpu") and p.dtype == t.dtype and p.shape == t.shape
        np.testing.assert_array_equal(p.detach().numpy(), x)
        assert p.pin_memory() is p                      # already pinned
        (p * 2).sum().backward()                        # differentiable, like a copy
        np.testing.assert_array_equal(t.grad.numpy(), np.full(shape, 2.0, np.float32))
        d = p.to("cuda")
        np.testing.assert_array_equal(d.detach().cpu().numpy(), x)
    nc = ember.tensor(rng.standard_normal((4, 3)).astype(np.float32)).t()
    pn = nc.pin_memory()
    assert pn.is_pinned() and pn.is_contiguous()
    np.testing.assert_array_equal(pn.numpy(), nc.numpy())
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        ember.ones(2, device="cuda").pin_memory()
    assert ember.ones(2, device="cuda").is_pinned() is False


def test_dataloader_pins_batches_with_cuda(fake_cuda):
    import collections
    from ember.utils.data import DataLoader, Dataset, TensorDataset
    from ember.utils.data._pin_memory import pin_memory
    rng = np.random.default_rng()
    x = rng.standard_normal((6, 3)).astype(np.float32)
    ds = TensorDataset(ember.tensor(x), ember.arange(6))
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # no "no accelerator" warning now
        loader = DataLoader(ds, batch_size=4, pin_memory=True)
        batches = list(loader)
    assert [b[0].shape[0] for b in batches] == [4, 2]
    for b in batches:
        assert all(t.is_pinned() for t in b)
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches]), x)
    assert all(not b[0].is_pinned() for b in DataLoader(ds, batch_size=4))

    Pair = collections.namedtuple("Pair", "a b")

    class Custom:
        def __init__(self):
            self.pinned = False

        def pin_memory(self):
            self.pinned = True
            return self

    class Structured(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return {"x": ember.tensor(x[i]), "name": f"s{i}", "pair": Pair(ember.tensor(float(i)), i)}

    for batch in DataLoader(Structured(), batch_size=2, pin_memory=True):
        assert batch["x"].is_pinned() and isinstance(batch["pair"], Pair) and batch["pair"].a.is_pinned()
        assert batch["name"][0].startswith("s")
    out = pin_memory([ember.ones(2), (ember.zeros(1), "s", 3), range(2), Custom(), b"raw"])
    assert isinstance(out, list) and out[0].is_pinned() and isinstance(out[1], tuple) and out[1][0].is_pinned()
    assert out[1][1:] == ("s", 3) and out[2] == [0, 1] and out[3].pinned and out[4] == b"raw"
