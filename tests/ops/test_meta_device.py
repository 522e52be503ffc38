"""The ``meta`` device: tensors with shapes, strides and dtypes but no data (ember's fake arrays
on a device of their own). Each scenario runs the same script under ember and (where installed)
torch and compares what it prints: reprs, shapes, dtypes, devices, error types and messages."""
import copy
import io
import warnings

import numpy as np
import pytest

import ember


def _show(lib, value):
    return repr(value).replace("torch.", "ember.")


def _outcome(lib, fn):
    try:
        return _show(lib, fn())
    except Exception as e:        # the same error type and message as torch's
        return f"{type(e).__name__}: {str(e).replace('torch.', 'ember.')}"


def _tensor_script(lib):
    x = lib.empty(3, 4, device="meta")
    i = lib.zeros(2, dtype=lib.int64, device="meta")
    cases = {
        "repr": lambda: x, "int": lambda: i, "scalar": lambda: lib.empty((), device="meta"),
        "f64": lambda: lib.empty(0, 3, dtype=lib.float64, device="meta"),
        "device": lambda: (x.device, x.is_meta, x.is_cpu), "add": lambda: x + 1, "sum": lambda: x.sum(),
        "cmp": lambda: x == x, "cpu_scalar_left": lambda: lib.tensor(2.) * x,
        "cpu_scalar_right": lambda: x * lib.tensor(2.), "matmul": lambda: x @ x.t(),
        "strides": lambda: (x.t().stride(), x.expand(2, 3, 4).stride(), x[0, 1:3].stride(), x.numel()),
        "reshape": lambda: (x.view(12).shape, x.reshape(2, 6).is_contiguous(), x.t().contiguous().stride()),
        "softmax": lambda: x.softmax(-1), "where": lambda: lib.where(x > 0, x, 0.),
        "argmax": lambda: x.argmax(1), "half": lambda: x.to(lib.float16), "clone": lambda: x.clone(),
        "layer_norm": lambda: lib.nn.functional.layer_norm(x, (4,)),
        "conv": lambda: lib.nn.functional.conv2d(lib.empty(1, 3, 8, 8, device="meta"),
                                                 lib.empty(4, 3, 3, 3, device="meta")),
        "cat": lambda: (lib.cat([x, x]).shape, lib.stack([x, x]).shape),
        "factories": lambda: (lib.randn(2, 3, device="meta"), lib.arange(5, device="meta"),
                              lib.full((2,), 3, device="meta"), lib.tensor([1, 2], device="meta"),
                              lib.linspace(0, 1, 5, device="meta"), lib.eye(3, device="meta"),
                              lib.randint(0, 5, (3,), device="meta")),
        "likes": lambda: (lib.empty_like(x), lib.zeros_like(x), x.new_zeros(2), x.new_tensor([1, 2])),
        "inplace": lambda: (lib.zeros(2, device="meta").fill_(1.), lib.empty(2, device="meta").uniform_(),
                            lib.empty(2, device="meta").normal_()),
        "requires_grad": lambda: lib.empty(2, 3, device="meta", requires_grad=True),
        "grad_fn": lambda: lib.empty(2, device="meta", requires_grad=True) * 2,
        "parameter": lambda: lib.nn.Parameter(x),
        "to_meta": lambda: (lib.ones(3).to("meta"), x.to("meta") is x),
        "copy_into_meta": lambda: lib.ones(3, device="meta").copy_(lib.ones(3)),
        "data_ptr": lambda: x.data_ptr(),
        "item_many": lambda: x.item(), "item_one": lambda: x.sum().item(), "bool": lambda: bool(x.sum()),
        "float": lambda: float(x.sum()), "tolist": lambda: x.tolist(), "numpy": lambda: x.numpy(),
        "cpu": lambda: x.cpu(), "to_cpu": lambda: x.to("cpu"),
        "copy_out": lambda: lib.ones(3).copy_(lib.ones(3, device="meta")),
        "mixed": lambda: type(_raises(lambda: lib.ones(3) + lib.ones(3, device="meta"))).__name__,
    }
    return {k: _outcome(lib, f) for k, f in cases.items()}


def _raises(fn):
    try:
        fn()
    except Exception as e:
        return e
    return None


def test_meta_tensors_print_compute_and_refuse_data_as_torch():
    torch = pytest.importorskip("torch")
    mine, theirs = _tensor_script(ember), _tensor_script(torch)
    assert mine == theirs


def test_meta_tensors_without_torch():
    x = ember.empty(3, 4, device="meta")
    assert repr(x) == "tensor(..., device='meta', size=(3, 4))"
    y = (x @ x.t()).relu().sum(0)
    assert y.device == ember.device("meta") and tuple(y.shape) == (3,)
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        y.cpu()
    with pytest.raises(RuntimeError, match="cannot be called on meta tensors"):
        y.sum().item()
    with pytest.raises(NotImplementedError, match="meta device"):
        x.nonzero()


def _models():
    def sdpa(lib):
        class A(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.q = lib.nn.Linear(16, 48)

            def forward(self, x):
                q, k, v = self.q(x).view(2, 6, 3, 4, 4).unbind(2)
                return lib.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                                     v.transpose(1, 2), is_causal=True)
        return A()

    return {
        "mlp": (lambda nn: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Dropout(0.1),
                                         nn.Linear(16, 4)), lambda lib: lib.randn(5, 8)),
        "conv": (lambda nn: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                          nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                          nn.Linear(8, 10)), lambda lib: lib.randn(2, 3, 16, 16)),
        "lstm": (lambda nn: nn.LSTM(4, 8, num_layers=2, batch_first=True), lambda lib: lib.randn(3, 5, 4)),
        "mha": (lambda nn: nn.MultiheadAttention(16, 4, batch_first=True), lambda lib: (lib.randn(2, 6, 16),) * 3),
        "encoder": (lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2),
                    lambda lib: lib.randn(2, 6, 16)),
        "embedding": (lambda nn: nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 3)),
                      lambda lib: lib.randint(0, 100, (4, 7))),
        "conv_transpose": (lambda nn: nn.ConvTranspose2d(3, 4, 3, stride=2), lambda lib: lib.randn(1, 3, 5, 5)),
        "group_norm": (lambda nn: nn.Sequential(nn.Conv1d(4, 8, 3), nn.GroupNorm(2, 8), nn.SiLU()),
                       lambda lib: lib.randn(2, 4, 10)),
        "sdpa": (None, lambda lib: lib.randn(2, 6, 16)),
    }, sdpa


def _model_script(lib, name):
    models, sdpa = _models()
    build, inputs = models[name]
    with lib.device("meta"):
        m = sdpa(lib) if build is None else build(lib.nn)
        x = inputs(lib)
    y = m(*x) if isinstance(x, tuple) else m(x)
    if isinstance(y, tuple):
        y = y[0]
    y.sum().backward()
    grads = sorted({str(p.grad.device) for p in m.parameters()})
    return (tuple(y.shape), str(y.dtype).split(".")[-1], str(y.device), grads,
            sum(p.numel() for p in m.parameters()), [str(p.device) for p in m.buffers()])


@pytest.mark.parametrize("name", sorted(_models()[0]))
def test_models_build_run_and_backprop_on_meta_as_torch(name):
    torch = pytest.importorskip("torch")
    assert _model_script(ember, name) == _model_script(torch, name)


def test_model_under_meta_context_then_to_empty_and_load_state_dict():
    """The large-model loading pattern: build on meta (no memory, no initialisation work),
    then either materialise with ``to_empty`` + ``reset_parameters`` or take the checkpoint's
    tensors with ``load_state_dict(assign=True)``."""
    src = ember.nn.Linear(4, 3)
    sd = src.state_dict()
    with ember.device("meta"):
        m = ember.nn.Linear(4, 3)
        assert ember.get_default_device() == ember.device("meta")
    assert ember.get_default_device() == ember.device("cpu")
    assert m.weight.is_meta and m.weight.requires_grad
    with pytest.raises(NotImplementedError, match="to_empty"):
        m.to("cpu")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.load_state_dict(sd)          # copying into meta: a no-op, with torch's warning
    assert m.weight.is_meta and any("copying from a non-meta parameter" in str(x.message) for x in w)
    m.load_state_dict(sd, assign=True)
    assert not m.weight.is_meta and type(m.weight) is ember.nn.Parameter and m.weight.requires_grad
    x = ember.randn(2, 4)
    np.testing.assert_array_equal(m(x).detach().numpy(), src(x).detach().numpy())

    with ember.device("meta"):
        m2 = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.BatchNorm1d(3))
    m2.to_empty(device="cpu")
    for mod in m2.modules():
        if hasattr(mod, "reset_parameters"):
            mod.reset_parameters()
    assert all(p.device == ember.device("cpu") for p in m2.parameters())
    assert tuple(m2(ember.randn(5, 4)).shape) == (5, 3)


def test_initialisers_on_meta_do_no_work_and_keep_shapes():
    with ember.device("meta"):
        w = ember.empty(64, 32)
    for init in (ember.nn.init.trunc_normal_, ember.nn.init.orthogonal_, ember.nn.init.eye_,
                 ember.nn.init.kaiming_uniform_, ember.nn.init.xavier_normal_, ember.nn.init.zeros_,
                 lambda t: ember.nn.init.sparse_(t, 0.5)):
        v = w._version
        out = init(w)
        assert out is w and w.is_meta and w._version > v
    state = ember.random.get_rng_state()
    ember.nn.init.trunc_normal_(w)
    assert ember.equal(state, ember.random.get_rng_state())    # no numbers drawn


def test_optimizers_deepcopy_and_save_load_on_meta():
    with ember.device("meta"):
        m = ember.nn.Linear(4, 3)
    m2 = copy.deepcopy(m)
    assert m2.weight.is_meta and m2.weight is not m.weight
    m(ember.randn(2, 4, device="meta")).sum().backward()
    opt = ember.optim.AdamW(m.parameters(), lr=1e-3)
    opt.step()
    assert opt.state[m.weight]["exp_avg"].is_meta
    buf = io.BytesIO()
    ember.save({"w": ember.empty(2, 3, device="meta"), "sd": m.state_dict()}, buf)
    buf.seek(0)
    d = ember.load(buf, map_location="cpu")      # meta stays meta whatever map_location says (torch's)
    assert repr(d["w"]) == "tensor(..., device='meta', size=(2, 3))"
    assert d["sd"]["weight"].is_meta and tuple(d["sd"]["weight"].shape) == (3, 4)


def test_default_device_meta_for_factories_not_for_from_numpy():
    ember.set_default_device("meta")
    try:
        assert ember.empty(2).is_meta and ember.tensor([1.0]).is_meta and ember.arange(3).is_meta
        assert ember.randn(2, 2).is_meta and ember.nn.Linear(2, 2).weight.is_meta
        assert not ember.from_numpy(np.ones(2)).is_meta
        assert ember.zeros(2, device="cpu").device == ember.device("cpu")
    finally:
        ember.set_default_device(None)
    assert not ember.empty(2).is_meta


def test_compile_runs_meta_code_eagerly_and_stays_correct():
    def f(x, w):
        return (x @ w).relu().sum(-1)
    cf = ember.compile(f)
    y = cf(ember.empty(4, 3, device="meta"), ember.empty(3, 5, device="meta"))
    assert y.is_meta and tuple(y.shape) == (4,)
    a, b = ember.randn(4, 3), ember.randn(3, 5)
    np.testing.assert_allclose(cf(a, b).numpy(), f(a, b).numpy(), rtol=1e-5, atol=1e-6)

    @ember.compile
    def g(x):
        return x * 2, ember.zeros(x.shape[0], 4, device="meta").sum(1)
    r, m = g(ember.randn(3))
    assert not r.is_meta and m.is_meta

    @ember.compile
    def h(n):
        return ember.ones(n) * 2
    assert not h(3).is_meta
    with ember.device("meta"):
        assert h(3).is_meta
    assert not h(3).is_meta


def _mixing_messages(lib):
    rng = np.random.default_rng()
    a = lib.tensor(rng.standard_normal(3).astype(np.float32))
    m = lib.empty(3, device="meta")
    out = []
    for f in (lambda: a + m, lambda: m * a, lambda: lib.cat([a, m]), lambda: lib.where(a > 0, a, m),
              lambda: lib.stack([m, a]), lambda: m + lib.tensor(2.0), lambda: a.copy_(m)):
        try:
            r = f()
            out.append(("ok", str(r.device), tuple(r.shape)))
        except (RuntimeError, NotImplementedError) as e:
            out.append((type(e).__name__, str(e)))
    return out


def test_mixing_meta_and_cpu_tensors_raises_torch_messages():
    torch = pytest.importorskip("torch")
    assert _mixing_messages(ember) == _mixing_messages(torch)
