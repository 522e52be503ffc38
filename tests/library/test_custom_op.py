"""ember.library.custom_op: eager calls, autograd, ember.compile (one opaque node), opcheck.

The ops under test do their arithmetic in numpy on ``x.numpy()``, so a graph that traced
into them instead of recording one node could not be built (a fake tensor has no data).
Data is random (numpy's default_rng), never zeros."""
from __future__ import annotations

import logging
from typing import Optional, Sequence

import numpy as np
import pytest

import ember
from ember import Tensor
from ember.fx.experimental.proxy_tensor import make_fx
from ember.library import MissingFakeImpl, OpCheckError, custom_op, opcheck

RNG = np.random.default_rng(20240611)


def rand(*shape, requires_grad=False, dtype=np.float32):
    return ember.tensor(RNG.standard_normal(shape).astype(dtype), requires_grad=requires_grad)


def grads_of(fn, *inputs):
    """(output, grads of the inputs) of fn with a random output gradient."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    g = ember.tensor(np.random.default_rng(7).standard_normal(tuple(out.shape)).astype(np.float32))
    out.backward(g)
    return out.detach(), [t.grad for t in leaves]


def assert_close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(b.detach().numpy()), np.asarray(a.detach().numpy()), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------- the ops under test
CALLS = {"sin": 0}


@custom_op("embertest::numpy_sin", mutates_args=())
def numpy_sin(x: Tensor) -> Tensor:
    CALLS["sin"] += 1
    return ember.from_numpy(np.sin(x.numpy()))


@numpy_sin.register_fake
def _(x):
    return ember.empty_like(x)


def _sin_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _sin_backward(ctx, g):
    x, = ctx.saved_tensors
    return g * x.cos()


numpy_sin.register_autograd(_sin_backward, setup_context=_sin_setup)


@custom_op("embertest::numpy_scaled_exp", mutates_args=())
def numpy_scaled_exp(x: Tensor, scale: float, *, shift: int = 0) -> Tensor:
    a = x.numpy()
    return ember.from_numpy((np.exp(a) * scale + shift).astype(a.dtype))


@numpy_scaled_exp.register_fake
def _(x, scale, *, shift=0):
    return ember.empty_like(x)


def _exp_setup(ctx, inputs, output):
    x, scale, shift = inputs
    ctx.save_for_backward(output)          # a saved *output*
    ctx.shift = shift


def _exp_backward(ctx, g):
    out, = ctx.saved_tensors
    return g * (out - ctx.shift), None, None   # d/dx (e^x * s + c) = out - c; None for scale and shift


ember.library.register_autograd("embertest::numpy_scaled_exp", _exp_backward, setup_context=_exp_setup)


@custom_op("embertest::weighted_sum", mutates_args=())
def weighted_sum(xs: list[Tensor], w: Optional[Tensor], weights: Sequence[float]) -> tuple[Tensor, Tensor]:
    acc = sum(t.numpy() * c for t, c in zip(xs, weights))
    if w is not None:
        acc = acc * w.numpy()
    return ember.from_numpy(acc.astype(np.float32)), ember.from_numpy(acc.sum(axis=-1).astype(np.float32))


@ember.library.register_fake("embertest::weighted_sum")
def _(xs, w, weights):
    full = ember.empty_like(xs[0])
    return full, full.sum(-1)


def _ws_setup(ctx, inputs, output):
    xs, w, weights = inputs
    ctx.weights = list(weights)
    ctx.has_w = w is not None
    ctx.save_for_backward(*xs, w)


def _ws_backward(ctx, g_full, g_rows):
    *xs, w = ctx.saved_tensors
    g = g_full + g_rows.unsqueeze(-1)
    gw = None
    if ctx.has_w:
        gw = g * sum((x * c for x, c in zip(xs[1:], ctx.weights[1:])), xs[0] * ctx.weights[0])
        g = g * w
    return [g * c for c in ctx.weights], gw, None


weighted_sum.register_autograd(_ws_backward, setup_context=_ws_setup)


def weighted_sum_reference(xs, w, weights):
    acc = sum((x * c for x, c in zip(xs[1:], weights[1:])), xs[0] * weights[0])
    if w is not None:
        acc = acc * w
    return acc, acc.sum(-1)


# ---------------------------------------------------------------------------- eager
def test_eager_values():
    x = rand(3, 5)
    np.testing.assert_allclose(numpy_sin(x).numpy(), np.sin(x.numpy()), rtol=1e-6)
    y = numpy_scaled_exp(x, 0.5, shift=2)
    np.testing.assert_allclose(y.numpy(), np.exp(x.numpy()) * 0.5 + 2, rtol=1e-6)
    a, b, w = rand(2, 4), rand(2, 4), rand(2, 4)
    full, rows = weighted_sum([a, b], w, [0.3, 0.7])
    want = (a.numpy() * 0.3 + b.numpy() * 0.7) * w.numpy()
    np.testing.assert_allclose(full.numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(rows.numpy(), want.sum(-1), rtol=1e-5)
    full2, _ = weighted_sum([a, b], None, [0.3, 0.7])
    np.testing.assert_allclose(full2.numpy(), a.numpy() * 0.3 + b.numpy() * 0.7, rtol=1e-5)


def test_reachable_by_name_and_schema():
    assert ember.ops.embertest.numpy_sin is numpy_sin
    assert ember.ops.embertest.numpy_sin.default is numpy_sin
    assert ember.library.CustomOpDef is type(numpy_sin)
    assert repr(numpy_sin) == "<CustomOpDef(embertest::numpy_sin)>"
    assert numpy_sin.schema == "embertest::numpy_sin(Tensor x) -> Tensor"
    assert numpy_scaled_exp.schema == "embertest::numpy_scaled_exp(Tensor x, float scale, *, int shift=0) -> Tensor"
    assert weighted_sum.schema == ("embertest::weighted_sum(Tensor[] xs, Tensor? w, float[] weights) -> "
                                   "(Tensor, Tensor)")
    with pytest.raises(AttributeError, match="object has no attribute 'nope'"):
        ember.ops.embertest.nope
    with pytest.raises(ValueError, match="no custom op named 'embertest::nope'"):
        ember.library.register_fake("embertest::nope", lambda x: x)


def test_argument_errors_name_the_op():
    with pytest.raises(TypeError, match=r"embertest::numpy_sin\(\): argument 'x' \(position 1\) must be Tensor"):
        numpy_sin("not a tensor")
    with pytest.raises(TypeError):
        numpy_sin(rand(2), 3)


def test_output_checks():
    @custom_op("embertest::returns_input", mutates_args=())
    def returns_input(x: Tensor) -> Tensor:
        return x

    with pytest.raises(RuntimeError, match="must not also be an input"):
        returns_input(rand(3))

    @custom_op("embertest::returns_view", mutates_args=())
    def returns_view(x: Tensor) -> Tensor:
        return x[1:]

    with pytest.raises(RuntimeError, match="may not alias any inputs"):
        returns_view(rand(3))

    @custom_op("embertest::wrong_structure", mutates_args=())
    def wrong_structure(x: Tensor) -> Tensor:
        return x.clone(), x.clone()

    with pytest.raises(RuntimeError, match=r"returned a tuple of 2 .* says it returns a Tensor"):
        wrong_structure(rand(3))


def test_device_types_and_register_kernel():
    @custom_op("embertest::cuda_only", mutates_args=(), device_types="cuda")
    def cuda_only(x: Tensor) -> Tensor:
        return x * 2

    with pytest.raises(NotImplementedError, match=r"no implementation for device type 'cpu'.*register_kernel\('cpu'\)"):
        cuda_only(rand(3))

    @cuda_only.register_kernel("cpu")
    def _(x):
        return x * 3

    x = rand(3)
    np.testing.assert_allclose(cuda_only(x).numpy(), x.numpy() * 3)
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        cuda_only.register_kernel("tpu")


def test_schema_string_form():
    @custom_op("embertest::with_schema", mutates_args=(), schema="(Tensor x, int n=2) -> Tensor")
    def with_schema(x, n):
        return x * n

    x = rand(3)
    assert with_schema.schema == "embertest::with_schema(Tensor x, int n=2) -> Tensor"
    np.testing.assert_allclose(with_schema(x).numpy(), x.numpy() * 2)
    np.testing.assert_allclose(with_schema(x, n=5).numpy(), x.numpy() * 5)
    with pytest.raises(ValueError, match="must be the implementation's"):
        custom_op("embertest::bad_schema", lambda y, n: y, mutates_args=(), schema="(Tensor x, int n) -> Tensor")


def test_redefinition_replaces():
    @custom_op("embertest::redefined", mutates_args=())
    def first(x: Tensor) -> Tensor:
        return x + 1

    @custom_op("embertest::redefined", mutates_args=())
    def second(x: Tensor) -> Tensor:
        return x + 2

    assert ember.ops.embertest.redefined is second
    x = rand(2)
    np.testing.assert_allclose(ember.ops.embertest.redefined(x).numpy(), x.numpy() + 2)


# ---------------------------------------------------------------------------- schema inference errors
def _fn_dict(x: Tensor, y: dict) -> Tensor: ...
def _fn_unannotated(x, y: int) -> Tensor: ...           # noqa: E704
def _fn_varargs(x: Tensor, *args) -> Tensor: ...         # noqa: E704
def _fn_kwargs(x: Tensor, **kw) -> Tensor: ...           # noqa: E704
def _fn_posonly(x: Tensor, /) -> Tensor: ...             # noqa: E704
def _fn_returns_int(x: Tensor) -> int: ...               # noqa: E704
def _fn_no_return(x: Tensor): ...                        # noqa: E704
def _fn_none_default(x: Tensor, n: int = None) -> Tensor: ...   # noqa: E704
def _fn_tensor_default(x: Tensor, y: Tensor = 1.0) -> Tensor: ...   # noqa: E704
def _fn_list_opt_tensor(x: Optional[list[Tensor]]) -> Tensor: ...   # noqa: E704
def _fn_ok(x: Tensor, n: int) -> Tensor: ...             # noqa: E704


@pytest.mark.parametrize("fn, kwargs, exc, match", [
    (_fn_dict, {}, ValueError, r"parameter y has unsupported type dict\. The valid types are: Tensor"),
    (_fn_unannotated, {}, ValueError, r"parameter x must have a type annotation"),
    (_fn_varargs, {}, ValueError, r"parameter args is variadic positional; custom ops do not support"),
    (_fn_kwargs, {}, ValueError, r"parameter kw is variadic keyword"),
    (_fn_posonly, {}, ValueError, r"parameter x is positional-only"),
    (_fn_returns_int, {}, ValueError, r"the return type int is not supported"),
    (_fn_no_return, {}, ValueError, r"must have a return type annotation"),
    (_fn_none_default, {}, ValueError, r"parameter n defaults to None, so its type must be Optional"),
    (_fn_tensor_default, {}, ValueError, r"parameter y of type Tensor has the default 1\.0"),
    (_fn_list_opt_tensor, {}, ValueError, r"parameter x has unsupported type"),
    (_fn_ok, {"mutates_args": ("z",)}, ValueError, r"\['z'\] in mutates_args were not found"),
    (_fn_ok, {"mutates_args": ("n",)}, ValueError, r"mutates_args names \['n'\], which is not a Tensor"),
    (_fn_ok, {"mutates_args": "x"}, ValueError, r"mutates_args must be 'unknown' or an iterable"),
])
def test_schema_inference_errors(fn, kwargs, exc, match):
    kwargs = dict({"mutates_args": ()}, **kwargs)
    with pytest.raises(exc, match=match):
        custom_op("embertest::bad", fn, **kwargs)


@pytest.mark.parametrize("name", ["nonamespace", "a::b::c", "my-lib::op", "mylib::", 3])
def test_bad_names(name):
    with pytest.raises((ValueError, TypeError), match="namespace::opname"):
        custom_op(name, _fn_ok, mutates_args=())


def test_mutates_args_is_required():
    with pytest.raises(TypeError, match="mutates_args"):
        custom_op("embertest::needs_mutates", _fn_ok)


def test_infer_schema_spellings():
    def f(x: Tensor, ys: Sequence[Tensor], n: Optional[int] = None, *, f: float = 1.5,
          dims: list[int] = (0, 1), flag: bool = True, s: str = "a", dt: Optional[ember.dtype] = None,
          dev: Optional[ember.device] = None) -> list[Tensor]: ...
    assert ember.library.infer_schema(f, mutates_args=("x",)) == (
        "(Tensor(a0!) x, Tensor[] ys, int? n=None, *, float f=1.5, int[] dims=(0, 1), bool flag=True, "
        "str s='a', ScalarType? dt=None, Device? dev=None) -> Tensor[]")

    def g(x: Tensor, y: Optional[Tensor]) -> None: ...
    assert ember.library.infer_schema(g, mutates_args="unknown", op_name="ns::g") == \
        "ns::g(Tensor(a0!) x, Tensor(a1!)? y) -> ()"


# ---------------------------------------------------------------------------- autograd
def test_autograd_matches_ember_ops():
    x = rand(4, 3)
    out, (gx,) = grads_of(numpy_sin, x)
    ref_out, (ref_gx,) = grads_of(lambda t: t.sin(), x)
    assert_close(out, ref_out)
    assert_close(gx, ref_gx)

    out, (gx,) = grads_of(lambda t: numpy_scaled_exp(t, 0.75, shift=3), x)
    ref_out, (ref_gx,) = grads_of(lambda t: t.exp() * 0.75 + 3, x)
    assert_close(out, ref_out)
    assert_close(gx, ref_gx)


def test_autograd_list_inputs_and_two_outputs():
    a, b, w = rand(3, 4), rand(3, 4), rand(3, 4)

    def via_op(a, b, w):
        full, rows = weighted_sum([a, b], w, [0.25, -1.5])
        return (full * 2).sum() + (rows ** 2).sum()

    def via_ember(a, b, w):
        full, rows = weighted_sum_reference([a, b], w, [0.25, -1.5])
        return (full * 2).sum() + (rows ** 2).sum()

    out, grads = grads_of(via_op, a, b, w)
    ref_out, ref_grads = grads_of(via_ember, a, b, w)
    assert_close(out, ref_out, 1e-4)
    for g, r in zip(grads, ref_grads):
        assert_close(g, r, 1e-4)


def test_autograd_vs_finite_differences():
    x = ember.tensor(RNG.standard_normal((3, 2)), requires_grad=True)        # float64
    assert ember.autograd.gradcheck(numpy_sin, (x,))
    assert ember.autograd.gradcheck(lambda t: numpy_scaled_exp(t, 1.25, shift=1), (x,))


def test_ctx_needs_input_grad_and_grad_fn_name():
    seen = {}

    @custom_op("embertest::mul2", mutates_args=())
    def mul2(x: Tensor, y: Tensor) -> Tensor:
        return ember.from_numpy(x.numpy() * y.numpy())

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, g):
        seen["needs"] = ctx.needs_input_grad
        x, y = ctx.saved_tensors
        return g * y if ctx.needs_input_grad[0] else None, g * x if ctx.needs_input_grad[1] else None

    mul2.register_autograd(backward, setup_context=setup)
    x, y = rand(3, requires_grad=True), rand(3)
    out = mul2(x, y)
    assert type(out.grad_fn).__name__ == "GeneratedBackwardFor_embertest_mul2_defaultBackward"
    out.sum().backward()
    assert seen["needs"] == (True, False)
    assert_close(x.grad, y)
    # no input requires grad: no node
    assert mul2(rand(3), rand(3)).grad_fn is None


def test_missing_autograd_raises_at_backward():
    @custom_op("embertest::no_grad_formula", mutates_args=())
    def no_formula(x: Tensor) -> Tensor:
        return ember.from_numpy(np.tanh(x.numpy()))

    x = rand(3, requires_grad=True)
    y = no_formula(x)                       # the forward works (as in torch)...
    assert y.requires_grad
    with pytest.raises(RuntimeError, match=r"Trying to backward through embertest.no_grad_formula.default but no "
                                           r"autograd formula was registered\. Please use register_autograd"):
        y.sum().backward()                  # ...the backward names the op


def test_saved_input_modified_in_place_is_caught():
    x = rand(3, requires_grad=True)
    h = x * 1
    y = numpy_sin(h)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# ---------------------------------------------------------------------------- compile
def model(x, w):
    h = numpy_sin(x * w)
    e = numpy_scaled_exp(h, 0.5, shift=1)
    full, rows = weighted_sum([h, e], w, [1.5, -0.5])
    return (full.sum(-1) + rows).tanh()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_forward_and_gradients_match_eager(backend):
    x, w = rand(4, 6), rand(4, 6)
    out, grads = grads_of(model, x, w)
    compiled = ember.compile(model, backend=backend, fullgraph=True)
    cout, cgrads = grads_of(compiled, x, w)
    assert_close(out, cout, 1e-5)
    for g, c in zip(grads, cgrads):
        assert_close(g, c, 1e-4)
    with ember.no_grad():
        assert_close(model(x, w), ember.compile(model, backend=backend)(x, w), 1e-5)


def test_compiled_call_by_name():
    def f(x):
        return ember.ops.embertest.numpy_sin(x) * 2

    x = rand(5)
    explained = ember.dynamo.explain(f)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    assert_close(f(x), ember.compile(f, fullgraph=True)(x), 1e-6)


def test_explain_one_graph_and_the_implementation_is_not_traced():
    def f(x):
        return numpy_sin(x * 2).relu() + 1

    x = rand(3, 4)
    before = CALLS["sin"]
    out = ember.dynamo.explain(f)(x)
    assert out.graph_count == 1
    assert out.graph_break_count == 0
    names = [getattr(n.target, "__name__", n.target) for n in out.ops_per_graph[0]]
    assert names.count("embertest::numpy_sin") == 1
    assert CALLS["sin"] - before == 1          # run once (explain runs the graph), never traced
    assert_close(out.result, f(x), 1e-6)


def test_make_fx_records_one_node():
    x = rand(3)
    gm = make_fx(lambda t: numpy_sin(t) * 2, tracing_mode="fake")(x)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert len(targets) == 2 and targets[0]._ember_op is numpy_sin._ember_op
    assert "ember.ops.embertest.numpy_sin" in str(gm.graph)
    assert_close(gm(x), numpy_sin(x) * 2, 1e-6)


def test_missing_fake_breaks_the_graph_and_runs_eagerly(caplog):
    @custom_op("embertest::no_fake", mutates_args=())
    def no_fake(x: Tensor) -> Tensor:
        return ember.from_numpy(np.exp(x.numpy()))

    def f(x):
        return no_fake(x * 2) + 1

    x = rand(4)
    out = ember.dynamo.explain(f)(x)
    assert (out.graph_count, out.graph_break_count) == (2, 1)
    reason = out.break_reasons[0][1]
    assert "embertest::no_fake" in reason and "no fake impl registered" in reason
    assert "no_fake.register_fake" in reason
    assert_close(out.result, f(x), 1e-6)
    ember.dynamo.reset()
    assert_close(ember.compile(f, backend="inductor")(x), f(x), 1e-6)
    ember.dynamo.reset()
    with pytest.raises(ember.dynamo.FullGraphError, match="no fake impl registered for <CustomOpDef"):
        ember.compile(f, fullgraph=True)(x)
    with pytest.raises(MissingFakeImpl, match="embertest::no_fake"):
        make_fx(f, tracing_mode="fake")(x)


def test_missing_autograd_under_compile_falls_back_then_backward_raises(caplog):
    @custom_op("embertest::fake_no_grad", mutates_args=())
    def fake_no_grad(x: Tensor) -> Tensor:
        return ember.from_numpy(np.tanh(x.numpy()))

    fake_no_grad.register_fake(lambda x: ember.empty_like(x))

    def f(x):
        return fake_no_grad(x) * 3

    x = rand(4, requires_grad=True)
    with caplog.at_level(logging.WARNING, logger="ember.aot"):
        y = ember.compile(f, backend="aot_eager")(x)
    assert "running it eagerly" in caplog.text and "embertest.fake_no_grad.default" in caplog.text
    assert_close(y, f(x.detach()), 1e-6)
    with pytest.raises(RuntimeError, match="Trying to backward through embertest.fake_no_grad.default"):
        y.sum().backward()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_dynamic_shapes_compile_once(backend):
    def f(x, w):
        return numpy_scaled_exp(numpy_sin(x) * w, 0.25).sum(-1)

    compiled = ember.compile(f, backend=backend, dynamic=True)
    before = dict(ember.dynamo.counters)
    for n in (5, 8, 11):
        x, w = rand(3, n), rand(3, n)
        out, grads = grads_of(f, x, w)
        cout, cgrads = grads_of(compiled, x, w)
        assert_close(out, cout, 1e-5)
        for g, c in zip(grads, cgrads):
            assert_close(g, c, 1e-4)
    assert ember.dynamo.counters["compiled"] - before["compiled"] == 1
    assert ember.dynamo.counters["recompiles"] == before["recompiles"]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_factory_op_with_a_symbolic_size_argument(backend, caplog, monkeypatch):
    from ember.aot import config as aot_config
    monkeypatch.setattr(aot_config, "debug_dynamic", True)   # one graph for every size, not one per shape
    @custom_op("embertest::squares", mutates_args=())
    def squares(n: int, device: ember.device) -> Tensor:
        return ember.from_numpy(np.arange(n, dtype=np.float32) ** 2)

    squares.register_fake(lambda n, device: ember.empty(n, device=device))

    def f(x):
        return x * squares(x.shape[0], x.device)

    compiled = ember.compile(f, backend=backend, dynamic=True)
    with caplog.at_level(logging.WARNING, logger="ember.inductor"):
        for n in (4, 7):
            x = rand(n)
            assert_close(f(x), compiled(x), 1e-6)
    if backend == "inductor":
        # the extern call's size argument is computed by the wrapper per call (ir.ExternSize):
        # compiled, not run eagerly (it was, logged)
        assert "running it eagerly" not in caplog.text, caplog.text
        assert ember.dynamo.counters["recompiles"] == 0


@pytest.mark.parametrize("dynamic", [False, True])
def test_inductor_catches_a_fake_impl_that_disagrees(dynamic):
    @custom_op("embertest::lying_fake", mutates_args=())
    def lying(x: Tensor) -> Tensor:
        return ember.from_numpy(np.sin(x.numpy()))

    lying.register_fake(lambda x: x.new_empty(x.shape[0] + 1))
    with pytest.raises(RuntimeError, match=r"embertest::lying_fake: output 0 of the implementation is \[3\] "
                                           r"float32, but its fake impl said \[4\]"):
        ember.compile(lambda x: lying(x) * 2, dynamic=dynamic)(rand(3))


# ---------------------------------------------------------------------------- mutation
@custom_op("embertest::add_one_", mutates_args=("x",))
def add_one_(x: Tensor) -> None:
    arr = x.numpy()
    arr += 1


add_one_.register_fake(lambda x: None)


def test_mutating_op_eager():
    x = rand(4)
    before, version = x.numpy().copy(), x._version
    assert add_one_(x) is None
    np.testing.assert_allclose(x.numpy(), before + 1)
    assert x._version == version + 1
    assert add_one_.schema == "embertest::add_one_(Tensor(a0!) x) -> ()"
    with pytest.raises(RuntimeError, match="mutates its argument 'x', which requires grad"):
        add_one_(rand(3, requires_grad=True))
    with ember.no_grad():
        add_one_(rand(3, requires_grad=True))       # (allowed: no graph is recorded)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_mutating_op_compiled_keeps_eager_semantics(backend):
    def f(x):
        y = x * 2
        add_one_(y)            # a temporary
        add_one_(x)            # an input
        return y + x

    x = rand(5)
    xe, xc = x.clone(), x.clone()
    want = f(xe)
    got = ember.compile(f, backend=backend)(xc)
    assert_close(want, got, 1e-6)
    assert_close(xe, xc, 1e-6)                 # the input was written, as eagerly
    ember.dynamo.reset()
    out = ember.dynamo.explain(f)(x.clone())
    assert out.graph_break_count == 2
    assert all("embertest::add_one_ mutates its argument(s) x" in r for _, r, _ in out.break_reasons)


def test_mutating_op_is_refused_by_functionalization():
    def f(x):
        y = x * 2
        add_one_(y)
        return y

    with pytest.raises(NotImplementedError, match="functionalizing a mutating custom op"):
        make_fx(f, tracing_mode="fake", functionalize=True)(rand(3))


# ---------------------------------------------------------------------------- opcheck
def test_opcheck_passes_for_correct_ops():
    x = rand(3, 4, requires_grad=True)
    assert opcheck(numpy_sin, (x,)) == {t: "SUCCESS" for t in ember.library._opcheck.DEFAULT_TESTS}
    assert set(opcheck(numpy_scaled_exp, (x, 2.0), {"shift": 1}).values()) == {"SUCCESS"}
    a, b = rand(2, 3, requires_grad=True), rand(2, 3, requires_grad=True)
    assert set(opcheck("embertest::weighted_sum", ([a, b], None, [0.5, 2.0])).values()) == {"SUCCESS"}
    res = opcheck(add_one_, (rand(3),))
    assert res["test_schema"] == "SUCCESS" and res["test_aot_dispatch_dynamic"].startswith("SKIPPED")


def test_opcheck_catches_a_fake_impl_with_the_wrong_shape():
    @custom_op("embertest::wrong_fake", mutates_args=())
    def wrong_fake(x: Tensor) -> Tensor:
        return ember.from_numpy(np.cos(x.numpy()))

    @wrong_fake.register_fake
    def _(x):
        return x.new_empty((x.shape[0] + 1,) + tuple(x.shape[1:]))

    with pytest.raises(OpCheckError, match=r"test_faketensor failed with .*Shapes \[3, 2\] and \[4, 2\] are not "
                                           r"equal"):
        opcheck(wrong_fake, (rand(3, 2),))
    res = opcheck(wrong_fake, (rand(3, 2),), raise_exception=False)
    assert res["test_schema"] == "SUCCESS"
    assert isinstance(res["test_faketensor"], Exception)


def test_opcheck_catches_missing_registrations_and_undeclared_mutation():
    @custom_op("embertest::sneaky", mutates_args=())
    def sneaky(x: Tensor, y: Tensor) -> Tensor:
        y.numpy()[...] = 0.0                      # writes y, which mutates_args does not list
        return ember.from_numpy(x.numpy() * 2)

    with pytest.raises(OpCheckError, match=r"test_schema failed with .*mutated its argument 'y'"):
        opcheck(sneaky, (rand(3), rand(3)), test_utils="test_schema")
    with pytest.raises(OpCheckError, match="test_faketensor failed with There was no fake impl registered"):
        opcheck(sneaky, (rand(3), rand(3)), test_utils=("test_faketensor",))
    sneaky.register_fake(lambda x, y: ember.empty_like(x))
    with pytest.raises(OpCheckError, match="test_autograd_registration failed with .*no autograd formula"):
        opcheck(sneaky, (rand(3, requires_grad=True), rand(3)), test_utils=("test_autograd_registration",))
    with pytest.raises(OpCheckError, match="test_aot_dispatch_dynamic failed with .*no autograd formula"):
        opcheck(sneaky, (rand(3, requires_grad=True), rand(3)), test_utils=("test_aot_dispatch_dynamic",))
    with pytest.raises(ValueError, match="unknown test"):
        opcheck(sneaky, (rand(3), rand(3)), test_utils=("test_everything",))
