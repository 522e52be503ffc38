"""ember.library's low-level API (Library.define/impl per dispatch key, define/impl/impl_abstract,
get_ctx, fallthrough_kernel, get_kernel, register_autocast/vmap/torch_dispatch, triton_op) against
torch 2.13 running the same code.

Every test defines its ops in namespaces of its own (``fresh_ns``), in ember and in torch, and
destroys its libraries afterwards. Data is random (numpy's default_rng), never zeros."""
from __future__ import annotations

import gc
import itertools
import warnings

import numpy as np
import pytest

import ember
import ember.library as L
from ember.fx.fake_tensor import FakeTensorMode

RNG = np.random.default_rng(20261129)
_ids = itertools.count()
LIBS = []


@pytest.fixture(autouse=True)
def _destroy_libraries():
    yield
    while LIBS:
        lib = LIBS.pop()
        if not getattr(lib, "_destroyed", False) and hasattr(lib, "_destroy"):
            try:
                lib._destroy()
            except Exception:
                pass


def fresh_ns():
    return f"emlib{next(_ids)}_{RNG.integers(1 << 30)}"


def lib_of(mod, ns, kind):
    lib = mod.library.Library(ns, kind)
    LIBS.append(lib)
    return lib


def data(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def np_sin_kernel(mod):
    def kernel(x):
        return mod.from_numpy(np.sin(x.detach().numpy()))
    return kernel


def messages(w):
    return [str(x.message) for x in w]


# ---------------------------------------------------------------------------- Library objects
def test_library_repr_kinds_and_define_return_like_torch():
    torch = pytest.importorskip("torch")
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        assert repr(lib) == f"Library(kind=DEF, ns={ns}, dispatch_key=)>"
        assert lib.define("foo(Tensor x, *, int n=2) -> Tensor") == "foo"
        with pytest.raises(ValueError, match="^Unsupported kind: FOO$"):
            mod.library.Library(ns, "FOO")
        with pytest.raises(RuntimeError, match="^Only a single TORCH_LIBRARY can be used to register the namespace"):
            mod.library.Library(ns, "DEF")
        frag = lib_of(mod, ns, "FRAGMENT")
        frag.define("bar(Tensor x) -> Tensor")
        with pytest.raises(RuntimeError, match=r"^Tried to register an operator \(" + ns +
                           r"::foo\(Tensor x, \*, int n=2\) -> Tensor\) with the same name"):
            frag.define("foo(Tensor x, *, int n=2) -> Tensor")
        implib = lib_of(mod, ns, "IMPL")
        with pytest.raises(RuntimeError, match=r'^def\("baz"\): Cannot define an operator inside of a '
                                               r'TORCH_LIBRARY_IMPL block'):
            implib.define("baz(Tensor x) -> Tensor")
        with pytest.raises(RuntimeError, match="^could not parse dispatch key: Bogus$"):
            lib.impl("foo", lambda x, n=2: x, "Bogus")
        with pytest.raises(RuntimeError, match='^Fallback can only be registered using library fragment on the '
                                               'global namespace "_" but it is ' + ns):
            lib.fallback(lambda *a: None, "CPU")
        assert str(getattr(mod.ops, ns).foo.default._schema) == f"{ns}::foo(Tensor x, *, int n=2) -> Tensor"


def test_ember_refuses_what_it_has_no_slot_for():
    ns = fresh_ns()
    lib = lib_of(ember, ns, "DEF")
    lib.define("foo(Tensor x) -> Tensor")
    with pytest.raises(NotImplementedError, match="dispatch key 'XLA' is not supported"):
        lib.impl("foo", lambda x: x, "XLA")
    with pytest.raises(NotImplementedError, match="with_keyset=True"):
        lib.impl("foo", lambda ks, x: x, "CPU", with_keyset=True)
    with pytest.raises(NotImplementedError, match="overload names"):
        lib.define("foo.out(Tensor x) -> Tensor")
    with pytest.raises(NotImplementedError, match="alias an input"):
        lib.define("v(Tensor(a) x) -> Tensor(a)")
    with pytest.raises(TypeError, match="callable"):
        lib.impl("foo", 3, "CPU")
    g = lib_of(ember, "_", "FRAGMENT")
    with pytest.raises(NotImplementedError, match="Library.fallback"):
        g.fallback(L.fallthrough_kernel, "AutogradCPU")
    with pytest.raises(NotImplementedError, match="^fallthrough_kernel\\(\\) should never be called.$"):
        L.fallthrough_kernel()


def test_op_objects_and_overload_spelling():
    torch = pytest.importorskip("torch")
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("foo(Tensor x) -> Tensor")
        lib.impl("foo", np_sin_kernel(mod), "CPU")
        op = getattr(mod.ops, ns).foo
        assert str(op.default) == f"{ns}.foo.default"
        assert repr(op.default) == f"<OpOverload(op='{ns}.foo', overload='default')>"
        assert op.default.name() == f"{ns}::foo"
        assert op.overloads() == ["default"]
        with pytest.raises(AttributeError, match=f"'{ns}' object has no attribute 'nope'"):
            getattr(getattr(mod.ops, ns), "nope")


# ---------------------------------------------------------------------------- eager kernels
def test_cpu_kernel_values_and_missing_backend_error_like_torch():
    torch = pytest.importorskip("torch")
    a = data(4, 3)
    outs, errs = [], []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("scaled(Tensor x, float s, *, int shift=0) -> Tensor")
        lib.impl("scaled", lambda x, s, *, shift=0: mod.from_numpy(x.numpy() * s + shift), "CPU")
        x = mod.tensor(a.copy())
        ops = getattr(mod.ops, ns)
        outs.append((ops.scaled(x, 2.5), ops.scaled.default(x, 0.5, shift=3)))
        lib.define("nokernel(Tensor x) -> Tensor")
        with pytest.raises(NotImplementedError) as e:
            ops.nokernel(x)
        errs.append(str(e.value).replace(ns, "NS"))
    for e, t in zip(*outs):
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)
    cut = "(if using custom build)."
    assert errs[0].split(cut)[0] == errs[1].split(cut)[0]


def test_composite_implicit_decomposes_with_autograd_like_torch():
    torch = pytest.importorskip("torch")
    a, g = data(5), data(5)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("f(Tensor x, float a=2.0) -> Tensor")
        lib.impl("f", lambda x, a=2.0: (x.sin() * a).exp())        # no key: CompositeImplicitAutograd
        x = mod.tensor(a.copy(), requires_grad=True)
        y = getattr(mod.ops, ns).f(x, a=0.7)
        y.backward(mod.tensor(g.copy()))
        res.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-5)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5)
    assert res[0][2] == res[1][2] == "ExpBackward0"


def test_cpu_kernel_without_autograd_is_torchs_warn_fallback():
    torch = pytest.importorskip("torch")
    a = data(3)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("foo(Tensor x) -> Tensor")
        lib.impl("foo", np_sin_kernel(mod), "CPU")
        x = mod.tensor(a.copy(), requires_grad=True)
        y = getattr(mod.ops, ns).foo(x)
        assert y.requires_grad
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y.sum().backward()
        with pytest.raises(RuntimeError) as e, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod.autograd.grad(getattr(mod.ops, ns).foo(x).sum(), x)
        with mod.no_grad():
            assert not getattr(mod.ops, ns).foo(x).requires_grad
        res.append((y.grad_fn.name(), [m.replace(ns, "NS").split(" (Triggered internally")[0] for m in messages(w)],
                    x.grad, str(e.value)))
    assert res[0][0] == res[1][0] == "torch::autograd::WarnNotImplemented"
    assert res[0][1] == res[1][1] and len(res[0][1]) == 1
    assert res[0][2] is None and res[1][2] is None
    # (the wording before "appears" differs: ember's autograd.grad has torch's older message)
    assert all("appears to not have been used in the graph" in r[3] for r in res)


def test_explicit_autograd_kernel_records_its_inner_ops_like_torch():
    torch = pytest.importorskip("torch")
    a, g = data(4, 2), data(4, 2)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("ce(Tensor x) -> Tensor")
        lib.impl("ce", lambda x: x.sin() * x, "CompositeExplicitAutograd")
        x = mod.tensor(a.copy(), requires_grad=True)
        y = getattr(mod.ops, ns).ce(x)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y.backward(mod.tensor(g.copy()))
        res.append((type(y.grad_fn).__name__, x.grad.numpy(), len(w)))
    assert res[0][0] == res[1][0] == "MulBackward0"
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5)
    assert res[0][2] == res[1][2] == 1          # torch's "no autograd kernel" warning, once


def _autograd_key_op(mod, ns):
    lib = lib_of(mod, ns, "DEF")
    lib.define("ag(Tensor x, float k) -> Tensor")
    ops = getattr(mod.ops, ns)

    class NpSin(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            with mod._C._AutoDispatchBelowAutograd():     # (torch's spelling: below the Autograd key)
                return ops.ag(x, k)

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * ctx.k * x.cos(), None
    lib.impl("ag", lambda x, k: mod.from_numpy(np.sin(x.detach().numpy()) * k), "CPU")
    lib.impl("ag", lambda x, k: NpSin.apply(x, k), "Autograd")
    return lib, ops


def test_autograd_key_kernel_like_torch():
    torch = pytest.importorskip("torch")
    a, g = data(6), data(6)
    res = []
    for mod in (ember, torch):
        _, ops = _autograd_key_op(mod, fresh_ns())
        x = mod.tensor(a.copy(), requires_grad=True)
        y = ops.ag(x, 1.5)
        y.backward(mod.tensor(g.copy()))
        res.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5)


def test_fallthrough_autograd_records_nothing_like_torch():
    torch = pytest.importorskip("torch")
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("nd(Tensor x) -> Tensor")
        lib.impl("nd", np_sin_kernel(mod), "CPU")
        lib.impl("nd", mod.library.fallthrough_kernel, "Autograd")
        y = getattr(mod.ops, ns).nd(mod.tensor(data(3), requires_grad=True))
        assert not y.requires_grad and y.grad_fn is None


def test_register_autograd_on_a_defined_op_like_torch():
    torch = pytest.importorskip("torch")
    a, g = data(5), data(5)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("f(Tensor x) -> Tensor")
        lib.impl("f", lambda x: mod.from_numpy(np.exp(x.detach().numpy())), "CPU")

        def setup(ctx, inputs, output):
            ctx.save_for_backward(output)
        mod.library.register_autograd(f"{ns}::f", lambda ctx, gr: gr * ctx.saved_tensors[0], setup_context=setup)
        x = mod.tensor(a.copy(), requires_grad=True)
        y = getattr(mod.ops, ns).f(x)
        y.backward(mod.tensor(g.copy()))
        res.append(x.grad.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-5)
    np.testing.assert_allclose(res[0], g * np.exp(a), rtol=1e-5)


def test_mutating_op_writes_its_argument():
    torch = pytest.importorskip("torch")
    a, b = data(4), data(4)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("add_into(Tensor(a!) out, Tensor y) -> ()")

        def kernel(out, y):
            out.numpy()[...] += y.numpy()
        lib.impl("add_into", kernel, "CPU")
        o = mod.tensor(a.copy())
        v0 = o._version
        r = getattr(mod.ops, ns).add_into(o, mod.tensor(b.copy()))
        res.append((r, o.numpy().copy(), o._version - v0))
    assert res[0][0] is None and res[1][0] is None
    np.testing.assert_allclose(res[0][1], res[1][1])
    np.testing.assert_allclose(res[0][1], a + b)


# ---------------------------------------------------------------------------- registrations' lifetime
def test_override_warns_and_destroy_restores_the_previous_kernel_like_torch():
    torch = pytest.importorskip("torch")
    a = data(3)
    seen = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("f(Tensor x) -> Tensor")
        lib.impl("f", lambda x: x * 2, "CPU")
        over = mod.library.Library(ns, "IMPL")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            over.impl("f", lambda x: x * 3, "CPU")
        assert any("Overriding a previously registered kernel" in m for m in messages(w))
        x = mod.tensor(a.copy())
        ops = getattr(mod.ops, ns)
        first = ops.f(x).numpy().copy()
        over._destroy()
        second = ops.f(x).numpy().copy()
        lib._destroy()
        with pytest.raises(AttributeError):
            getattr(getattr(mod.ops, ns), "f")
        seen.append((first, second))
    for e, t in zip(*seen):
        np.testing.assert_allclose(e, t)
    np.testing.assert_allclose(seen[0][0], a * 3)
    np.testing.assert_allclose(seen[0][1], a * 2)


def test_garbage_collected_library_takes_its_ops_along_and_impl_may_precede_define():
    torch = pytest.importorskip("torch")
    for mod in (ember, torch):
        ns = fresh_ns()
        early = lib_of(mod, ns, "IMPL")
        early.impl("g", lambda x: x + 1, "CPU")            # before the op exists
        lib = mod.library.Library(ns, "DEF")
        lib.define("g(Tensor x) -> Tensor")
        x = mod.tensor(data(3))
        np.testing.assert_allclose(getattr(mod.ops, ns).g(x).numpy(), x.numpy() + 1)
        del lib
        gc.collect()
        with pytest.raises(AttributeError):
            getattr(getattr(mod.ops, ns), "g")


# ---------------------------------------------------------------------------- module-level API
def test_module_level_define_impl_and_impl_abstract_like_torch():
    torch = pytest.importorskip("torch")
    a = data(2, 3)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        assert mod.library.define(f"{ns}::f", "(Tensor x, int n=2) -> Tensor") is None
        deco = mod.library.impl(f"{ns}::f", "cpu")
        assert deco(lambda x, n=2: x * n) is None                      # torch's decorator returns None
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")

            def fake(x, n=2):
                return mod.empty_like(x)
            assert mod.library.impl_abstract(f"{ns}::f", fake) is fake
        ops = getattr(mod.ops, ns)
        mode = FakeTensorMode() if mod is ember else torch._subclasses.fake_tensor.FakeTensorMode()
        with mode:
            shape = tuple(ops.f(mod.empty(4, 7), 3).shape)
        mod.library.define(f"{ns}::h", "(Tensor x) -> Tensor")
        mod.library.impl(f"{ns}::h", ["default"], lambda x: x.cos())   # CompositeExplicitAutograd
        # the legacy forms: define(lib, schema) and impl(lib, name, key) decorators return the function
        lib = lib_of(mod, ns, "FRAGMENT")

        def legacy(x):
            return x * 3
        assert mod.library.define(lib, "legacy(Tensor x) -> Tensor")(legacy) is legacy
        lib.define("legacy2(Tensor x) -> Tensor")
        assert mod.library.impl(lib, "legacy2", "CPU")(legacy) is legacy
        x = mod.tensor(a.copy())
        res.append((ops.f(mod.tensor(a.copy()), 3).numpy(), shape, [(x.category, str(x.message)) for x in w],
                    ops.h(x).numpy(), ops.legacy(x).numpy(), ops.legacy2(x).numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0])
    assert res[0][1] == res[1][1] == (4, 7)
    assert res[0][2] == res[1][2] and res[0][2][0][0] is FutureWarning
    for k in (3, 4, 5):
        np.testing.assert_allclose(res[0][k], res[1][k], rtol=1e-6)


def test_get_kernel_like_torch():
    torch = pytest.importorskip("torch")
    a = data(3)
    res, errs = [], []
    for mod in (ember, torch):
        ns = fresh_ns()
        mod.library.define(f"{ns}::f", "(Tensor x, int n=2) -> Tensor")
        mod.library.impl(f"{ns}::f", "cpu", lambda x, n=2: x * n)
        k = mod.library.get_kernel(f"{ns}::f", "CPU")
        keyset = torch._C.DispatchKeySet("CPU") if mod is torch else None
        res.append(k.call_boxed(keyset, mod.tensor(a.copy()), 5).numpy())
        for q, key in ((f"{ns}::f", "CUDA"), (f"{ns}::nope", "CPU")):
            with pytest.raises(RuntimeError) as e:
                mod.library.get_kernel(q, key)
            errs.append(str(e.value).replace(ns, "NS").split("\n")[0])
    np.testing.assert_allclose(res[0], res[1])
    assert errs[:2] == errs[2:]


# ---------------------------------------------------------------------------- fake tensors, get_ctx
def test_meta_kernel_serves_fake_tensors_and_missing_one_is_an_error():
    ns = fresh_ns()
    lib = lib_of(ember, ns, "DEF")
    lib.define("f(Tensor x, Tensor y) -> (Tensor, Tensor)")
    lib.impl("f", lambda x, y: (ember.from_numpy(x.numpy() @ y.numpy()), ember.from_numpy(x.numpy().sum(0))), "CPU")
    ops = getattr(ember.ops, ns)
    with FakeTensorMode():
        with pytest.raises(L.MissingFakeImpl, match="no fake impl"):
            ops.f(ember.empty(2, 3), ember.empty(3, 4))
    lib.impl("f", lambda x, y: (x.new_empty(x.shape[0], y.shape[1]), x.new_empty(x.shape[1])), "Meta")
    with FakeTensorMode():
        out = ops.f(ember.empty(2, 3), ember.empty(3, 4))
    assert [tuple(o.shape) for o in out] == [(2, 4), (3,)]
    x, y = ember.tensor(data(2, 3)), ember.tensor(data(3, 4))
    real = ops.f(x, y)
    np.testing.assert_allclose(real[0].numpy(), x.numpy() @ y.numpy(), rtol=1e-5)
    assert L.opcheck(ops.f, (x, y))["test_faketensor"] == "SUCCESS"


def test_get_ctx_outside_and_inside_a_fake_impl():
    torch = pytest.importorskip("torch")
    assert L.get_ctx() is None and torch.library.get_ctx() is None
    ns = fresh_ns()
    lib = lib_of(ember, ns, "DEF")
    lib.define("nz(Tensor x) -> Tensor")
    lib.impl("nz", lambda x: ember.from_numpy(np.argwhere(x.numpy())), "CPU")
    seen = []

    @L.register_fake(f"{ns}::nz")
    def _(x):
        ctx = L.get_ctx()
        seen.append(ctx)
        return x.new_empty(ctx.new_dynamic_size(), x.dim(), dtype=ember.int64)
    ops = getattr(ember.ops, ns)
    v = ember.tensor(np.array([0.0, 1.5, 0.0, -2.0], dtype=np.float32))
    want = ops.nz(v)
    assert want.numpy().ravel().tolist() == [1, 3]
    with FakeTensorMode():
        with pytest.raises(RuntimeError, match="new_dynamic_size"):
            ops.nz(ember.empty(4))
    assert seen and seen[0] is not None
    with pytest.raises(ValueError, match="max must be None or an int >= min"):
        seen[0].new_dynamic_size(min=3, max=1)

    def fn(x):
        return ops.nz(x * 2) + 1
    got = ember.compile(fn, backend="aot_eager")(v)       # a graph break at the op, results as eager
    np.testing.assert_array_equal(got.numpy(), want.numpy() + 1)
    expl = ember.dynamo.explain(fn)(v)
    assert expl.graph_break_count >= 1 and any("new_dynamic_size" in str(r) for r in expl.break_reasons)


# ---------------------------------------------------------------------------- ember.compile
def _compile_ops(ns):
    lib = lib_of(ember, ns, "DEF")
    lib.define("npsin(Tensor x) -> Tensor")
    lib.impl("npsin", np_sin_kernel(ember), "CPU")
    L.register_fake(f"{ns}::npsin", lambda x: ember.empty_like(x))
    lib.define("ci(Tensor x, float a=2.0) -> Tensor")
    lib.impl("ci", lambda x, a=2.0: x.tanh() * a, "CompositeImplicitAutograd")
    lib.define("ce(Tensor x) -> Tensor")
    lib.impl("ce", lambda x: x.exp() - 1, "CompositeExplicitAutograd")
    return getattr(ember.ops, ns)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_keeps_the_graph_whole_and_equals_eager(backend):
    ops = _compile_ops(fresh_ns())

    def fn(x):
        return ops.npsin(x) * 2 + ops.ci(x, a=0.5) + ops.ce.default(x)
    x = ember.tensor(data(3, 5))
    want = fn(x)
    got = ember.compile(fn, backend=backend, fullgraph=True)(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    expl = ember.dynamo.explain(fn)(x)
    assert expl.graph_count == 1 and expl.graph_break_count == 0


def test_compile_gradients_through_autograd_kernel_and_composite_equal_eager():
    _, ops = _autograd_key_op(ember, fresh_ns())
    ns2 = fresh_ns()
    ops2 = _compile_ops(ns2)
    L.register_fake(f"{ops._name}::ag", lambda x, k: ember.empty_like(x))

    def fn(x):
        return (ops.ag(x, 0.5) * ops2.ci(x)).sum()
    a = data(7)
    x1 = ember.tensor(a.copy(), requires_grad=True)
    fn(x1).backward()
    x2 = ember.tensor(a.copy(), requires_grad=True)
    ember.compile(fn, backend="aot_eager", fullgraph=True)(x2).backward()
    np.testing.assert_allclose(x2.grad.numpy(), x1.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_compile_breaks_cleanly_at_an_op_without_fake_impl():
    ns = fresh_ns()
    lib = lib_of(ember, ns, "DEF")
    lib.define("nofake(Tensor x) -> Tensor")
    lib.impl("nofake", np_sin_kernel(ember), "CPU")
    ops = getattr(ember.ops, ns)

    def fn(x):
        return ops.nofake(x + 1) * 3
    x = ember.tensor(data(4))
    np.testing.assert_allclose(ember.compile(fn, backend="aot_eager")(x).numpy(), fn(x).numpy(), rtol=1e-6)
    expl = ember.dynamo.explain(fn)(x)
    assert expl.graph_break_count == 1 and "no fake impl" in str(expl.break_reasons[0])
    with pytest.raises(Exception, match="no fake impl"):
        ember.compile(fn, backend="aot_eager", fullgraph=True)(ember.tensor(data(5)))


def test_opcheck_passes_for_defined_ops():
    ops = _compile_ops(fresh_ns())
    for op in (ops.npsin, ops.ci, ops.ce):
        # (a backend kernel without an Autograd one fails torch's autograd test too: grads only for ci)
        x = ember.tensor(data(3, 2), requires_grad=op is ops.ci)
        res = L.opcheck(op, (x,))
        assert all(v == "SUCCESS" for v in res.values()), res


# ---------------------------------------------------------------------------- per-op rules
def test_register_autocast_casts_inputs_like_torch():
    torch = pytest.importorskip("torch")
    a, b = data(3), data(3)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("f(Tensor x, Tensor y, Tensor z) -> Tensor")
        seen = []

        def kernel(x, y, z, seen=seen):
            seen.append((str(x.dtype), str(y.dtype), str(z.dtype)))
            return x.float() + y.float() + z.float()
        lib.impl("f", kernel, "CPU")
        mod.library.register_autocast(f"{ns}::f", "cpu", mod.float16)
        x, y = mod.tensor(a.copy()), mod.tensor(b.copy(), dtype=mod.float64)
        z = mod.tensor([1, 2, 3])
        with mod.autocast("cpu", dtype=mod.bfloat16):
            out = getattr(mod.ops, ns).f(x, y, z)
        getattr(mod.ops, ns).f(x, y, z)                # outside a region: no cast
        with pytest.raises(ValueError, match="^Device type 'meta' does not support autocast.$"):
            mod.library.register_autocast(f"{ns}::f", "meta", mod.float16)
        res.append((seen, out.numpy()))
    assert [tuple(s.replace("ember.", "torch.") for s in t) for t in res[0][0]] == res[1][0]
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)


def test_register_vmap_rule_is_used_by_vmap_like_torch():
    torch = pytest.importorskip("torch")
    a = data(3, 4, 5)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("rowsum(Tensor x, float s) -> Tensor")
        lib.impl("rowsum", lambda x, s: mod.from_numpy(x.numpy().sum(-1) * s), "CPU")
        calls = []

        @mod.library.register_vmap(f"{ns}::rowsum")
        def _(info, in_dims, x, s):
            calls.append((info.batch_size, info.randomness, tuple(in_dims)))
            return x.movedim(in_dims[0], -2).sum(-1) * s, x.dim() - 2
        op = getattr(mod.ops, ns).rowsum
        x = mod.tensor(a.copy())
        outs = [mod.func.vmap(op, in_dims=(1, None), out_dims=d)(x, 2.0).numpy() for d in (0, 1)]
        n = len(calls)
        # a function calling the op: torch batches it with the rule, ember runs it per slice -- equal values
        outs.append(mod.func.vmap(lambda t: op(t, 0.5) + 1, in_dims=2)(x).numpy())
        res.append((outs, calls[:n]))
    for e, t in zip(res[0][0], res[1][0]):
        assert e.shape == t.shape
        np.testing.assert_allclose(e, t, rtol=1e-5)
    assert res[0][1] == res[1][1] == [(4, "error", (1, None))] * 2


def test_register_torch_dispatch_rule_for_a_mode_like_torch():
    torch = pytest.importorskip("torch")
    from importlib import import_module
    a = data(3)
    res = []
    for mod in (ember, torch):
        TorchDispatchMode = import_module(mod.__name__ + ".utils._python_dispatch").TorchDispatchMode
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("f(Tensor x) -> Tensor")
        lib.impl("f", lambda x: mod.from_numpy(x.numpy() * 2), "CPU")
        lib.define("g(Tensor x) -> Tensor")
        lib.impl("g", lambda x: mod.from_numpy(x.numpy() + 1), "CPU")
        seen = []

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None, seen=seen):
                seen.append(str(func).replace(ns, "NS"))
                return func(*args, **(kwargs or {}))

        class SubMode(Mode):
            pass

        @mod.library.register_torch_dispatch(f"{ns}::f", Mode)
        def _(mode, func, types, args, kwargs, seen=seen):
            seen.append(("rule", str(func).replace(ns, "NS"), type(mode).__name__, types, kwargs))
            return func(*args, **kwargs) * 10
        x = mod.tensor(a.copy())
        outs = []
        for cls in (Mode, SubMode):         # the rule serves exactly its class
            with cls():
                pair = (getattr(mod.ops, ns).f(x), getattr(mod.ops, ns).g(x))
            outs.append(tuple(t.numpy() for t in pair))
        res.append((outs, seen))
    for (ef, eg), (tf, tg) in zip(res[0][0], res[1][0]):
        np.testing.assert_allclose(ef, tf, rtol=1e-6)
        np.testing.assert_allclose(eg, tg, rtol=1e-6)
    np.testing.assert_allclose(res[0][0][0][0], a * 20, rtol=1e-6)
    assert res[0][1] == res[1][1]
    ns = fresh_ns()
    lib_of(ember, ns, "DEF").define("h(Tensor x) -> Tensor")
    with pytest.raises(NotImplementedError, match="register_torch_dispatch: only TorchDispatchMode"):
        L.register_torch_dispatch(f"{ns}::h", ember.Tensor, lambda *a: None)


def test_triton_op_is_a_traceable_custom_op_and_wrap_triton_refuses():
    ns = fresh_ns()

    @L.triton_op(f"{ns}::scaled_add", mutates_args=())
    def scaled_add(x: ember.Tensor, y: ember.Tensor, a: float) -> ember.Tensor:
        return x + y * a
    x, y = ember.tensor(data(4)), ember.tensor(data(4))
    np.testing.assert_allclose(scaled_add(x, y, 0.5).numpy(), x.numpy() + y.numpy() * 0.5, rtol=1e-6)
    got = ember.compile(lambda p, q: scaled_add(p, q, 2.0) * 2, backend="inductor", fullgraph=True)(x, y)
    np.testing.assert_allclose(got.numpy(), (x.numpy() + y.numpy() * 2) * 2, rtol=1e-5)
    with pytest.raises(NotImplementedError, match="wrap_triton: Triton kernels are not supported"):
        L.wrap_triton(lambda *a: None)


def test_library_default_key_register_kernel_and_meta_device_like_torch():
    torch = pytest.importorskip("torch")
    a = data(3)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("f(Tensor x) -> Tensor")
        keyed = mod.library.Library(ns, "IMPL", "CPU")
        LIBS.append(keyed)
        keyed.impl("f", lambda x: x * 2)                     # the library's key: CPU
        lib.define("g(Tensor x) -> Tensor")
        mod.library.register_kernel(f"{ns}::g", "cpu", lambda x: x + 10)
        ops = getattr(mod.ops, ns)
        x = mod.tensor(a.copy())
        with pytest.raises(NotImplementedError) as e:
            ops.f(mod.empty(3, device="meta"))
        mod.library.register_fake(f"{ns}::f", lambda x: mod.empty_like(x))
        m = ops.f(mod.empty(2, 5, device="meta"))
        res.append((repr(keyed).replace(ns, "NS"), ops.f(x).numpy(), ops.g(x).numpy(),
                    str(e.value).replace(ns, "NS"), (m.device.type, tuple(m.shape))))
    assert res[0][0] == res[1][0] == "Library(kind=IMPL, ns=NS, dispatch_key=CPU)>"
    np.testing.assert_allclose(res[0][1], res[1][1])
    np.testing.assert_allclose(res[0][2], res[1][2])
    assert res[0][3] == res[1][3]
    assert res[0][4] == res[1][4] == ("meta", (2, 5))


def test_warn_fallback_under_compile_equals_eager():
    ns = fresh_ns()
    lib = lib_of(ember, ns, "DEF")
    lib.define("f(Tensor x) -> Tensor")
    lib.impl("f", np_sin_kernel(ember), "CPU")
    L.register_fake(f"{ns}::f", lambda x: ember.empty_like(x))
    ops = getattr(ember.ops, ns)

    def fn(x, w):
        return (ops.f(x) * w).sum()
    a, b = data(4), data(4)
    grads = []
    for run in (fn, ember.compile(fn, backend="aot_eager", fullgraph=True)):
        x, w = ember.tensor(a.copy(), requires_grad=True), ember.tensor(b.copy(), requires_grad=True)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            run(x, w).backward()
        assert any("an autograd kernel was not registered" in m for m in messages(rec))
        grads.append((x.grad, w.grad.numpy()))
    assert grads[0][0] is None and grads[1][0] is None
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-6)
    np.testing.assert_allclose(grads[0][1], np.sin(a), rtol=1e-6)


def test_what_ember_refuses_instead_of_ignoring():
    aten = lib_of(ember, "aten", "IMPL")
    with pytest.raises(NotImplementedError, match="built-in operators cannot be redefined"):
        aten.impl("sin", lambda x: x, "CPU")          # would never run: refused, not ignored
    with pytest.raises(RuntimeError, match="^Only a single TORCH_LIBRARY"):
        ember.library.Library("aten", "DEF")
    ns = fresh_ns()
    with pytest.raises(NotImplementedError, match="operator tags"):
        L.define(f"{ns}::f", "(Tensor x) -> Tensor", tags=("pt2_compliant_tag",))

    @L.custom_op(f"{ns}::made_by_custom_op", mutates_args=())
    def made(x: ember.Tensor) -> ember.Tensor:
        return x * 2
    frag = lib_of(ember, ns, "FRAGMENT")
    with pytest.raises(NotImplementedError, match="register_kernel"):
        frag.impl("made_by_custom_op", lambda x: x, "CPU")
    with pytest.raises(RuntimeError, match="^Tried to register an operator"):
        frag.define("made_by_custom_op(Tensor x) -> Tensor")
    with pytest.raises(TypeError, match=r"f\(\) missing a required argument: 'x'"):
        frag.define("f(Tensor x) -> Tensor")
        frag.impl("f", lambda x: x, "CPU")
        getattr(ember.ops, ns).f()


def test_list_and_optional_arguments_eager_compiled_and_opcheck():
    ns = fresh_ns()
    lib = lib_of(ember, ns, "DEF")
    lib.define("wsum(Tensor[] xs, Tensor? w=None, float[] c=[1.0, 2.0]) -> (Tensor, Tensor)")

    def kernel(xs, w=None, c=(1.0, 2.0)):
        acc = sum(x.numpy() * ci for x, ci in zip(xs, c))
        if w is not None:
            acc = acc * w.numpy()
        return ember.from_numpy(acc.astype(np.float32)), ember.from_numpy(acc.sum(-1).astype(np.float32))
    lib.impl("wsum", kernel, "CPU")
    L.register_fake(f"{ns}::wsum", lambda xs, w=None, c=(1.0, 2.0): (ember.empty_like(xs[0]),
                                                                      xs[0].new_empty(xs[0].shape[:-1])))
    op = getattr(ember.ops, ns).wsum
    a, b, w = (ember.tensor(data(3, 4)) for _ in range(3))
    want = a.numpy() * 0.5 + b.numpy() * 1.5
    eager = op([a, b], w, c=[0.5, 1.5])
    np.testing.assert_allclose(eager[0].numpy(), want * w.numpy(), rtol=1e-5)
    np.testing.assert_allclose(op([a, b])[1].numpy(), (a.numpy() + 2 * b.numpy()).sum(-1), rtol=1e-5)
    for backend in ("aot_eager", "inductor"):
        got = ember.compile(lambda p, q, r: op([p, q], r, c=[0.5, 1.5]), backend=backend, fullgraph=True)(a, b, w)
        for g, e in zip(got, eager):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5)
    assert all(v == "SUCCESS" for v in L.opcheck(op, ([a, b], w)).values())


def test_triton_op_without_autograd_formula_raises_torchs_error():
    torch = pytest.importorskip("torch")
    msgs = []
    for mod in (ember, torch):
        ns = fresh_ns()

        def body(x, y):
            return x + y * 2
        body.__annotations__ = {"x": mod.Tensor, "y": mod.Tensor, "return": mod.Tensor}
        f = mod.library.triton_op(f"{ns}::f", body, mutates_args=())
        a, b = data(3), data(3)
        x = mod.tensor(a.copy(), requires_grad=True)
        np.testing.assert_allclose(f(x, mod.tensor(b.copy())).detach().numpy(), a + 2 * b, rtol=1e-6)
        with pytest.raises(RuntimeError) as e:
            f(x, mod.tensor(b.copy())).sum().backward()
        msgs.append(str(e.value).replace(ns, "NS"))
    assert msgs[0] == msgs[1]


def test_custom_op_methods_register_vmap_and_autocast_like_torch():
    torch = pytest.importorskip("torch")
    a = data(2, 3)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()

        def body(x):
            return mod.from_numpy(np.cumsum(x.numpy(), axis=-1))
        body.__annotations__ = {"x": mod.Tensor, "return": mod.Tensor}
        op = mod.library.custom_op(f"{ns}::cumsum_last", body, mutates_args=())
        rule_calls = []

        @op.register_vmap
        def _(info, in_dims, x):
            rule_calls.append(in_dims)
            return mod.from_numpy(np.cumsum(x.numpy(), axis=-1)), in_dims[0]
        op.register_autocast("cpu", mod.float16)
        out = mod.func.vmap(op, in_dims=0)(mod.tensor(a.copy()))
        with mod.autocast("cpu", dtype=mod.bfloat16):
            cast = op(mod.tensor(a.copy()))
        res.append((out.numpy(), rule_calls, str(cast.dtype).split(".")[-1]))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    assert res[0][1] == res[1][1] == [(0,)]
    assert res[0][2] == res[1][2] == "float16"


def test_vmap_rule_with_an_unbatched_output_like_torch():
    torch = pytest.importorskip("torch")
    a = data(4, 3)
    res = []
    for mod in (ember, torch):
        ns = fresh_ns()
        lib = lib_of(mod, ns, "DEF")
        lib.define("two(Tensor x) -> (Tensor, Tensor)")
        lib.impl("two", lambda x: (x.sum(-1), x.new_ones(3) * 2), "CPU")
        mod.library.register_vmap(f"{ns}::two",
                                  lambda info, in_dims, x: ((x.movedim(in_dims[0], -1).sum(0), x.new_ones(3) * 2),
                                                            (0, None)))
        s, c = mod.func.vmap(getattr(mod.ops, ns).two, in_dims=1, out_dims=(0, 0))(mod.tensor(a.copy()))
        res.append((s.numpy(), c.numpy()))
    for e, t in zip(*res):
        assert e.shape == t.shape
        np.testing.assert_allclose(e, t, rtol=1e-6)
