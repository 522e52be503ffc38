"""The cuda device.

CI has neither cupy nor a GPU, so:

* ``test_without_cupy_*`` check the real situation here: ``device="cuda"``
  raises an error naming what is missing, the CPU is unaffected;
* every other test runs against the numpy-backed cupy stand-in
  (``fake_cupy.py``, fixture ``fake_cupy``). They verify ember's device
  *plumbing* -- device propagation through the dispatcher and autograd, the
  array type never leaking into numpy, ``.to()``/``.cuda()``/``.cpu()`` round
  trips, mixed-device errors, ``.numpy()`` refusing like PyTorch, printing,
  modules and optimizers on the device, ``ember.cuda`` (synchronize, memory
  counters, streams, events) -- against the stand-in only. Not verified here:
  that cupy's real kernels accept every call ember's kernels make, numerical
  results on a GPU, asynchrony. Those need a lent GPU (issue 8, item 4)."""
import sys

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.runtime import cuda as rc

RNG = np.random.default_rng(7)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------- no cupy (the real CI state)
@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # `import cupy` raises ImportError
    rc._reset()
    yield
    monkeypatch.delitem(sys.modules, "cupy")
    rc._reset()


def test_without_cupy_cuda_raises_a_clear_error(no_cupy):
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0
    for make in (lambda: ember.tensor([1.0, 2.0], device="cuda"), lambda: ember.zeros(3, device="cuda"),
                 lambda: ember.ones(2).cuda(), lambda: ember.ones(2).to("cuda:0"), lambda: ember.cuda.synchronize(),
                 lambda: ember.cuda.memory_allocated()):
        with pytest.raises(RuntimeError, match=r"device='cuda' needs cupy .*cupy is not installed"):
            make()


def test_without_cupy_cpu_is_unaffected(no_cupy):
    x = ember.tensor(randn(3, 4))
    y = (x @ x.T).softmax(-1)
    assert y.device.type == "cpu" and type(y._data) is np.ndarray
    np.testing.assert_allclose(y.sum(-1).numpy(), np.ones(3), rtol=1e-6)


def test_cupy_without_a_gpu_says_so(fake_cupy):
    rc._reset()
    with fake_cupy.no_device():
        assert ember.cuda.is_available() is False
        with pytest.raises(RuntimeError, match=r"no usable NVIDIA GPU.*CUDARuntimeError.*cudaErrorNoDevice"):
            ember.zeros(2, device="cuda")
    rc._reset()


# ----------------------------------------------------------------------- with the stand-in
def _is_dev(t):
    return t.device.type == "cuda" and type(t._data).__module__.endswith("fake_cupy")


def test_creation_and_round_trips(fake_cupy):
    a = randn(3, 5)
    x = ember.tensor(a, device="cuda")
    assert _is_dev(x) and x.is_cuda and str(x.device) == "cuda:0"
    np.testing.assert_array_equal(x.cpu().numpy(), a)
    for t in (ember.zeros(2, 3, device="cuda"), ember.ones(4, device="cuda", dtype=ember.int64),
              ember.full((2,), 1.5, device="cuda"), ember.empty(3, device="cuda"), ember.arange(5, device="cuda"),
              ember.randn(3, device="cuda"), ember.zeros_like(x), ember.rand_like(x), x.new_zeros(2)):
        assert _is_dev(t), t
    np.testing.assert_array_equal(ember.arange(5, device="cuda").cpu().numpy(), np.arange(5))
    c = ember.tensor(a)
    g = c.cuda()
    assert _is_dev(g) and c.device.type == "cpu"
    assert g.to("cuda") is g and g.cuda() is g                   # already there: no copy
    h = c.to("cuda", ember.float64)
    assert _is_dev(h) and h.dtype is ember.float64
    np.testing.assert_array_equal(h.to("cpu").numpy(), a.astype(np.float64))
    assert g.to(ember.tensor(1)).device.type == "cpu"            # to(other): other's device
    assert c.to(g).device.type == "cuda"
    assert g.cpu().device.type == "cpu" and type(g.cpu()._data) is np.ndarray


def test_ops_run_the_same_kernels_on_device(fake_cupy):
    a, b = randn(4, 6), randn(6, 3)
    idx = np.array([3, 0, 2])
    lab = np.array([1, 0, 2, 2])

    def run(dev):
        x, w = ember.tensor(a, device=dev), ember.tensor(b, device=dev)
        i, y = ember.tensor(idx, device=dev), ember.tensor(lab, device=dev)
        h = x @ w
        return [h, (x * 2 - 1).exp().sum(1), x.amax(0), F.softmax(h, -1), F.cross_entropy(h, y), x[i],
                x[:, 1::2].T.contiguous(), ember.cat([x, x * 3], 0), ember.where(x > 0, x, 0.5 * x),
                x.cumsum(1), F.layer_norm(x, (6,)), x.reshape(2, 12).mean(0), x.argmax(1), x.sort(1)[0],
                F.conv2d(x.reshape(1, 1, 4, 6), w[:3, :3].reshape(1, 1, 3, 3), padding=1),
                F.gelu(x), x.clamp(-0.5, 0.5), (x > 0).sum(), x.topk(2, 1)[1]]

    for k, (g, c) in enumerate(zip(run("cuda"), run("cpu"))):
        assert _is_dev(g), (k, g.device, type(g._data))
        assert g.dtype is c.dtype and g.shape == c.shape, k
        np.testing.assert_allclose(g.cpu().numpy(), c.numpy(), rtol=1e-6, atol=1e-6, err_msg=str(k))


def test_matmul_goes_to_cupy_matmul(fake_cupy, monkeypatch):
    """matmul on cuda tensors is ``cupy.matmul`` (cuBLAS on a GPU)."""
    calls = []
    real = fake_cupy.matmul

    def spy(*a, **k):
        calls.append(type(a[0]))
        return real(*a, **k)
    monkeypatch.setattr(fake_cupy, "matmul", spy, raising=False)
    x = ember.tensor(randn(3, 4), device="cuda")
    (x @ x.T).sum()
    ember.nn.functional.linear(x, x)
    assert calls and all(t is fake_cupy.ndarray for t in calls)


def test_mixed_devices_raise(fake_cupy):
    g = ember.tensor(randn(3), device="cuda")
    c = ember.tensor(randn(3))
    msg = "Expected all tensors to be on the same device"
    for f in (lambda: g + c, lambda: c * g, lambda: ember.cat([g, c]), lambda: ember.where(g > 0, g, c),
              lambda: ember.matmul(g, c), lambda: g.masked_fill(c > 0, 1.0)):
        with pytest.raises(RuntimeError, match=msg):
            f()
    # a Python number is not a tensor on another device
    assert _is_dev(g + 1.5)


def test_numpy_on_cuda_raises_like_torch(fake_cupy):
    g = ember.tensor(randn(2, 2), device="cuda")
    with pytest.raises(TypeError, match=r"can't convert cuda:0 device type tensor to numpy\. Use Tensor\.cpu\(\)"):
        g.numpy()
    with pytest.raises(TypeError, match="can't convert cuda"):
        np.asarray(g)
    assert isinstance(g.cpu().numpy(), np.ndarray)


def test_host_reads(fake_cupy):
    a = randn(2, 3)
    g = ember.tensor(a, device="cuda")
    assert g.sum().item() == pytest.approx(float(a.astype(np.float32).sum()), rel=1e-6)
    assert g.tolist() == a.tolist()
    assert float(g[0, 1]) == pytest.approx(float(a[0, 1]))
    assert bool((g > 100).any()) is False
    r = repr(g)
    assert "device='cuda:0'" in r and r.startswith("tensor([[")
    assert repr(ember.tensor(a)) == r.replace(", device='cuda:0'", "")
    assert "device='cuda:0'" in repr(ember.tensor([1, 2], device="cuda"))


def test_autograd_on_device(fake_cupy):
    a, b = randn(4, 5), randn(5, 2)

    def run(dev):
        x = ember.tensor(a, device=dev, requires_grad=True)
        w = ember.tensor(b, device=dev, requires_grad=True)
        loss = F.softplus(x @ w).pow(2).mean()
        loss.backward()
        return x.grad, w.grad

    for g, c in zip(run("cuda"), run("cpu")):
        assert _is_dev(g)
        np.testing.assert_allclose(g.cpu().numpy(), c.numpy(), rtol=1e-5, atol=1e-7)


def test_module_and_optimizer_on_device(fake_cupy):
    ember.manual_seed(3)
    m = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.LayerNorm(8), nn.Linear(8, 3))
    ref = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.LayerNorm(8), nn.Linear(8, 3))
    ref.load_state_dict(m.state_dict())
    assert m.cuda() is m
    assert all(_is_dev(p) for p in m.parameters())
    opt, opt_ref = ember.optim.AdamW(m.parameters(), lr=0.1), ember.optim.AdamW(ref.parameters(), lr=0.1)
    x = randn(6, 5)
    for _ in range(3):
        for model, o, dev in ((m, opt, "cuda"), (ref, opt_ref, "cpu")):
            o.zero_grad()
            model(ember.tensor(x, device=dev)).square().mean().backward()
            o.step()
    assert all(_is_dev(s["exp_avg"]) for s in opt.state.values())
    for p, q in zip(m.parameters(), ref.parameters()):
        assert _is_dev(p)
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    m.cpu()
    assert all(p.device.type == "cpu" for p in m.parameters())


def test_synchronize_and_memory_counters(fake_cupy):
    assert ember.cuda.is_available() and ember.cuda.device_count() == 1
    assert ember.cuda.current_device() == 0
    assert ember.cuda.get_device_capability() == (9, 0)
    before = fake_cupy.Device.synchronizations
    ember.cuda.synchronize()
    assert fake_cupy.Device.synchronizations == before + 1
    base = ember.cuda.memory_allocated()
    x = ember.zeros(1000, device="cuda", dtype=ember.float64)
    assert ember.cuda.memory_allocated() - base == 8000
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    del x
    assert ember.cuda.memory_allocated() == base
    assert ember.cuda.max_memory_allocated() >= base + 8000        # freed blocks stay reserved
    ember.cuda.empty_cache()
    assert ember.cuda.memory_reserved() == ember.cuda.memory_allocated()


def test_streams_and_events(fake_cupy):
    default = ember.cuda.current_stream()
    assert default == ember.cuda.default_stream() and default.cuda_stream == 0
    s = ember.cuda.Stream()
    assert s != default
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream() == s
        assert fake_cupy.cuda.get_current_stream().ptr == s.cuda_stream   # cupy (and Triton) launch there
        y = ember.ones(3, device="cuda") * 2
    assert ember.cuda.current_stream() == default
    assert _is_dev(y)
    default.wait_stream(s)
    assert default._cs.waited                                          # an event recorded on s
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    start.record()
    ember.ones(10, device="cuda").sum()
    end.record()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0
    assert start._ev.stream is fake_cupy.cuda.get_current_stream()     # recorded on the current stream
    s.synchronize()
    assert s._cs.synchronizations == 1
    with pytest.raises(Exception, match="cudaErrorInvalidResourceHandle"):
        ember.cuda.Event().elapsed_time(ember.cuda.Event())            # timing disabled


@pytest.mark.parametrize("name", ["mlp", "nanogpt", "resnet", "lstm"])
def test_benchmark_models_on_device(fake_cupy, name):
    """Each benchmark model (small scale): forward, loss and parameter gradients on
    cuda equal the CPU's, and everything stays on the device."""
    import copy
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from benchmarks.models import BUILDERS
    ember.manual_seed(0)
    case = BUILDERS[name](ember, scale=0.05)
    x = case.make_input()
    ref = copy.deepcopy(case.model)
    model = case.model.cuda()
    xg = x.cuda()
    loss = case.loss(model(xg), xg)
    loss.backward()
    want = case.loss(ref(x), x)
    want.backward()
    assert _is_dev(loss)
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        assert _is_dev(p.grad), n
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.numpy(), rtol=2e-4, atol=1e-6, err_msg=n)
    for b in model.buffers():
        assert b.device.type == "cuda"


def test_copies_across_devices_and_state(fake_cupy):
    import copy
    import io
    a = randn(2, 3)
    legacy = ember.Tensor(a.tolist(), device="cuda")        # the legacy constructor
    assert _is_dev(legacy)
    g = ember.zeros(2, 3, device="cuda")
    src = ember.tensor(a, requires_grad=True)
    out = g.clone().copy_(src)                              # cpu -> cuda, differentiable
    assert _is_dev(out)
    out.sum().backward()
    assert src.grad.device.type == "cpu"
    np.testing.assert_array_equal(src.grad.numpy(), np.ones((2, 3), np.float32))
    h = ember.zeros(2, 3)
    h.copy_(ember.tensor(a, device="cuda"))                 # cuda -> cpu
    np.testing.assert_array_equal(h.numpy(), a)
    m, ref = nn.Linear(3, 2).cuda(), nn.Linear(3, 2)
    m.load_state_dict(ref.state_dict())                     # CPU checkpoint into a cuda model
    assert _is_dev(m.weight)
    np.testing.assert_array_equal(m.weight.detach().cpu().numpy(), ref.weight.detach().numpy())
    d = copy.deepcopy(m)
    assert _is_dev(d.weight) and d.weight._data is not m.weight._data
    buf = io.BytesIO()
    ember.save({"w": m.weight.detach()}, buf)
    buf.seek(0)
    back = ember.load(buf)["w"]
    assert _is_dev(back)
    buf.seek(0)
    assert ember.load(buf, map_location="cpu")["w"].device.type == "cpu"
