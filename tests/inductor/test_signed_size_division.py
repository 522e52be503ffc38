"""``//`` and ``%`` of symbolic sizes with a possibly negative operand keep Python's rounding.

Why: inductor's ``FloorDiv`` and ``ModularIndexing`` print as C's truncating ``/`` and ``%``,
exact only for a numerator that is not negative. A roll by a negative shift computes
``shift % n`` (``Mod(-38, s1)`` = 10 for s1 = 16), and under ``dynamic=True`` that was printed
as C's ``(-38) % s1`` = -6: the compiled roll read past each row (the fuzzer's seed 201). Such
quotients and remainders now stay sympy's ``Mod`` / ``floor`` and are printed with Python's
rounding (C++, the Python wrapper and Triton).
"""
import numpy as np
import pytest
import sympy

import ember
from ember.inductor.sizevars import (FloorDiv, ModularIndexing, cexpr, floordiv_expr, from_shape_env,
                                     mod_expr, pyexpr, size_symbol)


def _x(shape, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _same_over_sizes(f, shapes):
    ember.dynamo.reset()
    c = ember.compile(f, backend="inductor", dynamic=True)
    for i, shp in enumerate(shapes):
        x = _x(shp, i)
        want, got = f(x), c(x)
        for a, b in zip(want, got):
            assert tuple(a.shape) == tuple(b.shape)
            np.testing.assert_array_equal(b.numpy(), a.numpy())


@pytest.mark.parametrize("shift", [-38, -17, -1, 5, 37])
def test_roll_by_any_shift_under_dynamic_sizes(shift, strict_lowering):
    # |shift| below, at and above the row length, both signs, several lengths in one compile
    _same_over_sizes(lambda x: (x.roll(shift, -1), x.roll(shift, 0), x.roll(shift)),
                     [(2, 16), (3, 9), (5, 40), (4, 17)])


def test_sizes_from_negative_numerators(strict_lowering):
    def f(x):
        n = x.shape[-1]
        return x[..., (n - 7) // 2:], x[..., (5 - n) % 3:], x.reshape(-1)[: n * 2 - 3]
    _same_over_sizes(f, [(3, 16), (4, 9), (2, 40), (3, 6)])


def test_index_expressions_print_with_python_rounding():
    s = size_symbol("s1")
    mod, fl = mod_expr(sympy.Integer(-38), s), floordiv_expr(s - 40, sympy.Integer(3))
    assert not isinstance(mod, ModularIndexing) and not isinstance(fl, FloorDiv)
    # non-negative operands keep the cheap C forms
    assert isinstance(mod_expr(s + 3, s), (ModularIndexing, sympy.Integer, sympy.Expr))
    assert isinstance(floordiv_expr(s - 1, sympy.Integer(2)), FloorDiv)
    for n in [1, 2, 5, 16, 39, 40, 41, 100]:
        want_mod, want_fl = -38 % n, (n - 40) // 3
        # the Python printer: evaluated as the wrapper evaluates it
        assert eval(pyexpr(mod), {"s1": n}) == want_mod
        assert eval(pyexpr(fl), {"s1": n}) == want_fl
        # the C printer: evaluated with C's truncating / and % (the ternary as Python's)
        assert _eval_c(cexpr(mod), n) == want_mod
        assert _eval_c(cexpr(fl), n) == want_fl


def test_shape_env_expressions_keep_their_sign():
    s = size_symbol("s0")
    assert isinstance(from_shape_env(sympy.Mod(s + 2, s)), ModularIndexing)
    assert isinstance(from_shape_env(sympy.floor((s - 1) / 2)), FloorDiv)
    neg = from_shape_env(sympy.Mod(-3 * s - 1, 4))
    fl = from_shape_env(sympy.floor((s - 9) / 4))
    for n in [1, 3, 8, 9, 10, 33]:
        assert eval(pyexpr(neg), {"s0": n}) == (-3 * n - 1) % 4
        assert _eval_c(cexpr(neg), n, name="s0") == (-3 * n - 1) % 4
        assert _eval_c(cexpr(fl), n, name="s0") == (n - 9) // 4


class _CInt(int):
    """An int with C's truncating ``/`` and ``%`` (what the generated C++ computes)."""

    def _w(self, v):
        return _CInt(v)

    def __truediv__(self, o):
        q = abs(int(self)) // abs(int(o))
        return self._w(q if (self >= 0) == (o >= 0) else -q)

    def __mod__(self, o):
        return self._w(int(self) - int(o) * int(self / _CInt(o)))

    def __add__(self, o):
        return self._w(int(self) + int(o))

    __radd__ = __add__

    def __sub__(self, o):
        return self._w(int(self) - int(o))

    def __rsub__(self, o):
        return self._w(int(o) - int(self))

    def __mul__(self, o):
        return self._w(int(self) * int(o))

    __rmul__ = __mul__

    def __neg__(self):
        return self._w(-int(self))


def _eval_c(src, n, name="s1"):
    import re
    py = src.replace("std::max<int64_t>", "max").replace("std::min<int64_t>", "min")
    # ``c ? a : b`` (the printers' only ternary) as Python's conditional expression
    m = re.fullmatch(r"\(\((.*)\) >= 0 \? (.*) : (.*)\)", py)
    if m:
        py = f"(({m.group(2)}) if ({m.group(1)}) >= 0 else ({m.group(3)}))"
    py = re.sub(r"(?<![\w.])(\d+)", r"_C(\1)", py)
    return int(eval(py, {"_C": _CInt, name: _CInt(n), "max": max, "min": min}))


class _TInt(_CInt):
    """Triton's integers: ``//`` and ``%`` truncate as C's do."""

    def _w(self, v):
        return _TInt(v)

    __floordiv__ = _CInt.__truediv__


class _TL:
    @staticmethod
    def where(c, a, b):
        return a if c else b


def test_triton_index_printer_keeps_python_rounding():
    import re
    from ember.inductor.codegen.triton import TritonIndexPrinter
    pr = TritonIndexPrinter()
    s = size_symbol("s1")
    for e, want in [(mod_expr(sympy.Integer(-38), s), lambda n: -38 % n),
                    (floordiv_expr(s - 40, sympy.Integer(3)), lambda n: (n - 40) // 3),
                    (mod_expr(s + 5, sympy.Integer(4)), lambda n: (n + 5) % 4)]:
        src = re.sub(r"(?<![\w.])(\d+)", r"_T(\1)", pr.doprint(e))
        for n in [1, 2, 5, 16, 39, 40, 41, 100]:
            assert int(eval(src, {"_T": _TInt, "s1": _TInt(n), "tl": _TL})) == want(n), (src, n)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_negative_size_expressions_as_tensor_values(backend, strict_lowering):
    """A size made a tensor value counts a range (``ones(n).sum()``), 0 for a negative ``n``:
    ``x * (s0 - s1)`` with s0 < s1 gave 0 compiled (the fuzzer, repro 3). Now the positive and
    the negative terms are counted apart (``symbolic_shapes.signed_parts``); one compile serves
    sizes where the expression is negative, zero and positive."""
    def f(x):
        return (x * (x.shape[0] - x.shape[1]), x * (x.shape[1] - 10),
                x - ember.arange(-x.shape[1], 0, dtype=x.dtype), x.sum(1) / (x.shape[0] - 7))
    ember.dynamo.reset()
    c = ember.compile(f, backend=backend, dynamic=True)
    for i, shp in enumerate([(2, 5), (3, 9), (9, 9), (12, 10), (4, 16)]):
        x = _x(shp, i)
        for a, b in zip(f(x), c(x)):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=0)
    assert ember.dynamo.counters["eager_fallback"] == 0


def test_signed_parts():
    from ember.fx.experimental.symbolic_shapes import ShapeEnv, signed_parts
    env = ShapeEnv()
    s0, s1 = (env.create_symbol(v, f"x.size({i})") for i, v in enumerate((3, 8)))
    for n in [s0 - s1, s1 - 10, -s1, 2 * s0 - 3 * s1 + 4, s0 * s1 - s0, s0 + 1]:
        pos, neg = signed_parts(n)
        for v0, v1 in [(3, 8), (10, 2), (1, 1)]:
            ev = lambda e: e if type(e) is int else int(e.expr.subs({s0.expr: v0, s1.expr: v1}))
            assert ev(pos) >= 0 and ev(neg) >= 0
            assert ev(pos) - ev(neg) == ev(n)
    assert signed_parts(-4) == (0, 4) and signed_parts(5) == (5, 0)


def test_signed_parts_of_a_term_of_unknown_sign_guards_the_sign():
    """``(s1 - s0) // 2 + 2`` (a conv/pool size): a floor of unknown sign is not split; the sign
    of the whole comes from the example sizes, guarded (a pooled size traced symbolically
    raised NotImplementedError before: tests/prims/test_decomp_linalg_nn.py)."""
    from ember.fx.experimental.symbolic_shapes import ShapeEnv, signed_parts
    env = ShapeEnv()
    s0, s1 = (env.create_symbol(v, f"x.size({i})") for i, v in enumerate((3, 8)))
    m = (s1 - s0) // 2 + 2
    assert signed_parts(m) == (m, 0)
    neg = (s0 - s1) // 2 - 1
    pos, n2 = signed_parts(neg)
    assert pos == 0 and int(n2.expr.subs({s0.expr: 3, s1.expr: 8})) == 4
