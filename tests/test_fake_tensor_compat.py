"""``ember._subclasses.fake_tensor`` against ``torch._subclasses.fake_tensor``: the type test,
``fake_mode``, the real-input check, the errors, and shapes computed under the mode."""
import numpy as np
import pytest

import ember
from ember._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException, FakeTensor,
                                           FakeTensorMode)


def test_modules_and_ops_under_the_mode_match_torch_shapes():
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode as TMode

    def run(lib, mode_cls):
        with mode_cls() as m:
            lin = lib.nn.Linear(1000, 300)
            conv = lib.nn.Conv2d(3, 8, 3, stride=2)
            x = lib.randn(16, 1000)
            img = lib.randn(2, 3, 33, 33)
            y = lin(x).relu().softmax(-1)
            z = conv(img).flatten(1)
            return m, (tuple(y.shape), str(y.dtype).split(".")[-1], tuple(y.stride()),
                       tuple(z.shape), tuple(z.stride())), y
    em, e_meta, ey = run(ember, FakeTensorMode)
    _, t_meta, _ = run(torch, TMode)
    assert e_meta == t_meta
    assert isinstance(ey, FakeTensor) and ey.fake_mode is em
    assert not isinstance(ember.ones(2), FakeTensor)


def test_real_inputs_are_refused_unless_allowed():
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode as TMode
    real = ember.tensor(np.random.default_rng(0).standard_normal(3).astype(np.float32))
    with FakeTensorMode():
        with pytest.raises(AssertionError) as ei:
            real + ember.randn(3)
    treal = torch.randn(3)
    with TMode():
        with pytest.raises(AssertionError) as ti:
            treal + torch.randn(3)
    prefix = "Please convert all Tensors to FakeTensors first or instantiate FakeTensorMode with 'allow_non_fake_inputs'"
    assert str(ei.value).startswith(prefix) and str(ti.value).startswith(prefix)
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = real * ember.ones(3)
    assert isinstance(out, FakeTensor) and out.shape == (3,)


def test_from_tensor_memoises_and_stamps():
    m = FakeTensorMode()
    real = ember.tensor(np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32))
    f = m.from_tensor(real)
    assert m.from_tensor(real) is f and f.fake_mode is m and isinstance(f, FakeTensor)
    assert f.shape == real.shape and f.stride() == real.stride() and f.dtype == real.dtype
    with m:
        g = (f @ f.t()).sum(0)
    assert g.shape == (4,) and g.fake_mode is m
    with pytest.raises(TypeError, match="expected a Tensor"):
        m.from_tensor([1, 2])
    with pytest.raises(ValueError, match="shape_env"):
        m.from_tensor(real, static_shapes=False)


def test_symbolic_sizes_with_a_shape_env():
    from ember.fx.experimental.symbolic_shapes import ShapeEnv, SymInt
    m = FakeTensorMode(shape_env=ShapeEnv())
    f = m.from_tensor(ember.randn(6, 7), static_shapes=False)
    assert all(isinstance(s, SymInt) for s in f.shape)


def test_data_dependent_errors():
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import DynamicOutputShapeException as TDyn
    from torch._subclasses.fake_tensor import FakeTensorMode as TMode
    with FakeTensorMode():
        a = ember.randn(3)
        with pytest.raises(DynamicOutputShapeException):
            ember.nonzero(a)
        with pytest.raises(DataDependentOutputException):
            a.sum().item()
    with TMode():
        with pytest.raises(TDyn):
            torch.nonzero(torch.randn(3))
    assert issubclass(DynamicOutputShapeException, RuntimeError) and issubclass(TDyn, RuntimeError)
    with pytest.raises(TypeError, match="cannot be constructed"):
        FakeTensor()
