"""ember.jit: torch.jit's entry points on ember's JIT (script/trace compile with ember.compile;
the decorators are eager PyTorch's pass-throughs; TorchScript-only features raise)."""
import numpy as np
import pytest

import ember

RNG = np.random.default_rng()


def _t(*shape, grad=False):
    return ember.tensor(RNG.standard_normal(shape), dtype=ember.float32, requires_grad=grad)


def test_script_function_matches_eager_values_and_grads():
    def f(x, y):
        if x.sum() > 0:                 # data-dependent branch: TorchScript keeps it, so do we
            return ((x + y) * 2).relu()
        return (x - y).tanh()

    sf = ember.jit.script(f)
    for _ in range(3):
        x, y = _t(4, 5, grad=True), _t(4, 5)
        out = sf(x, y)
        out.sum().backward()
        g = x.grad.numpy().copy()
        x.grad = None
        want = f(x, y)
        want.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_script_and_trace_of_a_module_share_its_parameters():
    m = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.GELU(), ember.nn.Linear(4, 2))
    for wrapped in (ember.jit.script(m), ember.jit.trace(m, _t(5, 3))):
        assert wrapped.state_dict().keys() == m.state_dict().keys()
        x = _t(6, 3)
        np.testing.assert_allclose(wrapped(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-5, atol=1e-6)
        m.zero_grad()
        wrapped(x).sum().backward()
        assert m[0].weight.grad is not None and float(m[0].weight.grad.abs().sum()) > 0


def test_is_scripting_folds_in_compiled_code():
    def f(x):
        if not ember.jit.is_scripting() and not ember.jit.is_tracing():
            return x * 2 + 1
        return x

    x = _t(3, 4)
    report = ember.dynamo.explain(f)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    np.testing.assert_allclose(ember.compile(f)(x).numpy(), (x * 2 + 1).numpy(), rtol=1e-6)


def test_pass_through_decorators_and_futures():
    @ember.jit.ignore
    def a(x):
        return x + 1

    @ember.jit.ignore(drop=True)
    def b(x):
        return x + 2

    assert a(1) == 2 and b(1) == 3
    assert ember.jit.unused(a) is a and ember.jit.export(a) is a
    assert ember.jit.annotate(list, [1]) == [1] and ember.jit.Attribute(3, int) == 3
    fut = ember.jit.fork(lambda x, y: x * y, 3, y=4)
    assert ember.jit.wait(fut) == 12 and fut.done()


def test_torchscript_only_features_raise_clearly():
    m = ember.nn.Linear(2, 2)
    with pytest.raises(NotImplementedError, match="ember.save"):
        ember.jit.save(m, "unused.pt")
    with pytest.raises(NotImplementedError, match="TorchScript"):
        ember.jit.load("unused.pt")
    with pytest.raises(NotImplementedError, match="class"):
        ember.jit.script(ember.nn.Linear)
    with pytest.raises(TypeError, match="expected a function or an nn.Module"):
        ember.jit.script(3)
