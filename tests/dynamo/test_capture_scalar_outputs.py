"""``ember.dynamo.config.capture_scalar_outputs``: ``t.item()`` captured as a symbolic scalar.

Eager is the truth on every case: values, Python types of the numbers, tensor dtypes,
gradients. With the flag the cases below compile to one graph (reused for new values: no
guard on the item's value); where Python needs the concrete value the graph breaks there and
the code after the break sees the real ``float``/``int``/``bool``."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from ember import dynamo

from ._util import CountingBackend, assert_same, check, clone_tree

_rng = np.random.default_rng(20261129)


@pytest.fixture(autouse=True)
def _capture(monkeypatch):
    monkeypatch.setattr(dynamo.config, "capture_scalar_outputs", True)


def _t(*shape, dtype=ember.float32, positive=False):
    a = _rng.standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.5
    return ember.tensor(a.astype(np.float64)).to(dtype)


def _ints(*shape, low=-5, high=6, dtype=ember.int64):
    a = _rng.integers(low, high, shape)
    a[a == 0] = 1
    return ember.tensor(a).to(dtype)


def _reasons():
    return " | ".join(r for _, r in dynamo.fallback_reasons)


# ------------------------------------------------------------------------------------ one graph
def test_tensor_scalar_arithmetic_one_graph():
    def f(x, y):
        s = y.sum().item()
        return x * s, s * x, x + s, x / s, x - s, s / x, x ** 2 * s, x > s, s <= x
    check(f, lambda: (_t(5), _t(3, dtype=ember.float64)))


def test_python_arithmetic_on_scalars_one_graph():
    def f(x, y):
        s = y.sum().item()
        n = y.argmax().item()
        b = (y > 0).any().item()
        return (s - 1.0, s * 2, -s, s ** 2, 2.5 - s, s / 4, s + s, s * n, n * 3, n - 7, -n, n // 2, n % 3,
                n / 4, b + b, b * 2.5, n & 6, n | 1, b & b, +b, abs(s), abs(n), float(n), int(b), bool(s),
                s > 0.1, n == 1, s != s, x * 1.0)
    cnt = check(f, lambda: (_t(2), _t(4, dtype=ember.float64)))
    assert cnt.frame_count == 1


_PY_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
           "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b, "<": lambda a, b: a < b,
           "==": lambda a, b: a == b, ">=": lambda a, b: a >= b, "&": lambda a, b: a & b, "|": lambda a, b: a | b}


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["float", "int", "bool"]), op=st.sampled_from(sorted(_PY_OPS)),
       const=st.sampled_from([3, -2, 0.75, -1.5, True, 2.0]), const_left=st.booleans(),
       val=st.floats(-6, 6, allow_nan=False).filter(lambda v: abs(v) > 1e-3))
def test_python_arithmetic_property(kind, op, const, const_left, val):
    """``s <op> c`` / ``c <op> s`` of a captured item: the same value and Python type as eager, in
    one graph when Python could not raise for any value of ``s``, else a break (never a wrong value)."""
    fn = _PY_OPS[op]
    if kind == "float":
        y = ember.tensor([val], dtype=ember.float64)
    elif kind == "int":
        y = ember.tensor([int(val) or 1])
    else:
        y = ember.tensor([val > 0])

    def f(x, y):
        s = y.item()
        r = fn(const, s) if const_left else fn(s, const)
        return x * 2, r
    try:
        want = f(_t(2), y)
    except Exception as e:        # (eager raises: so must the compiled function)
        dynamo.reset()
        with pytest.raises(type(e)):
            ember.compile(f, backend=CountingBackend())(_t(2), y)
        return
    dynamo.reset()
    x = _t(2)
    got = ember.compile(f, backend=CountingBackend())(x, y)
    assert type(got[1]) is type(want[1]), (got[1], want[1])
    if isinstance(want[1], float):
        assert got[1] == pytest.approx(want[1], rel=1e-15, abs=1e-300) or (math.isnan(got[1]) and math.isnan(want[1]))
    else:
        assert got[1] == want[1]
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons


def test_float_and_int_of_a_tensor_are_captured_items():
    def f(x, y, i):
        return x * float(y), x + int(i), float(i) / 2
    cnt = check(f, lambda: (_t(3), _t(1, dtype=ember.float64), _ints(1)))
    assert cnt.frame_count == 1

    def g(x, y):
        return x * int(y)        # int() of a float needs the value: a break there, eager's int()
    cf = ember.compile(g, backend=CountingBackend())
    for _ in range(3):
        x, y = _t(3), _t(1) * 4
        assert_same(g(x, y), cf(x, y))


def test_inplace_tensor_ops_with_scalar():
    def f(x, y):
        z = x.clone()
        z += y.item()
        z *= y.item()
        z.sub_(y.item())
        return z
    check(f, lambda: (_t(4), _t(1, dtype=ember.float64)))


def test_returned_numbers_have_python_types():
    def f(x):
        s = x.sum().item()
        return s, x.argmax().item(), (x > 0).all().item(), x.to(ember.int32).sum().item()
    cf = ember.compile(f, backend=CountingBackend())
    x = _t(6)
    got, want = cf(x), f(x)
    assert [type(v) for v in got] == [type(v) for v in want] == [float, int, bool, int]
    assert got == want


def test_item_reused_for_new_values_no_recompile():
    cnt = CountingBackend()
    cf = ember.compile(lambda x, y: x * y.item() + y.item(), backend=cnt)
    for _ in range(4):
        x, y = _t(3), _t(1)
        assert_same(x * y.item() + y.item(), cf(x, y))
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("dtype", [ember.float64, ember.float32, ember.int64, ember.bool])
def test_item_not_changed_by_later_inplace_ops(backend, dtype):
    def f(x):
        s = x.item()
        x.add_(1) if dtype != ember.bool else x.logical_not_()
        return s, x * s
    x1 = _t(1, dtype=dtype) if dtype.category == 2 else ember.tensor([3]).to(dtype)
    x2 = x1.clone()
    want = f(x1)
    got = ember.compile(f, backend=backend)(x2)
    assert_same(want, got)
    assert_same(x1, x2)


def test_graph_node_is_detached_0d_of_canonical_dtype():
    cnt = CountingBackend()
    cf = ember.compile(lambda x, y, i: (x * y.item(), x * i.item()), backend=cnt)
    cf(_t(3), _t(1, 1, dtype=ember.float16), _ints(1, dtype=ember.int32))
    (gm,) = cnt.graphs
    detach = [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "detach"]
    assert len(detach) == 2
    # the float16 item: detached, reshaped to 0-d, float64 (the Python float's value), then float32
    # for the op with the float32 tensor; the int32 item: int64, then float32
    to = [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "to"]
    dts = [n.meta["example_value"].dtype for n in to]
    assert ember.float64 in dts and ember.int64 in dts and ember.float32 in dts
    for n in to:
        assert tuple(n.meta["example_value"].shape) == ()
        assert not n.meta["example_value"].requires_grad


# ------------------------------------------------------------------------------------ promotion
@pytest.mark.parametrize("case", [
    # (tensor dtype, item source dtype, op) -- the result dtype is eager's with a Python number
    (ember.float32, ember.float64, "mul"), (ember.int64, ember.float32, "mul"), (ember.bool, ember.int64, "add"),
    (ember.int32, ember.int64, "add"), (ember.float16, ember.bool, "add"), (ember.int64, ember.bool, "mul"),
    (ember.bool, ember.bool, "add"), (ember.bool, ember.float64, "mul"), (ember.int64, ember.int64, "truediv"),
    (ember.uint8, ember.int64, "mul"), (ember.float64, ember.float32, "sub"), (ember.int64, ember.float64, "gt"),
])
def test_type_promotion_as_python_number(case):
    tdt, sdt, op = case
    import operator
    fn = getattr(operator, op)

    def f(x, y):
        return fn(x, y.item()), fn(y.item(), x) if op != "truediv" else x

    def inputs():
        x = _ints(4, low=1, high=5, dtype=tdt) if tdt.category < 2 else _t(4, dtype=tdt)
        y = _ints(1, low=1, high=5, dtype=sdt) if sdt.category < 2 else _t(1, dtype=sdt)
        return x, y
    check(f, inputs)


@settings(max_examples=25, deadline=None)
@given(tdt=st.sampled_from(["float32", "float64", "int64", "int32", "bool", "float16"]),
       sdt=st.sampled_from(["float32", "float64", "int64", "int16", "bool"]),
       op=st.sampled_from(["add", "sub", "mul", "lt", "eq", "ge"]),
       shape=st.sampled_from([(), (3,), (2, 3)]))
def test_type_promotion_property(tdt, sdt, op, shape):
    import operator
    fn = getattr(operator, op)
    tdt, sdt = getattr(ember, tdt), getattr(ember, sdt)
    if op == "sub" and ember.bool in (tdt, sdt):
        op, fn = "add", operator.add      # (bool - bool raises in eager)

    def f(x, y):
        s = y.item()
        return fn(x, s), fn(s, x), fn(s, 2)
    x = _ints(*shape, low=0, high=2, dtype=tdt) if tdt.category < 2 else _t(*shape, dtype=tdt)
    y = _ints(1, low=-3, high=4, dtype=sdt) if sdt.category < 2 else _t(1, dtype=sdt)
    dynamo.reset()
    cnt = CountingBackend()
    got = ember.compile(f, backend=cnt)(x, y)
    assert_same(f(x, y), got)
    if tdt == ember.float16 and (sdt != ember.bool or shape == ()):
        # float16: eager computes with the number in float32 math and keeps float16, which no 0-d
        # operand reproduces (the op rounds it to float16 first): each op with the number breaks
        # (then runs eagerly), so up to three frames
        assert cnt.frame_count <= 3, _reasons()
    else:
        assert cnt.frame_count == 1, _reasons()


def test_promotion_matches_torch():
    torch = pytest.importorskip("torch")
    cases = [(ember.float32, torch.float32, ember.float64, torch.float64),
             (ember.int64, torch.int64, ember.float32, torch.float32),
             (ember.bool, torch.bool, ember.int64, torch.int64),
             (ember.int32, torch.int32, ember.int64, torch.int64)]
    for edt, tdt, esdt, tsdt in cases:
        a = _rng.integers(0, 2, 4)
        b = _rng.integers(1, 4, 1)
        x, y = ember.tensor(a).to(edt), ember.tensor(b).to(esdt)
        cf = ember.compile(lambda x, y: (x + y.item(), x * y.item(), x / y.item()), backend="aot_eager")
        got = cf(x, y)
        tx, ty = torch.tensor(a).to(tdt), torch.tensor(b).to(tsdt)
        want = (tx + ty.item(), tx * ty.item(), tx / ty.item())
        for g, w in zip(got, want):
            assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
            np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64), rtol=1e-6)


# ------------------------------------------------------------------------------------ ops with s
def test_scalar_as_operator_argument():
    def f(x, m, y):
        s = y.sum().item()
        return (x.clamp(max=s), x.clamp(s), ember.clamp(x, min=s), ember.where(m, x, s), ember.where(m, s, x),
                x.masked_fill(m, s), ember.full((3,), s), ember.tensor(s), ember.full_like(x, s),
                x.new_full((2, 2), s), x.add(s), ember.mul(x, s), x.pow(2).mul(s))
    check(f, lambda: (_t(2, 3), ember.tensor(_rng.random((2, 3)) > 0.5), _t(2, dtype=ember.float64)))


def test_setitem_with_scalar_value():
    def f(x, y, i):
        z = x.clone()
        z[1] = y.item()
        z[0, 1:] = i.item()
        z[z > 1.5] = y.item() * 2
        return z
    check(f, lambda: (_t(3, 4), _t(1, dtype=ember.float64), _ints(1)))
    check(lambda x, y: _setitem_f16(x, y), lambda: (_t(3, dtype=ember.float16), _t(1, dtype=ember.float64)))


def _setitem_f16(x, y):
    z = x.clone()
    z[0] = y.item()     # (converted to float16 once, as eager converts the number)
    return z


def test_full_and_tensor_dtypes_follow_python_number():
    def f(y, i, b):
        s, n, t = y.item(), i.item(), b.item()
        return (ember.full((2,), s), ember.full((2,), n), ember.full((2,), t), ember.tensor(s), ember.tensor(n),
                ember.tensor(t), ember.full((2,), n, dtype=ember.float64), ember.tensor(s, dtype=ember.float16))
    check(f, lambda: (_t(1, dtype=ember.float64), _ints(1), ember.tensor([True])))


def test_fill_inplace_with_scalar():
    def f(x, y):
        z = x.clone()
        z.fill_(y.item())
        return z
    check(f, lambda: (_t(3), _t(1)))


# ------------------------------------------------------------------------------------ gradients
def test_item_cuts_the_gradient():
    def f(x):
        s = x.sum().item()
        return (x * s).sum() + s
    for backend in ("eager", "aot_eager"):
        dynamo.reset()
        x1 = _t(4).requires_grad_(True)
        x2 = x1.detach().clone().requires_grad_(True)
        out_e = f(x1)
        out_e.backward()
        cf = ember.compile(f, backend=backend)
        out_c = cf(x2)
        out_c.backward()
        np.testing.assert_allclose(out_c.detach().numpy(), out_e.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(x2.grad.numpy(), x1.grad.numpy(), rtol=1e-6)


def test_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    a = _rng.standard_normal(5).astype(np.float32)
    x = ember.tensor(a).requires_grad_(True)
    cf = ember.compile(lambda x: (x * x.max().item() - x.mean().item()).pow(2).sum(), backend="aot_eager")
    cf(x).backward()
    tx = torch.tensor(a).requires_grad_(True)
    (tx * tx.max().item() - tx.mean().item()).pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6 * float(np.abs(tx.grad.numpy()).max()))


# ------------------------------------------------------------------------------------ breaks
def test_branch_on_scalar_breaks_there():
    def f(x, y):
        s = y.sum().item()
        z = x * s
        if s > 0:
            return z + 1, s
        return z - 1, s
    for _ in range(4):
        dynamo.reset()
        cnt = CountingBackend()
        x, y = _t(3), _t(2)
        got = ember.compile(f, backend=cnt)(x, y)
        assert_same(f(x, y), got)
        assert cnt.frame_count == 2
        assert "truth value of a captured .item()" in _reasons()


def test_resumed_code_sees_real_numbers():
    seen = []

    def record(v):
        seen.append(v)
        return v

    def f(x, y, i):
        s = y.item()
        n = i.item()
        a = record(s)              # a call that is not traced: a break, the real float passed
        m = record(n + 1)
        return x * a, m
    cf = ember.compile(f, backend=CountingBackend())
    x, y, i = _t(3), _t(1, dtype=ember.float64), _ints(1)
    got = cf(x, y, i)
    assert [type(v) for v in seen] == [float, int]
    assert seen == [y.item(), i.item() + 1]
    assert_same(f(x, y, i), got)


@pytest.mark.parametrize("use", ["float_to_int", "range", "fstring", "zeros", "index", "list_index", "print",
                                 "math", "size_view"])
def test_value_needed_breaks_and_matches_eager(use, capsys):
    def f(x, y, i):
        s = y.sum().item()
        n = i.item()
        z = x * s
        if use == "float_to_int":
            k = int(s * 10)
            return z + k, k
        if use == "range":
            acc = z
            for j in range(n):
                acc = acc + j
            return acc
        if use == "fstring":
            return z, f"{s:.3f}/{n}"
        if use == "zeros":
            return z, ember.zeros(n)
        if use == "index":
            return z, x[n]
        if use == "list_index":
            return z, [10, 20, 30, 40][n]
        if use == "print":
            print("value", s, n)
            return z
        if use == "math":
            return z * math.sqrt(abs(s))
        if use == "size_view":
            return x.view(n, -1)
    for _ in range(3):
        x = _t(4)
        y = _t(2, dtype=ember.float64)
        i = _ints(1, low=1, high=3)
        dynamo.reset()
        cnt = CountingBackend()
        cf = ember.compile(f, backend=cnt)
        want = f(x, y, i)
        out_e = capsys.readouterr().out
        got = cf(x, y, i)
        out_c = capsys.readouterr().out
        assert_same(want, got)
        assert out_c == out_e
        assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons
        assert cnt.frame_count >= 1


def test_size_use_names_unbacked_symint():
    def f(x, i):
        return ember.zeros(i.item()) + x.sum()
    cf = ember.compile(f, backend=CountingBackend())
    x, i = _t(3), _ints(1, low=1, high=4)
    assert_same(f(x, i), cf(x, i))
    assert "unbacked SymInt" in _reasons()


def test_division_by_symbolic_scalar_in_python_breaks():
    def f(x, y, i):
        s, n = y.item(), i.item()
        return x * (1.0 / s), x * (7 // n), x * (7 % n)
    cf = ember.compile(f, backend=CountingBackend())
    for _ in range(3):
        args = (_t(3), _t(1), _ints(1))
        assert_same(f(*args), cf(*args))
    assert "ZeroDivisionError" in _reasons()
    # an integer tensor divided by an item: eager raises ZeroDivisionError for 0, so it breaks
    dynamo.reset()
    g = ember.compile(lambda x, i: x // i.item(), backend=CountingBackend())
    x = _ints(4)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):     # (as torch)
        x // 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        g(x, ember.tensor([0]))
    assert "integer floordiv() by a captured .item()" in _reasons()


def test_not_capturable_items_break():
    def f(x, y):
        return x * y.item()
    for y in (_t(2), ember.tensor([1 + 2j])):
        dynamo.reset()
        cf = ember.compile(f, backend=CountingBackend())
        x = _t(2) if y.numel() != 1 else _t(2).to(ember.complex64)
        if y.numel() != 1:
            with pytest.raises(Exception) as ei:     # (eager raises: more than one element)
                f(x, y)
            with pytest.raises(type(ei.value)):
                cf(x, y)
            assert "2 elements (the program raises)" in _reasons()
        else:
            assert_same(f(x, y), cf(x, y))
            assert "complex64 tensor is not captured" in _reasons()


# ------------------------------------------------------------------------------------ outside
def test_stored_into_outside_objects_are_python_numbers():
    class Box:
        pass

    def f(x, box, out):
        s = x.sum().item()
        box.total = s * 2
        box.count = x.argmax().item()
        out.append(s)
        return x + s
    b1, b2, l1, l2 = Box(), Box(), [], []
    x = _t(3)
    cf = ember.compile(f, backend=CountingBackend())
    assert_same(f(x, b1, l1), cf(x, b2, l2))
    assert type(b2.total) is float and b2.total == b1.total
    assert type(b2.count) is int and b2.count == b1.count
    assert l2 == l1 and type(l2[0]) is float


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_loop_total_loss_matches_eager(backend):
    def make():
        ember.manual_seed(7)
        return ember.nn.Linear(4, 1)

    data = [(_t(8, 4), _t(8, 1)) for _ in range(3)]

    def train(model, opt, data):
        total = 0.0
        for x, y in data:
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            total += loss.item()
        return total
    m1, m2 = make(), make()
    o1 = ember.optim.SGD(m1.parameters(), lr=0.1)
    o2 = ember.optim.SGD(m2.parameters(), lr=0.1)
    want = train(m1, o1, clone_tree(data))
    got = ember.compile(train, backend=backend)(m2, o2, clone_tree(data))
    assert type(got) is float
    assert got == pytest.approx(want, rel=1e-6)
    np.testing.assert_allclose(m2.weight.detach().numpy(), m1.weight.detach().numpy(), rtol=1e-6, atol=1e-7)  # (float32; a weight near 0)


def test_accumulating_total_in_body():
    def step(x, total):
        loss = (x * x).mean()
        total += loss.item()
        return loss, total
    cnt = CountingBackend()
    cf = ember.compile(step, backend=cnt)
    te = tc = 0.0
    for _ in range(4):
        x = _t(5)
        le, te = step(x, te)
        lc, tc = cf(x, tc)
        assert type(tc) is float and tc == te
    # (the first call's total 0.0 is specialised; the second call's new total makes it an
    # unspecialized float input, which the captured item is added to: no recompile after that)
    assert cnt.frame_count == 2, _reasons()
    assert not dynamo.fallback_reasons, _reasons()


# ------------------------------------------------------------------------------------ flag off
def test_flag_off_item_still_breaks(monkeypatch):
    monkeypatch.setattr(dynamo.config, "capture_scalar_outputs", False)
    cnt = CountingBackend()
    cf = ember.compile(lambda x: x * x.sum().item(), backend=cnt)
    x = _t(3)
    assert_same(x * x.sum().item(), cf(x))
    assert cnt.frame_count == 2
    assert "Tensor.item() reads tensor data" in _reasons()


def test_torch_name_alias(monkeypatch):
    monkeypatch.setattr(dynamo.config, "capture_scalar_outputs", False)
    ember._dynamo.config.capture_scalar_outputs = True
    assert dynamo.config.capture_scalar_outputs is True


# ------------------------------------------------------------------------------------ backends
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiles_through_backends(backend):
    def f(x, y, i, m):
        s = y.sum().item()
        n = i.item()
        b = m.any().item()
        u = (s - 1.0) * 2 + n
        return (x * s + u, x.clamp(max=s), ember.where(x > 0, x, u), ember.full((2,), s), x * n + b,
                (x > s).sum(), s * n, u)
    for _ in range(2):
        args = (_t(6), _t(3, dtype=ember.float64), _ints(1), ember.tensor(_rng.random(2) > 0.5))
        dynamo.reset()
        want = f(*args)
        got = ember.compile(f, backend=backend)(*args)
        assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons
        assert not dynamo.fallback_reasons, dynamo.fallback_reasons
        for w, g in zip(want, got):
            if isinstance(w, ember.Tensor):
                assert w.dtype == g.dtype and tuple(w.shape) == tuple(g.shape)
                np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64), rtol=1e-6,
                                           atol=1e-6)
            else:
                assert type(w) is type(g) and g == pytest.approx(w, rel=1e-12)


def test_inductor_with_grad():
    def f(x, w):
        s = (x @ w).abs().max().item()
        return ((x @ w) / s).tanh().sum()
    a, b = _t(4, 3), _t(3, 2)
    w1 = b.clone().requires_grad_(True)
    w2 = b.clone().requires_grad_(True)
    f(a, w1).backward()
    out = ember.compile(f)(a, w2)
    out.backward()
    assert not dynamo.fallback_reasons, dynamo.fallback_reasons
    np.testing.assert_allclose(w2.grad.numpy(), w1.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_with_dynamic_sizes():
    """Sizes made symbolic by automatic dynamic shapes combine with captured items in the graph."""
    def f(x):
        s = x.sum().item()
        n = x.shape[0]
        return x * s + n, ember.full((n,), s), s * n, n - s, x.new_full((n, 2), s)
    cnt = CountingBackend()
    cf = ember.compile(f, backend=cnt)
    for n in (3, 4, 5, 6):
        x = _t(n)
        assert_same(f(x), cf(x))
    assert not dynamo.fallback_reasons, _reasons()
    assert cnt.frame_count == 2       # static, then dynamic: no recompile for sizes 5, 6


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_tensor_of_a_list_with_items(backend):
    def f(x, y, i):
        s, n = y.item(), i.item()
        return (ember.tensor([s, 1.0, n]), ember.tensor([[n, 2], [3, n]]), ember.tensor([s > 0, True]),
                ember.tensor((s, s), dtype=ember.float64), x * ember.tensor([n, 1]).sum())
    for _ in range(2):
        args = (_t(3), _t(1, dtype=ember.float64), _ints(1))
        dynamo.reset()
        cnt_backend = CountingBackend()
        assert_same(f(*args), ember.compile(f, backend=cnt_backend)(*args))
        assert cnt_backend.frame_count == 1, _reasons()
        dynamo.reset()
        assert_same(f(*args), ember.compile(f, backend=backend)(*args))
        assert not dynamo.fallback_reasons, _reasons()


def test_max_min_of_scalars_one_graph_with_pythons_nan_order():
    """``max``/``min`` with a captured item among numbers of one type stay in the graph, with
    Python's exact rule (the first extreme value wins, so NaN placement matters)."""
    def f(x, y):
        s = y.sum().item()
        n = y.argmax().item()
        return (x * max(s, 0.25), x * min(0.5, s), max(s, s * 2, -1.0), min(n, 2), max(3, n, 1),
                max(1.0, 2.0, s), min(s, float("nan")), max(float("nan"), s))
    cnt = check(f, lambda: (_t(3), _t(4, dtype=ember.float64)))
    assert cnt.frame_count == 1

    def g(x):
        s = x.sum().item()
        return max(s, 0.0), max(0.0, s), min(s, 1.0), min(1.0, s)
    for v in (float("nan"), -2.0, 3.0):
        x = ember.tensor([v, 0.0], dtype=ember.float64)
        got, want = ember.compile(g, backend="aot_eager")(x), g(x)
        for a, b in zip(got, want):
            assert type(a) is type(b) and (a == b or (a != a and b != b))


def test_max_of_mixed_number_types_breaks():
    def f(x, y):
        s = y.sum().item()
        return x * max(s, 1)            # float or int depending on the value: needs it
    dynamo.reset()
    cf = ember.compile(f, backend="aot_eager")
    for _ in range(3):
        x, y = _t(3), _t(4, dtype=ember.float64)
        assert_same(f(x, y), cf(x, y))
    assert "depends on the values" in _reasons()


def test_add_sub_with_captured_alpha_one_graph():
    """``add/sub(..., alpha=item)``: ``y * alpha`` in the result's dtype, then the add -- the
    same rounding as eager's kernel; in-place too."""
    def f(x, y, g):
        s = g.sum().item()
        z = x.clone()
        z.add_(y, alpha=s)
        return x.add(y, alpha=s), ember.sub(x, y, alpha=s), ember.add(x, y.double(), alpha=s), z
    cnt = check(f, lambda: (_t(5), _t(5), _t(3, dtype=ember.float64)))
    assert cnt.frame_count == 1

    def h(a, b, g):
        n = g.argmax().item()
        return a.add(b, alpha=n), a.sub(b, alpha=n)
    cnt = check(h, lambda: (_ints(4), _ints(4), _t(6)))
    assert cnt.frame_count == 1


def test_captured_float_alpha_on_int_tensors_breaks_like_eager_refuses():
    def f(a, b, g):
        s = g.sum().item()
        return a.add(b, alpha=s)        # eager raises (float alpha, int result)
    dynamo.reset()
    cf = ember.compile(f, backend="aot_eager")
    a, b, g = _ints(4), _ints(4), _t(3, dtype=ember.float64)
    with pytest.raises(RuntimeError):
        f(a, b, g)
    with pytest.raises(RuntimeError):
        cf(a, b, g)
