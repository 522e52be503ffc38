"""Session 48: nn.Module / nn.utils API against PyTorch.

Each test was a mismatch: functional_call ignored tie_weights (a tied weight given under one name
kept its old value under the other), raised for a name the module lacks (torch sets it as a plain
attribute for the call) and worded its strict error its own way; register_load_state_dict_pre_hook
called the hook without the module (torch's public form passes it first); a load post-hook
returning a value raised RuntimeError (torch: AssertionError); Module.to refused complex dtypes;
the assignment errors named the type as ``Tensor`` / ``builtins.int`` (torch: ``torch.typename``)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from _util_s48 import close, same_error, torch_or_skip

import ember


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def _tied(lib):
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.Linear(3, 3))
    m[1].weight = m[0].weight
    return m


def _copy(tm, em):
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


@pytest.mark.parametrize("tie_weights", [True, False])
@pytest.mark.parametrize("entry", ["func", "stateless"])
def test_functional_call_tie_weights(tie_weights, entry):
    torch = torch_or_skip()
    tm, em = _tied(torch), _tied(ember)
    _copy(tm, em)
    em[1].weight = em[0].weight          # (loading copies values; the tie is the module's)
    outs = []
    for lib, m in ((torch, tm), (ember, em)):
        w = lib.tensor(_rand(3, 3, seed=1), requires_grad=True)
        x = lib.tensor(_rand(2, 3, seed=2))
        call = lib.func.functional_call if entry == "func" else lib.nn.utils.stateless.functional_call
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = call(m, {"0.weight": w}, (x,), tie_weights=tie_weights)
        y.pow(2).sum().backward()
        outs.append((y, w.grad, m[1].weight))
    for t, e in zip(*outs):
        close(e, t, rtol=1e-5, atol=1e-6)
    # the originals are back, still tied
    assert em[1].weight is em[0].weight


@pytest.mark.parametrize("case", ["tied_two_values", "strict_missing", "strict_unexpected",
                                  "strict_untied_missing"])
def test_functional_call_errors(case):
    def fn(lib):
        m = _tied(lib)
        x = lib.tensor(_rand(2, 3))
        w1, w2, b = lib.tensor(_rand(3, 3, seed=1)), lib.tensor(_rand(3, 3, seed=2)), lib.tensor(_rand(3))
        if case == "tied_two_values":
            return lib.func.functional_call(m, {"0.weight": w1, "1.weight": w2}, (x,))
        if case == "strict_missing":
            return lib.func.functional_call(m, {"0.weight": w1}, (x,), strict=True)
        if case == "strict_unexpected":
            return lib.func.functional_call(m, {"zz": b, "0.weight": w1, "0.bias": b, "1.bias": b}, (x,),
                                            strict=True)
        return lib.func.functional_call(m, {"0.weight": w1, "0.bias": b, "1.bias": b}, (x,), strict=True,
                                        tie_weights=False)
    same_error(fn)


def test_functional_call_strict_tied_names_count_as_given():
    torch = torch_or_skip()
    outs = []
    tm, em = _tied(torch), _tied(ember)
    _copy(tm, em)
    em[1].weight = em[0].weight
    for lib, m in ((torch, tm), (ember, em)):
        p = {"0.weight": lib.tensor(_rand(3, 3, seed=1)), "0.bias": lib.tensor(_rand(3, seed=2)),
             "1.bias": lib.tensor(_rand(3, seed=3))}
        outs.append(lib.func.functional_call(m, p, (lib.tensor(_rand(2, 3)),), strict=True))
    close(outs[1], outs[0])


def test_functional_call_unknown_name_is_a_plain_attribute_for_the_call():
    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x) * self.scale          # only defined during functional_call

    m = M()
    x = ember.tensor(_rand(3, 2))
    s = ember.tensor(2.5)
    y = ember.func.functional_call(m, {"scale": s}, (x,))
    close(y, m.lin(x) * 2.5)
    assert not hasattr(m, "scale")
    assert "scale" not in dict(m.named_parameters()) and "scale" not in dict(m.named_buffers())


def test_load_state_dict_pre_hook_gets_the_module_and_post_hook_must_not_return():
    torch = torch_or_skip()
    logs = []
    for lib in (torch, ember):
        m = lib.nn.Linear(2, 2)
        log = []
        m.register_load_state_dict_pre_hook(
            lambda mod, sd, prefix, lm, strict, missing, unexpected, errors:
            log.append((type(mod).__name__, prefix, sorted(sd), strict)))
        m.register_load_state_dict_post_hook(lambda mod, inc: inc.unexpected_keys.clear())
        res = m.load_state_dict({"weight": lib.ones(2, 2), "bias": lib.ones(2), "junk": lib.ones(1)})
        log.append((list(res.missing_keys), list(res.unexpected_keys)))
        logs.append(log)
    assert logs[0] == logs[1]

    def returning(lib):
        m = lib.nn.Linear(2, 2)
        m.register_load_state_dict_post_hook(lambda mod, inc: inc)
        return m.load_state_dict(m.state_dict())
    same_error(returning)


def test_spectral_norm_load_hook_still_internal():
    """utils.spectral_norm's load hook is registered in the internal (module-less) form."""
    torch = torch_or_skip()
    torch.manual_seed(0)
    tm = torch.nn.utils.spectral_norm(torch.nn.Linear(4, 3))
    em = ember.nn.utils.spectral_norm(ember.nn.Linear(4, 3))
    _copy(tm, em)
    x = _rand(5, 4)
    tm.eval()
    em.eval()
    close(em(ember.tensor(x)), tm(torch.tensor(x)), rtol=1e-5, atol=1e-6)
    ember.nn.utils.remove_spectral_norm(em)
    assert not em._load_state_dict_pre_hooks


def test_module_to_complex():
    torch = torch_or_skip()
    dts = []
    for lib in (torch, ember):
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.BatchNorm1d(2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.to(lib.complex64)
        dts.append({k: str(v.dtype).split(".")[-1] for k, v in m.state_dict().items()})
    assert dts[0] == dts[1]
    assert dts[1]["0.weight"] == "complex64" and dts[1]["1.num_batches_tracked"] == "int64"


@pytest.mark.parametrize("case", ["param_attr", "param_register", "module_register", "int_module"])
def test_assignment_error_type_names(case):
    torch = torch_or_skip()
    msgs = []
    for lib in (torch, ember):
        m = lib.nn.Linear(2, 2)
        try:
            if case == "param_attr":
                m.weight = lib.ones(2, 2)
            elif case == "param_register":
                m.register_parameter("extra", lib.ones(2))
            elif case == "module_register":
                m.c = lib.nn.ReLU()
                m.c = lib.ones(1)
            else:
                m.add_module("w", 3)
        except TypeError as e:
            msgs.append(str(e).replace("torch", "LIB").replace("ember", "LIB"))
    assert len(msgs) == 2 and msgs[0] == msgs[1]
