"""Index arithmetic: the simplifier proves divisions away using loop ranges, and the
printers emit exact integer C++/Python."""
import sympy

from ember.inductor.sizevars import (FloorDiv, ModularIndexing, SizeVarAllocator, cexpr, loop_var, pyexpr,
                                     size_symbol)


def test_reshape_index_simplifies():
    sv = SizeVarAllocator()
    s1, s2 = size_symbol("s1"), size_symbol("s2")
    x0, x1, x2 = (loop_var("x", i) for i in range(3))
    ranges = {x0: size_symbol("s0"), x1: s1, x2: s2}
    flat = x0 * s1 * s2 + x1 * s2 + x2
    # [s0, s1*s2] -> [s0, s1, s2]: the old column index is x1*s2 + x2, with no division left
    assert sv.simplify_with_ranges(ModularIndexing(flat, 1, s1 * s2), ranges) == x1 * s2 + x2
    assert sv.simplify_with_ranges(FloorDiv(flat, s1 * s2), ranges) == x0
    # concrete sizes too
    ranges = {x0: 4, x1: 6}
    assert sv.simplify_with_ranges(ModularIndexing(6 * x0 + x1, 3, 2), ranges) == FloorDiv(x1, 3)   # x1 < 6: the mod 2 is redundant too
    assert sv.simplify_with_ranges(FloorDiv(6 * x0 + x1, 6), ranges) == x0


def test_unprovable_division_is_kept():
    sv = SizeVarAllocator()
    x0 = loop_var("x", 0)
    e = sv.simplify_with_ranges(FloorDiv(x0, 4), {x0: 10})
    assert isinstance(e, FloorDiv)
    assert cexpr(e) == "((x0) / (4))"
    assert pyexpr(e) == "((x0) // (4))"


def test_printers_are_integer_exact():
    s0 = size_symbol("s0")
    x0 = loop_var("x", 0)
    assert "pow" not in cexpr(s0 ** 2 * x0)
    assert cexpr(sympy.Integer(2 ** 40) * x0).count("LL") == 1
    assert cexpr(sympy.Max(x0 - 3, 0)) == "std::max<int64_t>(0, x0 - 3)"


def test_guards():
    sv = SizeVarAllocator()
    a, b = sv.new_symbol(5), sv.new_symbol(5)
    sv.guard_equals(a, b)
    assert sv.guards == [a - b]
    sv.guard_equals(a + 1, 1 + a)          # statically true: no guard
    assert len(sv.guards) == 1
