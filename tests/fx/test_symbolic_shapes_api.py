"""ember.fx.experimental.symbolic_shapes' public helpers against torch's.

ember's ShapeEnv makes SymInts directly (``create_symbol`` returns one);
torch's returns a sympy symbol that ``create_symintnode`` wraps. Each case
builds the same sizes in both and compares the helpers' answers, the guards
they leave behind and the ranges ``bound_sympy`` derives.
"""

import random

import pytest

import ember
import ember.fx.experimental.symbolic_shapes as es
from ember.fx.experimental.value_ranges import ValueRanges, bound_expr

torch = pytest.importorskip("torch")
import torch.fx.experimental.symbolic_shapes as ts  # noqa: E402
from torch._dynamo.source import ConstantSource  # noqa: E402

sympy = pytest.importorskip("sympy")


def _torch_sym(env, value, name):
    sym = env.create_symbol(value, ConstantSource(name))
    return env.create_symintnode(sym, hint=value) if isinstance(sym, sympy.Symbol) else int(sym)


def _guards(env):
    """Guards as strings with symbols renamed in order of appearance (torch numbers them differently)."""
    exprs = [g.expr for g in env.guards] if env.guards and hasattr(env.guards[0], "expr") else list(env.guards)
    return [str(e) for e in exprs]


def _vr(vr):
    return (str(vr.lower).replace("int_oo", "oo"), str(vr.upper).replace("int_oo", "oo"))


def test_plain_values_like_torch():
    for mod in (ts, es):
        assert mod.statically_known_true(True) is True
        assert mod.statically_known_true(False) is False
        assert mod.guard_or_false(True) and not mod.guard_or_false(False)
        assert mod.guard_or_true(True) and not mod.guard_or_true(False)
        assert mod.guard_size_oblivious(True) is True
        assert mod.expect_true(True) is True
        assert not mod.has_free_symbols(3) and not mod.has_free_symbols([1, (2, 3.5)])
        assert len(mod.free_symbols(3)) == 0 and len(mod.free_unbacked_symbols(3)) == 0
        assert mod.is_concrete_int(3) and mod.is_concrete_int(True) and mod.is_concrete_bool(False)
        assert mod.sym_eq((1, 2), (1, 2)) is True
        assert mod.sym_eq([1, 2], [1, 3]) is False
        assert mod.sym_eq((1,), (1, 2)) is False
        assert mod.constrain_range(5, min=2, max=10) is None
    for lo, hi, v in [(6, 10, 5), (0, 4, 5)]:
        msgs = []
        for mod in (ts, es):
            with pytest.raises(ValueError) as ei:
                mod.constrain_range(v, min=lo, max=hi)
            msgs.append(str(ei.value))
        assert msgs[0] == msgs[1] == f"Invalid value {v} for range [{lo}:{hi}]"


def test_free_symbols_of_tensors_like_torch():
    assert ts.free_symbols(torch.empty(3, 4)) == set() and es.free_symbols(ember.empty(3, 4)) == set()
    from ember.fx.fake_tensor import FakeTensorMode

    env = es.ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    fake = mode.from_tensor(ember.empty(3, 4, 5), symbolic=True, dynamic_dims=[0, 2])
    syms = es.free_symbols(fake)
    assert {str(s) for s in syms} == {str(fake.shape[0]), str(fake.shape[2])}
    assert es.has_free_symbols(fake) and es.free_unbacked_symbols(fake) == set()
    s = fake.shape[0]
    assert es.free_symbols([s, (s * 2, 3)]) == {s.expr}
    assert es.free_symbols({"a": s + 1}) == {s.expr}
    assert es.free_symbols(s.expr + 1) == {s.expr}
    assert es.free_unbacked_symbols(sympy.Symbol("u3") + s.expr) == {sympy.Symbol("u3")}


@pytest.mark.parametrize("seed", range(6))
def test_symint_helpers_like_torch(seed):
    rng = random.Random(seed)
    value = rng.randrange(3, 40)
    tenv, eenv = ts.ShapeEnv(), es.ShapeEnv()
    t, e = _torch_sym(tenv, value, "x"), eenv.create_symbol(value, "x")
    for mod, s in ((ts, t), (es, e)):
        assert mod.has_free_symbols(s)
        assert len(mod.free_symbols(s)) == 1
        assert len(mod.free_unbacked_symbols(s)) == 0
        assert not mod.is_concrete_int(s)
    # decided without guards: every backed size is >= 2
    for rel in (lambda s: s >= 2, lambda s: s > 1, lambda s: s * 2 >= 4, lambda s: s != 1):
        assert ts.statically_known_true(rel(t)) == es.statically_known_true(rel(e)) is True
    for rel in (lambda s: s > value, lambda s: s == value, lambda s: s < value + 1):
        assert ts.statically_known_true(rel(t)) == es.statically_known_true(rel(e)) is False
    assert ts.statically_known_false(t < 2) == es.statically_known_false(e < 2) is True
    assert tenv.guards == [] and eenv.guards == []
    assert _vr(tenv.bound_sympy(t.node.expr * 2 + 1)) == _vr(eenv.bound_sympy(e.expr * 2 + 1)) == ("5", "oo")
    # a guard pins the symbol: ranges follow, later questions need no guard
    tsym, esym = t.node.expr, e.expr
    tname, ename = str(tsym), str(esym)
    assert ts.guard_or_false(t == value) and es.guard_or_false(e == value)
    assert _guards(tenv) == [f"Eq({tname}, {value})"] and _guards(eenv) == [f"Eq({ename}, {value})"]
    assert _vr(tenv.var_to_range[tsym]) == _vr(eenv.var_to_range[esym]) == (str(value), str(value))
    assert _vr(tenv.bound_sympy(tsym * 3 - 1)) == _vr(eenv.bound_sympy(esym * 3 - 1)) == (str(3 * value - 1),) * 2
    assert ts.statically_known_true(t < value + 5) == es.statically_known_true(e < value + 5) is True
    assert ts.expect_true(t > 2) and es.expect_true(e > 2)
    assert ts.guard_size_oblivious(t > 1) and es.guard_size_oblivious(e > 1)
    assert len(tenv.guards) == len(eenv.guards) == 1
    assert ts.guard_int(t) == es.guard_int(e) == value


def test_constrain_range_on_symint_like_torch():
    tenv, eenv = ts.ShapeEnv(), es.ShapeEnv()
    t, e = _torch_sym(tenv, 8, "x"), eenv.create_symbol(8, "x")
    ts.constrain_range(t, min=4, max=10)
    es.constrain_range(e, min=4, max=10)
    assert _vr(tenv.var_to_range[t.node.expr]) == _vr(eenv.var_to_range[e.expr]) == ("4", "10")
    assert _vr(tenv.bound_sympy(t.node.expr - 4)) == _vr(eenv.bound_sympy(e.expr - 4)) == ("0", "6")
    assert ts.statically_known_true(t > 3) == es.statically_known_true(e > 3) is True
    assert ts.statically_known_true(t > 4) == es.statically_known_true(e > 4) is False
    with pytest.raises(Exception):  # torch: an AssertionError from its range check
        ts.constrain_range(t, min=9, max=12)
    with pytest.raises(ValueError, match=r"Invalid value 8 for range \[9:12\]"):
        es.constrain_range(e, min=9, max=12)
    assert _vr(eenv.var_to_range[e.expr]) == ("4", "10")  # unchanged by the failed call
    assert tenv.guards == [] and eenv.guards == []


def test_dim_dynamic_and_contexts():
    assert [d.name for d in es.DimDynamic][:5] == [d.name for d in ts.DimDynamic][:5]
    assert [d.value for d in es.DimDynamic][:5] == [d.value for d in ts.DimDynamic][:5]
    env = es.ShapeEnv()
    a = env.create_symbol(4, "a")
    assert env.create_symbol(4, "b") is not None and str(env.create_symbol(4, "b")) == str(a)  # duck
    assert str(env.create_symbol(4, "c", dynamic_dim=es.DimDynamic.DYNAMIC)) != str(a)
    assert env.create_symbol(4, "d", dynamic_dim=es.DimDynamic.STATIC) == 4
    assert env.create_symbol(1, "e") == 1
    with pytest.raises(NotImplementedError, match="unbacked"):
        env.create_symbol(4, "f", dynamic_dim=es.DimDynamic.UNBACKED)
    with pytest.raises(TypeError, match="dynamic_dim must be a DimDynamic"):
        env.create_symbol(4, "g", dynamic_dim="duck")
    ctx = es.StatelessSymbolicContext([es.DimDynamic.STATIC, es.DimDynamic.DYNAMIC, es.DimDynamic.DUCK])
    sizes = env.create_symbolic_sizes([4, 4, 9], "t", symbolic_context=ctx)
    assert sizes[0] == 4 and str(sizes[1]) not in (str(a), "4") and es.hint_int(sizes[2]) == 9
    with pytest.raises(ValueError, match="2 dims"):
        env.create_symbolic_sizes([4, 5], symbolic_context=ctx)
    with pytest.raises(TypeError, match="DimDynamic values"):
        es.StatelessSymbolicContext(["dyn"])
    assert isinstance(es.StatefulSymbolicContext([es.DimDynamic.DUCK], tensor_source="x"), es.StatelessSymbolicContext)


def test_sym_eq_and_create_symintnode():
    env = es.ShapeEnv()
    a, b = env.create_symbol(4), env.create_symbol(6)
    r = es.sym_eq((a, 3), (b, 3))
    assert isinstance(r, es.SymBool) and env.guards == []
    assert bool(r) is False and len(env.guards) == 1
    assert es.sym_eq((a, 3), (a, 3)) is True
    with pytest.raises(TypeError, match="cannot compare"):
        es.sym_eq((a,), a)
    n = env.create_symintnode(a.expr * 2, hint=8)
    assert isinstance(n, es.SymInt) and es.hint_int(n) == 8
    assert env.create_symintnode(sympy.Integer(5), hint=5) == 5
    with pytest.raises(ValueError, match="disagrees"):
        env.create_symintnode(a.expr * 2, hint=9)
    with pytest.raises(NotImplementedError, match="unbacked"):
        env.create_symintnode(sympy.Symbol("u0", integer=True), hint=None)
    with pytest.raises(TypeError, match="expected an int or SymInt"):
        es.is_concrete_int(2.5)
    with pytest.raises(TypeError, match="expected a bool or SymBool"):
        es.guard_or_false(3)


@pytest.mark.parametrize("seed", range(20))
def test_bound_expr_is_sound(seed):
    """Random expressions: every sampled value lies inside the computed range."""
    rng = random.Random(seed)
    x, y = sympy.symbols("x y", integer=True)
    lo_x, lo_y = rng.randrange(-5, 5), rng.randrange(0, 5)
    ranges = {x: ValueRanges(lo_x, lo_x + rng.randrange(0, 8)), y: ValueRanges(lo_y, lo_y + rng.randrange(1, 8))}
    atoms = [x, y, sympy.Integer(rng.randrange(-3, 4))]
    expr = rng.choice(atoms)
    for _ in range(4):
        other = rng.choice(atoms)
        kind = rng.randrange(6)
        if kind == 0:
            expr = expr + other
        elif kind == 1:
            expr = expr * other
        elif kind == 2:
            expr = sympy.Max(expr, other)
        elif kind == 3:
            expr = sympy.Min(expr, other)
        elif kind == 4:
            expr = sympy.floor(expr / 2)
        else:
            expr = expr ** 2
    vr = bound_expr(expr, ranges)
    for xv in range(int(ranges[x].lower), int(ranges[x].upper) + 1):
        for yv in range(int(ranges[y].lower), int(ranges[y].upper) + 1):
            v = expr.subs({x: xv, y: yv})
            assert vr.lower <= v <= vr.upper, (expr, xv, yv, vr)
