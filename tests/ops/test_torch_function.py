"""PyTorch's ``__torch_function__`` protocol in ember (ember/_torch_function.py, ember/overrides.py):
Tensor subclasses keep their class through ops, handlers see the calls torch shows them,
Tensor-likes take over functions, TorchFunctionMode sees every call; each scenario runs the
same script under ember and (where installed) torch and compares what it records."""
import pytest

import ember


def _names(seen):
    return [getattr(f, "__name__", str(f)) for f in seen]


def _logging_script(lib):
    seen = []

    class Logging(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    x = lib.randn(3).as_subclass(Logging)
    results = [x + 1, 1 + x, x * 2, 2 * x, x - 1, 1 - x, x / 2, x @ x, -x, x == x, x < 1, x ** 2,
               2 ** x, x[0], x.add(1), abs(x), x // 2, x % 2, x.sum(), x.view(3), lib.relu(x),
               lib.cat([x, x]), x.max(0), x.split(1)]
    x += 1
    return _names(seen), [type(r).__name__ for r in results]


def test_subclass_handlers_see_torchs_functions_and_results_keep_the_class():
    torch = pytest.importorskip("torch")
    names, kinds = _logging_script(ember)
    t_names, t_kinds = _logging_script(torch)
    assert kinds == t_kinds
    assert names == t_names


def test_plain_subclass_values_types_and_gradients_match_torch():
    torch = pytest.importorskip("torch")
    import numpy as np
    data = np.random.randn(4, 3).astype(np.float32)

    def run(lib):
        class Sub(lib.Tensor):
            pass
        leaf = lib.tensor(data, requires_grad=True)
        s = leaf.as_subclass(Sub)
        out = (s.relu() * s).sum(1).softmax(0)
        parts = [out, s.t(), s[1:], s.unbind(0)[0], s.detach(), s.clone(), s.to(lib.float64),
                 s.reshape(-1), lib.where(s > 0, s, lib.zeros_like(s)), s.mean(), s.data, Sub(leaf)]
        (out * lib.arange(4.0)).sum().backward()
        return ([type(p).__name__ for p in parts], out.detach().numpy(), leaf.grad.numpy(),
                repr(lib.tensor([1.0, 2.0]).as_subclass(Sub)), (s + 1)._base is None, Sub(leaf).requires_grad)

    got, want = run(ember), run(torch)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-6)
    assert got[3] == want[3] == "Sub([1., 2.])"
    assert got[4:] == want[4:]


def _dispatch_order_script(lib):
    calls = []

    class A(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(("A", [t.__name__ for t in types]))
            return NotImplemented

    class B(A):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(("B", [t.__name__ for t in types]))
            with lib._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    x = lib.randn(2)
    out = lib.add(x.as_subclass(A), x.as_subclass(B))
    try:
        lib.mul(x.as_subclass(A), 2)
        err = None
    except TypeError as e:
        err = str(e).splitlines()[0]
    return calls, type(out).__name__, err


def test_subclasses_are_asked_before_their_bases_and_all_not_implemented_raises():
    torch = pytest.importorskip("torch")
    got, want = _dispatch_order_script(ember), _dispatch_order_script(torch)
    assert got[:2] == want[:2]
    assert got[2] == want[2].replace("torch.", "ember.")


def _tensor_like_script(lib):
    handled = {}

    class ScalarTensor:
        def __init__(self, n, value):
            self.n, self.value = n, value

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func not in handled:
                return NotImplemented
            return handled[func](*args, **(kwargs or {}))

    handled[lib.mean] = lambda t: float(t.value) / t.n
    handled[lib.add] = lambda a, b: ScalarTensor(a.n, a.value + (b if isinstance(b, float) else b.value))
    out = [lib.mean(ScalarTensor(5, 2)), lib.add(ScalarTensor(2, 1.0), 2.5).value]
    try:
        lib.sum(ScalarTensor(5, 2))
    except TypeError as e:
        out.append(str(e).splitlines()[0])
    return out


def test_tensor_like_objects_take_over_functions():
    torch = pytest.importorskip("torch")
    got, want = _tensor_like_script(ember), _tensor_like_script(torch)
    assert got[:2] == want[:2] == [0.4, 3.5]
    assert got[2] == want[2].replace("torch.", "ember.")


def _mode_script(lib):
    from importlib import import_module
    overrides = import_module(f"{lib.__name__}.overrides")
    log = []

    class Record(overrides.TorchFunctionMode):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append((self.tag, func.__name__))
            return func(*args, **(kwargs or {}))

    class Replace(overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is lib.relu:
                return "replaced"
            return func(*args, **(kwargs or {}))

    x = lib.randn(3)
    with Record("outer"):
        with Record("inner"):
            lib.relu(x)
            lib.sum(x, dim=0)
        lib.nn.functional.softmax(x, dim=0)
    after = len(log)
    lib.relu(x)
    with Replace():
        replaced = lib.relu(x)
        kept = lib.exp(x).shape
    with lib._C.DisableTorchFunction():
        with Record("off"):
            lib.relu(x)
    return log, after == len(log), replaced, tuple(kept)


def test_torch_function_modes_nest_and_see_every_call():
    torch = pytest.importorskip("torch")
    got, want = _mode_script(ember), _mode_script(torch)
    assert got == want


def _python_api_script(lib):
    from importlib import import_module
    overrides = import_module(f"{lib.__name__}.overrides")

    def scale(a, factor=2):
        if overrides.has_torch_function((a,)):
            return overrides.handle_torch_function(scale, (a,), a, factor=factor)
        return a * factor

    class Sub(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is scale:
                return ("handled", kwargs)
            return super().__torch_function__(func, types, args, kwargs)

    x = lib.ones(2)
    with lib._C.DisableTorchFunctionSubclass():
        plain = type(x.as_subclass(Sub) + 1).__name__
    return (scale(x).tolist(), scale(x.as_subclass(Sub), factor=3), plain,
            overrides.is_tensor_like(x), overrides.is_tensor_like(3),
            overrides.has_torch_function((x,)), overrides.has_torch_function_variadic(x, x.as_subclass(Sub)),
            type(lib.nn.Parameter(lib.ones(2)) * 2).__name__)


def test_has_and_handle_torch_function_for_python_functions():
    torch = pytest.importorskip("torch")
    assert _python_api_script(ember) == _python_api_script(torch)


def test_make_subclass_is_a_detached_leaf_sharing_memory():
    base = ember.randn(3, requires_grad=True)

    class Sub(ember.Tensor):
        pass
    s = ember.Tensor._make_subclass(Sub, base.detach(), True)
    assert type(s) is Sub and s.requires_grad and s.is_leaf and s.grad_fn is None
    with ember.no_grad():
        s[0] = 7.0
    assert base[0].item() == 7.0
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        ember.Tensor._make_subclass(int, base)


def test_plain_tensors_keep_the_fast_path_and_modes_restore_it():
    from ember import _torch_function as tf
    assert ember.Tensor in tf.FAST_CLASSES and ember.nn.Parameter in tf.FAST_CLASSES

    class Sub(ember.Tensor):
        pass
    assert Sub not in tf.FAST_CLASSES

    class Mode(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Mode():
        assert not tf.FAST_CLASSES
        assert ember.relu(ember.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
    assert ember.Tensor in tf.FAST_CLASSES


def test_mode_exited_out_of_order_is_refused():
    class M(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    a, b = M(), M()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="not the innermost"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    assert not ember.overrides._get_current_function_mode_stack()


def test_compile_runs_subclass_code_eagerly_with_its_handlers():
    class Doubling(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            out = super().__torch_function__(func, types, args, kwargs)
            return out * 2 if func is ember.relu else out

    def f(x):
        return ember.relu(x) + 1

    def g(x):
        return ember.relu(x.as_subclass(Doubling)) + 1

    x = ember.randn(5)
    for fn, arg in ((f, x.as_subclass(Doubling)), (g, x)):
        want = fn(arg)
        got = ember.compile(fn)(arg)
        assert type(got) is type(want) is Doubling
        assert ember.equal(got.as_subclass(ember.Tensor), want.as_subclass(ember.Tensor))


def test_catalogues():
    from ember import overrides
    funcs = overrides.get_overridable_functions()
    assert ember.add in funcs[ember] and ember.Tensor.add in funcs[ember.Tensor]
    dummies = overrides.get_testing_overrides()
    assert dummies[ember.add](ember.ones(1), 1) == -1
    assert ember.add not in overrides.get_ignored_functions()


def test_compiled_code_runs_eagerly_under_a_mode():
    """A TorchFunctionMode sees the calls of a compiled function too (its frame runs eagerly)."""
    seen = []

    class Record(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return func(*args, **(kwargs or {}))

    @ember.compile
    def f(x):
        return ember.relu(x) * 2

    x = ember.randn(4)
    want = f(x)                      # compiled once outside the mode
    with Record():
        got = f(x)
    assert seen == ["relu", "mul"] and ember.equal(got, want)


def _factory_script(lib):
    seen = []

    class Record(lib.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            plain = tuple(a for a in args if not isinstance(a, lib.Tensor))
            public = func is getattr(lib, func.__name__, None) or func is getattr(lib.Tensor, func.__name__, None)
            seen.append((func.__name__, public, plain, sorted((kwargs or {}).items(), key=str)))
            return func(*args, **(kwargs or {}))

    import numpy as np
    with Record():
        x = lib.zeros(3)
        made = [x, lib.ones(2, 2, dtype=lib.float64), lib.randn(3), lib.arange(4), lib.arange(1, 5, 2),
                lib.tensor([1., 2.]), lib.empty(2), lib.full((2,), 1.), lib.linspace(0, 1, 3), lib.rand(2),
                lib.randint(0, 3, (2,)), lib.eye(2), lib.zeros_like(x), lib.empty_like(x), lib.ones_like(x),
                lib.full_like(x, 2.), lib.rand_like(x), lib.as_tensor([1, 2]), lib.from_numpy(np.ones(2)),
                x.uniform_(), x.normal_(), lib.randperm(4), lib.hann_window(4), lib.tril_indices(3, 3),
                lib.empty_strided((2,), (1,)), lib.scalar_tensor(2.)]
    return [(n, p, repr(a).replace("torch.", "ember."), repr(k).replace("torch.", "ember.")) for n, p, a, k in seen], \
        [(tuple(t.shape), str(t.dtype).split(".")[-1]) for t in made]


def test_mode_sees_factories_as_torch():
    """Factories have no tensor argument for the dispatcher's protocol check: they hand
    themselves to the mode (and the random in-place methods and ``*_like`` functions present
    themselves, not the internal ops they reach), with the arguments as the caller gave them."""
    torch = pytest.importorskip("torch")
    assert _factory_script(ember) == _factory_script(torch)


def test_mode_can_redirect_a_factory():
    class ToMeta(ember.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in (ember.zeros, ember.empty, ember.full):
                kwargs["device"] = "meta"
            return func(*args, **kwargs)

    with ToMeta():
        a, b, c = ember.zeros(2), ember.empty(3, 1), ember.full((2,), 1.5)
        d = ember.ones(2)
    assert a.is_meta and b.is_meta and c.is_meta and not d.is_meta
    assert not ember.zeros(2).is_meta
