"""``__torch_dispatch__`` on Tensor subclasses (wrapper subclasses made with
``Tensor._make_wrapper_subclass``): every op reaches the handler below autograd with its
``ember.ops.aten`` overload; autograd records the calls on the wrapper instances, so gradients,
optimizers and ``item()`` work through the handler. Each script runs under ember and (where
installed) torch and compares values, types and the handler's op log."""
import numpy as np
import pytest

import ember


def _wrap_class(lib, log):
    pt = lib.utils._pytree

    class Wrap(lib.Tensor):
        @staticmethod
        def __new__(cls, elem, requires_grad=False):
            r = lib.Tensor._make_wrapper_subclass(cls, elem.size(), strides=elem.stride(), dtype=elem.dtype,
                                                  device=elem.device, requires_grad=requires_grad)
            r.elem = elem
            return r

        __torch_function__ = lib._C._disabled_torch_function_impl

        def __repr__(self):
            return f"Wrap({self.elem})"

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            log.append(name)
            unwrap = lambda x: x.elem if isinstance(x, Wrap) else x      # noqa: E731
            wrap = lambda x: Wrap(x) if isinstance(x, lib.Tensor) else x  # noqa: E731
            out = func(*pt.tree_map(unwrap, args), **pt.tree_map(unwrap, kwargs or {}))
            if name.endswith("_") and not name.startswith("_"):
                return args[0]                       # an in-place op returns its self
            return pt.tree_map(wrap, out)
    return Wrap


def _ops_script(lib):
    log = []
    Wrap = _wrap_class(lib, log)
    rng = np.random.default_rng()
    a = lib.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    b = lib.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    x, y = Wrap(a), Wrap(b)
    results = {"add": x + y, "mul": x * 2, "mm": x.mm(y.t()), "sum": x.sum(), "relu": x.relu(), "neg": -x,
               "div": x / y, "exp": lib.exp(x), "view": x.view(4, 3), "cat": lib.cat([x, y]),
               "select": x[1], "gt": x > 0, "clone": x.clone(), "to": x.to(lib.float64)}
    plain = {"add": a + b, "mul": a * 2, "mm": a.mm(b.t()), "sum": a.sum(), "relu": a.relu(), "neg": -a,
             "div": a / b, "exp": lib.exp(a), "view": a.view(4, 3), "cat": lib.cat([a, b]), "select": a[1],
             "gt": a > 0, "clone": a.clone(), "to": a.to(lib.float64)}
    kinds = {k: type(v).__name__ for k, v in results.items()}
    for k, v in results.items():
        np.testing.assert_allclose(v.elem.numpy(), plain[k].numpy(), rtol=1e-6, atol=1e-6)
    meta = (tuple(x.shape), x.stride(), str(x.dtype).split(".")[-1], str(x.device), x.requires_grad,
            x.data_ptr(), x.sum().item() == a.sum().item(), type(x.detach()).__name__)
    v = Wrap(lib.ones(3))
    log.clear()
    out = v.add_(1)
    inplace = (out is v, v.elem.tolist(), list(log))
    return kinds, sorted(set(log) | {"add_"}), meta, inplace


def test_ops_reach_the_handler_and_results_match_torch():
    torch = pytest.importorskip("torch")
    mine, theirs = _ops_script(ember), _ops_script(torch)
    assert mine[0] == theirs[0] and mine[2] == theirs[2] and mine[3] == theirs[3]


def _training_script(lib, optname):
    log = []
    Wrap = _wrap_class(lib, log)
    rng = np.random.default_rng(7)
    W = rng.standard_normal((3, 2)).astype(np.float32)
    X = rng.standard_normal((4, 3)).astype(np.float32)
    w = Wrap(lib.tensor(W), requires_grad=True)
    opt = getattr(lib.optim, optname)([w], lr=0.1)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = (Wrap(lib.tensor(X)) @ w).relu().sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    state = opt.state[w]
    kinds = sorted(type(v).__name__ for v in state.values() if isinstance(v, lib.Tensor) and v.ndim)
    return (type(w.grad).__name__, type(loss.grad_fn).__name__, kinds), w.elem.numpy(), np.array(losses)


@pytest.mark.parametrize("optname", ["SGD", "Adam", "AdamW"])
def test_autograd_and_optimizers_through_the_handler_match_torch(optname):
    torch = pytest.importorskip("torch")
    mine, theirs = _training_script(ember, optname), _training_script(torch, optname)
    assert mine[0] == theirs[0] and mine[0][:2] == ("Wrap", "SumBackward0")   # optimizer state: Wraps too
    np.testing.assert_allclose(mine[1], theirs[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mine[2], theirs[2], rtol=1e-5, atol=1e-5)


def _like_script(lib):
    log = []
    Wrap = _wrap_class(lib, log)
    x = Wrap(lib.randn(2, 3))
    made = [lib.zeros_like(x), lib.ones_like(x), lib.empty_like(x), lib.full_like(x, 2.5), lib.rand_like(x),
            lib.randn_like(x)]
    kinds = [type(m).__name__ for m in made]
    values = [m.elem.tolist() for m in made[:2]] + [made[3].elem.tolist()]
    y = Wrap(lib.zeros(4))
    out = y.uniform_()
    return kinds, values, log, out is y, bool(((y.elem >= 0) & (y.elem < 1)).all())


def test_like_functions_and_random_methods_reach_the_handler_as_torch():
    torch = pytest.importorskip("torch")
    assert _like_script(ember) == _like_script(torch)


def test_without_torch_handler_sees_ember_overloads_and_errors():
    log = []
    Wrap = _wrap_class(ember, log)
    x = Wrap(ember.randn(2, 3))
    (x * 2).sum()
    assert log == ["mul", "sum"]
    assert repr(Wrap.__torch_dispatch__) and "Wrap(" in repr(x)
    with pytest.raises(RuntimeError, match=r"\.numpy\(\) is not supported for tensor subclasses"):
        x.numpy()
    with pytest.raises(RuntimeError, match=r"\.tolist\(\) is not supported for tensor subclasses, got Wrap"):
        x.tolist()

    class Refusing(ember.Tensor):
        __torch_function__ = ember._C._disabled_torch_function_impl

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return NotImplemented

    r = ember.Tensor._make_wrapper_subclass(Refusing, (2,), dtype=ember.float32)
    with pytest.raises(TypeError, match="Multiple dispatch failed for 'aten.neg.default'; all "
                                        "__torch_dispatch__ handlers returned NotImplemented"):
        -r
    with pytest.raises(RuntimeError, match="defines no __torch_dispatch__"):
        ember.Tensor._make_wrapper_subclass(ember.nn.Parameter, (2,))


def test_modes_see_the_call_before_the_subclass():
    from ember.utils._python_dispatch import TorchDispatchMode
    seen = []

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(("mode", func.overloadpacket.__name__, [t.__name__ for t in types]))
            return func(*args, **(kwargs or {}))

    log = []
    Wrap = _wrap_class(ember, log)
    x = Wrap(ember.randn(3))
    with Mode():
        y = x.exp()
    assert seen == [("mode", "exp", ["Wrap"])] and log == ["exp"] and type(y).__name__ == "Wrap"


def test_compiled_code_with_a_wrapper_runs_eagerly():
    log = []
    Wrap = _wrap_class(ember, log)

    @ember.compile
    def f(a):
        return (a * 2).sum()

    x = ember.randn(4, 3)
    got = f(Wrap(x))
    assert type(got).__name__ == "Wrap" and log == ["mul", "sum"]
    np.testing.assert_allclose(got.elem.numpy(), (x * 2).sum().numpy(), rtol=1e-6)
    assert not ember.utils._python_dispatch.is_traceable_wrapper_subclass(Wrap(x))


def _new_factories_script(lib, fill):
    """``x.new_zeros`` & co. of a wrapper reach its handler with torch's arguments; ``new_tensor``
    does not (torch makes a plain tensor); a class defining ``__torch_dispatch__`` and no
    ``__torch_function__`` is out of the function protocol, as torch's metaclass makes it."""
    pt = lib.utils._pytree
    calls = []

    class Bare(lib.Tensor):          # no __torch_function__ line: torch disables it itself
        @staticmethod
        def __new__(cls, elem):
            r = lib.Tensor._make_wrapper_subclass(cls, elem.size(), dtype=elem.dtype, device=elem.device)
            r.elem = elem
            return r

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            calls.append((func.overloadpacket.__name__,
                          [a if not isinstance(a, lib.Tensor) else type(a).__name__ for a in args],
                          {k: str(v).split(".")[-1] for k, v in (kwargs or {}).items()}))
            unwrap = lambda x: x.elem if isinstance(x, Bare) else x      # noqa: E731
            out = func(*pt.tree_map(unwrap, args), **pt.tree_map(unwrap, kwargs or {}))
            return pt.tree_map(lambda x: Bare(x) if isinstance(x, lib.Tensor) else x, out)

    rng = np.random.default_rng()
    x = Bare(lib.tensor(rng.standard_normal((2, 3)).astype(np.float32)))
    made = [x.new_zeros(2, 3), x.new_zeros((4,), dtype=lib.float64), x.new_ones(size=(1, 2)),
            x.new_empty(2, requires_grad=True), x.new_full((2,), fill), x.new_tensor([1.0, 2.0]),
            x.new_empty_strided((2, 2), (1, 2))]
    kinds = [(type(t).__name__, tuple(t.shape), str(t.dtype).split(".")[-1], t.requires_grad) for t in made]
    values = [made[0].elem.tolist(), made[2].elem.tolist(), made[4].elem.tolist()]
    disabled = Bare.__torch_function__ is lib._C._disabled_torch_function_impl
    return kinds, calls, values, disabled


def test_new_factories_of_a_wrapper_reach_the_handler_as_torch():
    torch = pytest.importorskip("torch")
    fill = float(np.random.default_rng().standard_normal())
    mine, theirs = _new_factories_script(ember, fill), _new_factories_script(torch, fill)
    assert mine[0] == theirs[0] and mine[1] == theirs[1] and mine[3] == theirs[3] is True
    assert mine[2][0] == [[0.0] * 3] * 2 and mine[2][1] == [[1.0, 1.0]]
    assert mine[2][2] == pytest.approx(theirs[2][2])


def _new_factories_under_a_mode(lib):
    seen = []

    class Spy(lib.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append((func.__name__, [a if not isinstance(a, lib.Tensor) else "T" for a in args],
                         sorted((kwargs or {}).items(), key=str)))
            return func(*args, **(kwargs or {}))

    z = lib.ones(2)
    with Spy():
        a = z.new_zeros(2, 3)
        b = z.new_full((2,), 1.5, dtype=lib.float64)
        c = z.new_empty_strided((2, 2), (1, 2))
    return [(n, args, [(k, str(v).split(".")[-1]) for k, v in kw]) for n, args, kw in seen], \
        [tuple(t.shape) for t in (a, b, c)], b.tolist()


def test_new_factories_under_a_mode_match_torch():
    torch = pytest.importorskip("torch")
    assert _new_factories_under_a_mode(ember) == _new_factories_under_a_mode(torch)
