"""ember.utils._python_dispatch.TorchDispatchMode and ember.ops.aten: a logging mode sees the same
forward ops as torch's on the same code; modes can replace results; ember.ops.aten names ops
as torch.ops.aten does."""
import importlib

import pytest

import ember


def _forward_ops(lib):
    pd = importlib.import_module(f"{lib.__name__}.utils._python_dispatch")
    seen = []

    class Log(pd.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append((str(func), func.overloadpacket.__name__, [t.__name__ for t in types]))
            return func(*args, **(kwargs or {}))

    lin = lib.nn.Linear(4, 3)
    x = lib.randn(2, 4)
    with Log():
        out = lib.relu(lin(x)) @ lib.ones(3, 5)
        lib.bmm(out[None], lib.ones(1, 5, 2))
    return seen


def test_logging_mode_sees_torchs_forward_ops():
    """The computing ops, in order, with their names and (no) subclass types; factories are named
    differently (ember's ones() is a full), and torch's autograd adds a detach of saved outputs."""
    torch = pytest.importorskip("torch")
    skip = {"full", "ones", "detach"}
    got = [r for r in _forward_ops(ember) if r[1] not in skip]
    want = [r for r in _forward_ops(torch) if r[1] not in skip]
    assert got == want and [r[1] for r in got] == ["t", "addmm", "relu", "mm", "unsqueeze", "bmm"]


def test_mode_replaces_results_and_nests():
    from ember.utils._python_dispatch import (TorchDispatchMode, _get_current_dispatch_mode,
                                             _get_current_dispatch_mode_stack)
    aten = ember.ops.aten

    class Zero(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out * 0 if func is aten.exp.default else out

    x = ember.randn(3, requires_grad=True)
    with Zero() as z:
        assert _get_current_dispatch_mode() is z and _get_current_dispatch_mode_stack() == [z]
        y = ember.exp(x)
        w = ember.sin(x)
    assert ember.equal(y, ember.zeros(3)) and ember.allclose(w, x.sin())
    assert _get_current_dispatch_mode() is None
    y.sum().backward()             # the graph was recorded around the mode's result
    assert x.grad is not None


def test_aten_namespace():
    aten = ember.ops.aten
    assert str(aten.mm) == "aten.mm" and str(aten.mm.default) == "aten.mm.default"
    assert aten.mm.default.overloadpacket is aten.mm and aten.mm.overloads() == ["default", "out", "dtype_out", "dtype"]
    assert aten.mm.default.name() == "aten::mm" and "mm(" in str(aten.mm.default._schema)
    assert ember.equal(aten.add.default(ember.ones(2), ember.ones(2)), ember.full((2,), 2.0))
    with pytest.raises(AttributeError, match="no attribute 'not_an_op'"):
        aten.not_an_op
