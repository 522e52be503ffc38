"""torch's custom-backend recipe through ``ember._functorch`` / ``ember._dynamo.backends``
(``aot_module_simplified``, ``make_boxed_func``, ``aot_autograd``, the partitioners, the
functorch config) and the ``ember._functorch.aot_autograd`` entry points: values and gradients
against eager ember, the compilers' calling pattern against torch's."""
import numpy as np
import pytest

import ember
from ember._dynamo.backends.common import aot_autograd
from ember._functorch import config as fconfig
from ember._functorch import partitioners
from ember._functorch.aot_autograd import (aot_function, aot_module, aot_module_simplified, make_boxed_compiler,
                                           make_boxed_func)


def _data(*shape, grad=False, seed=None):
    rng = np.random.default_rng(seed)
    return ember.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)


def _fn(x, w):
    return ((x @ w).relu() * 1.5).sum()


def _recipe(log):
    def my_compiler(gm, example_inputs):
        log.append(("compile", len(example_inputs), gm.code))
        return make_boxed_func(gm.forward)

    def my_backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=my_compiler)
    return my_backend


def test_recipe_matches_eager_and_compiles_forward_and_backward():
    ember._dynamo.reset()
    log = []
    x, w = _data(4, 5, seed=1), _data(5, 3, grad=True, seed=2)
    out = ember.compile(_fn, backend=_recipe(log))(x, w)
    out.backward()
    g = w.grad.clone()
    w.grad = None
    ref = _fn(x, w)
    ref.backward()
    assert np.allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    assert np.allclose(g.numpy(), w.grad.numpy(), rtol=1e-6)
    assert [e[0] for e in log] == ["compile", "compile"]     # the forward, then the backward graph
    assert "def forward" in log[0][2]


def test_recipe_compiler_calls_match_torch():
    torch = pytest.importorskip("torch")
    from torch._functorch.aot_autograd import aot_module_simplified as t_ams
    from torch._functorch.aot_autograd import make_boxed_func as t_box
    tlog = []

    def t_compiler(gm, example_inputs):
        tlog.append(len(example_inputs))
        return t_box(gm.forward)

    def t_backend(gm, example_inputs):
        return t_ams(gm, example_inputs, fw_compiler=t_compiler)
    torch._dynamo.reset()
    tx = torch.randn(4, 5)
    tw = torch.randn(5, 3, requires_grad=True)
    torch.compile(lambda x, w: ((x @ w).relu() * 1.5).sum(), backend=t_backend)(tx, tw).backward()
    ember._dynamo.reset()
    log = []
    x, w = _data(4, 5, seed=3), _data(5, 3, grad=True, seed=4)
    ember.compile(_fn, backend=_recipe(log))(x, w).backward()
    assert len(log) == len(tlog) == 2
    assert log[0][1] == tlog[0]          # the forward graph takes the same inputs


def test_unboxed_compiler_and_inference_compiler():
    ember._dynamo.reset()
    seen = []

    def fw(gm, ex):
        seen.append("fw")
        return gm.forward

    def inf(gm, ex):
        seen.append("inference")
        return gm.forward
    backend = aot_autograd(fw_compiler=fw, inference_compiler=inf)
    x = _data(6, seed=5)
    f = ember.compile(lambda t: t.sin() * 2 + 1, backend=backend)
    assert np.allclose(f(x).numpy(), (x.sin() * 2 + 1).numpy())
    assert seen == ["inference"]


def test_make_boxed_compiler_and_bad_arguments():
    ember._dynamo.reset()
    boxed = make_boxed_compiler(lambda gm, ex: gm.forward)
    x = _data(3, 4, seed=6)
    f = ember.compile(lambda t: t.exp().mean(1), backend=aot_autograd(fw_compiler=boxed))
    assert np.allclose(f(x).numpy(), x.exp().mean(1).numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="fw_compiler is required"):
        aot_autograd(bw_compiler=boxed)
    with pytest.raises(TypeError, match="unexpected keyword"):
        aot_autograd(fw_compiler=boxed, fw_compile=boxed)
    with pytest.raises(TypeError, match="returned int"):
        ember._dynamo.reset()
        ember.compile(lambda t: t + 1, backend=aot_autograd(fw_compiler=lambda gm, ex: 3))(x)


@pytest.mark.parametrize("partition_fn", [partitioners.default_partition,
                                          partitioners.min_cut_rematerialization_partition])
def test_partitioners_give_eager_gradients(partition_fn):
    ember._dynamo.reset()
    saved = []

    def bw(gm, ex):
        saved.append(len(ex))
        return gm.forward
    backend = aot_autograd(fw_compiler=lambda gm, ex: gm.forward, bw_compiler=bw, partition_fn=partition_fn)
    x = _data(8, 8, grad=True, seed=7)
    out = ember.compile(lambda t: (t.sin().exp() * t).sum(), backend=backend)(x)
    out.backward()
    g = x.grad.clone()
    x.grad = None
    (x.sin().exp() * x).sum().backward()
    assert np.allclose(g.numpy(), x.grad.numpy(), rtol=1e-5)
    assert saved


def test_custom_partition_fn_is_refused():
    with pytest.raises(NotImplementedError, match="partition_fn=.*not supported"):
        aot_autograd(fw_compiler=lambda gm, ex: gm, partition_fn=lambda *a, **k: None)


def test_partitioner_called_directly_on_a_joint_graph():
    from ember.aot import trace_joint
    x = _data(4, 4, grad=True, seed=8)
    joint = trace_joint(lambda t: (t.tanh() * t).sum(), [x])
    fw, bw = partitioners.default_partition(joint)
    assert hasattr(fw, "graph") and hasattr(bw, "graph")
    with pytest.raises(TypeError, match="joint graph"):
        partitioners.min_cut_rematerialization_partition(object())


def test_aot_function_pytrees_and_recompiles():
    calls = []

    def comp(gm, ex):
        calls.append(len(ex))
        return gm

    def f(a, scale):
        return {"s": a["x"].sin() * scale, "c": (a["y"].cos(),)}
    af = aot_function(f, fw_compiler=comp)
    a = {"x": _data(3, grad=True, seed=9), "y": _data(2, seed=10)}
    r = af(a, 2.0)
    assert set(r) == {"s", "c"} and isinstance(r["c"], tuple)
    r["s"].sum().backward()
    assert np.allclose(a["x"].grad.numpy(), 2 * np.cos(a["x"].detach().numpy()), rtol=1e-6)
    n = len(calls)
    af(a, 2.0)
    assert len(calls) == n                      # same signature: no new compile
    r3 = af({"x": _data(5, seed=11), "y": _data(2, seed=12)}, 3.0)
    assert r3["s"].shape == (5,) and len(calls) > n
    with pytest.raises(TypeError, match="must return tensors"):
        aot_function(lambda t: t.sum().item(), fw_compiler=comp)(_data(3, seed=13))
    with pytest.raises(NotImplementedError, match="dynamic=True"):
        aot_function(f, fw_compiler=comp, dynamic=True)


def test_aot_module_trains_the_module():
    ember.manual_seed(0)
    m = ember.nn.Linear(4, 2)
    am = aot_module(m, fw_compiler=lambda gm, ex: gm)
    x = _data(3, 4, seed=14)
    out = am(x)
    assert np.allclose(out.detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    out.sum().backward()
    assert m.weight.grad is not None and np.allclose(m.weight.grad.numpy(), x.numpy().sum(0)[None].repeat(2, 0),
                                                     rtol=1e-5)
    with ember.no_grad():
        m.weight.add_(1.0)
    assert np.allclose(am(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)   # updates are seen
    with pytest.raises(TypeError, match="nn.Module"):
        aot_module(lambda t: t, fw_compiler=lambda gm, ex: gm)


def test_functorch_config_budget_maps_to_aot_config():
    from ember.aot import config as aot_cfg
    assert fconfig.activation_memory_budget == 1.0 and aot_cfg.activation_memory_budget is None
    with fconfig.patch(activation_memory_budget=0.5):
        assert aot_cfg.activation_memory_budget == 0.5 and fconfig.activation_memory_budget == 0.5
    assert aot_cfg.activation_memory_budget is None
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fconfig.activation_memory_budget = 2
    with pytest.raises(ValueError, match="functionalize_rng_ops"):
        fconfig.functionalize_rng_ops = True
    with pytest.raises(AttributeError, match="no knob 'bogus'"):
        fconfig.bogus
    assert fconfig.get_config_copy() == {"activation_memory_budget": 1.0, "functionalize_rng_ops": False}


def test_registry_and_lazy_attributes():
    assert "inductor" in ember._dynamo.backends.registry.list_backends()
    assert ember._functorch.aot_autograd.make_boxed_func is make_boxed_func
    assert ember._functorch.apis.vmap is ember.func.vmap


def test_decompositions_chosen_with_get_decompositions():
    from ember._decomp import core_aten_decompositions, get_decompositions, register_decomposition
    ember._dynamo.reset()
    codes = []

    def comp(gm, ex):
        codes.append(gm.code)
        return gm.forward
    d = get_decompositions([ember.ops.aten.gelu, ember.ops.aten.mm.default])
    assert sorted(k.name for k in d) == ["gelu", "mm"]
    assert set(d) <= set(core_aten_decompositions())
    f = ember.compile(lambda t: ember.nn.functional.gelu(t).softmax(-1),
                      backend=aot_autograd(fw_compiler=comp, decompositions=d))
    x = _data(4, 6, seed=15)
    assert np.allclose(f(x).numpy(), ember.nn.functional.gelu(x).softmax(-1).numpy(), rtol=1e-6)
    assert "erf" in codes[0] and "gelu" not in codes[0] and "softmax" in codes[0]   # softmax stays whole
    reg = {}

    @register_decomposition(ember.ops.aten.relu, reg)
    def my_relu(t):
        return ember.clamp_min(t, 0)
    assert list(reg) == [ember.ops.aten.relu.op]
    with pytest.raises(ValueError, match="already in the registry"):
        register_decomposition(ember.ops.aten.relu, reg)(my_relu)
    with pytest.raises(TypeError, match="expected an ember operator"):
        get_decompositions([42])
    assert len(ember._decomp.decomposition_table) == len(core_aten_decompositions())
