"""Mixing ember tensors with real PyTorch tensors: a TypeError naming the PyTorch tensor and how
to convert it, never a RecursionError (both define ``__torch_function__``, and each side's
handler used to call back into the other). The protocol still works for ember's own subclasses
and Tensor-likes."""
import operator

import numpy as np
import pytest

import ember


def _pair(torch):
    rng = np.random.default_rng(49)
    a = rng.standard_normal(4).astype(np.float32)
    return ember.tensor(a), torch.tensor(a)


OPS = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
    "add": operator.add, "mul": operator.mul, "sub": operator.sub, "truediv": operator.truediv,
    "matmul": operator.matmul,
}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("ember_first", [True, False])
def test_operator_mixing_raises_typeerror(name, ember_first):
    torch = pytest.importorskip("torch")
    e, t = _pair(torch)
    op = OPS[name]
    with pytest.raises(TypeError, match=r"not torch\.Tensor; ember and PyTorch tensors don't mix"):
        op(e, t) if ember_first else op(t, e)


@pytest.mark.parametrize("call", [
    lambda e, t: ember.add(e, t),
    lambda e, t: ember.add(t, e),
    lambda e, t: e.add(t),
    lambda e, t: ember.mul(e, t),
    lambda e, t: ember.where(e > 0, e, t),
    lambda e, t: ember.cat([e, t]),
    lambda e, t: ember.nn.functional.mse_loss(e, t),
])
def test_ember_functions_refuse_torch_tensors(call):
    torch = pytest.importorskip("torch")
    e, t = _pair(torch)
    with pytest.raises(TypeError, match=r"torch\.Tensor; ember and PyTorch tensors don't mix -- convert it"):
        call(e, t)


def test_message_names_argument_like_other_foreign_objects():
    torch = pytest.importorskip("torch")
    e, t = _pair(torch)
    with pytest.raises(TypeError) as info:
        ember.add(e, t)
    # same shape as for any foreign object (ndarray, list, ...), plus the conversion hint
    assert str(info.value).startswith("add(): argument 'other' (position 2) must be Tensor or Number, "
                                      "not torch.Tensor")
    with pytest.raises(TypeError, match=r"not torch\.nn\.parameter\.Parameter; ember and PyTorch"):
        ember.add(e, torch.nn.Parameter(t.clone()))
    with pytest.raises(TypeError, match=r"^add\(\): argument 'other' \(position 2\) must be Tensor or Number, "
                                        r"not ndarray$"):
        ember.add(e, np.ones(4))


@pytest.mark.parametrize("call", [
    lambda e, t: torch_add(t, e),
    lambda e, t: torch_sin(e),
    lambda e, t: t.add(e),
])
def test_torch_functions_refuse_ember_tensors(call):
    torch = pytest.importorskip("torch")
    global torch_add, torch_sin
    torch_add, torch_sin = torch.add, torch.sin
    e, t = _pair(torch)
    with pytest.raises(TypeError, match=r"got an ember tensor \(ember\.Tensor\); ember and PyTorch tensors"):
        call(e, t)


def test_mixed_under_disable_subclass_and_with_subclass():
    torch = pytest.importorskip("torch")
    e, t = _pair(torch)

    class Sub(ember.Tensor):
        pass

    s = e.as_subclass(Sub)
    with pytest.raises(TypeError, match="ember and PyTorch tensors don't mix"):
        s + t
    with pytest.raises(TypeError, match="ember and PyTorch tensors don't mix"):
        ember.add(t, s)
    with ember.DisableTorchFunctionSubclass():
        with pytest.raises(TypeError, match="ember and PyTorch tensors don't mix"):
            ember.add(e, t)


def test_mode_and_protocol_still_work_after_conversion():
    torch = pytest.importorskip("torch")
    e, t = _pair(torch)
    seen = []

    class Mode(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Mode():
        with pytest.raises(TypeError, match="ember and PyTorch tensors don't mix"):
            ember.add(e, t)
        conv = ember.from_numpy(t.detach().cpu().numpy())
        r = ember.add(e, conv)
    np.testing.assert_allclose(r.numpy(), (t + t).numpy(), rtol=1e-6)
    assert ember.add in seen

    class Sub(ember.Tensor):
        pass

    out = e.as_subclass(Sub) == ember.tensor(t.tolist())
    assert type(out) is Sub and bool(out.all())

    class Like:                      # a Tensor-like (not a Tensor) still takes the call over
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return ("handled", func)

    assert ember.add(e, Like()) == ("handled", ember.add)
