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


def test_simplify_index_over_ranges():
    from ember.inductor.sizevars import simplify_index
    x0, x1, r0 = loop_var("x", 0), loop_var("x", 1), loop_var("r", 0)
    R = {x0: (0, 1024), x1: (0, 768), r0: (0, 1024)}
    f = 768 * x0 + x1
    # a reshape's digits of a flat index collapse back (gcd reduction)
    assert simplify_index(FloorDiv(f, 98304), R) == FloorDiv(x0, 128)
    assert simplify_index(ModularIndexing(f, 768, 128), R) == ModularIndexing(x0, 1, 128)
    # split digits join: 1024*(r//128)*128 + 1024*(r%128) == 1024*r
    assert simplify_index(131072 * FloorDiv(r0, 128) + 1024 * ModularIndexing(r0, 1, 128), R) == 1024 * r0
    assert simplify_index(64 * ModularIndexing(r0, 64, 4) + ModularIndexing(r0, 1, 64), R) == \
        ModularIndexing(r0, 1, 256)
    # clamps and comparisons decided by a range
    R2 = {**R, x1: (512, 768)}
    assert simplify_index(sympy.Max(0, sympy.Min(255, x1 - 512)), R2) == x1 - 512
    assert simplify_index(sympy.Lt(x1, 512), R2) is sympy.false
    assert simplify_index(sympy.Lt(x1, 512), R) == sympy.Lt(x1, 512)
    # a modulo that the range does not decide stays
    assert simplify_index(ModularIndexing(x1, 1, 64), R) == ModularIndexing(x1, 1, 64)


def test_simplify_index_matches_python():
    """Random index expressions: the simplified form evaluates like the original."""
    import itertools
    import random
    from ember.inductor.sizevars import simplify_index
    x0, x1 = loop_var("x", 0), loop_var("x", 1)
    rnd = random.Random(0)
    for _ in range(60):
        n0, n1 = rnd.choice([3, 8, 12, 16]), rnd.choice([4, 6, 32])
        d, m = rnd.choice([1, 2, 4, 6, 8, 16]), rnd.choice([2, 3, 4, 8])
        f = rnd.choice([1, 2, 8]) * x0 * n1 + x1 + rnd.choice([0, 5])
        e = 7 * ModularIndexing(f, d, m) + 3 * FloorDiv(f, d * m) + sympy.Max(0, sympy.Min(5, x1 - 2))
        R = {x0: (0, n0), x1: (0, n1)}
        s = simplify_index(e, R)
        fs, fe = (eval(f"lambda x0, x1: {pyexpr(ex)}", {"Max": max, "Min": min}) for ex in (s, e))
        for a, b in itertools.product(range(n0), range(n1)):
            assert fs(a, b) == fe(a, b), (e, s, a, b)


def test_clamps_built_unevaluated_and_removed_where_the_ranges_decide():
    # cat's per-piece clamps: sympy's evaluating Max/Min constructor took half of an LSTM
    # training graph's cold compile, so they are built unevaluated and simplify_index decides
    from ember.inductor.lowering import _clamp
    from ember.inductor.sizevars import simplify_index
    x = sympy.Symbol("x0", integer=True)
    c = _clamp(x - 32, 0, 31)
    assert isinstance(c, sympy.Max) and isinstance(c.args[1], sympy.Min)   # as built, not rewritten
    assert simplify_index(c, {x: (32, 64)}) == x - 32            # inside the piece: no clamp
    assert simplify_index(_clamp(x, 0, 31), {x: (0, 32)}) == x
    kept = simplify_index(c, {x: (0, 64)})                        # undecided: still clamped
    assert kept.has(sympy.Max) and [kept.subs(x, v) for v in (0, 40, 63)] == [0, 8, 31]


def test_simplify_index_over_a_piece_of_a_range():
    """A split loop's later piece (a cat's second input, ``x1`` in ``[256, 512)``): a quotient
    whose small terms plus the constant stay in one ``[k g, (k+1) g)`` loses them, and a modulo
    whose argument stays in one period becomes a subtraction; both evaluate like the original
    at every point of random pieces."""
    import itertools
    import random
    from ember.inductor.sizevars import simplify_index
    x0, x1 = loop_var("x", 0), loop_var("x", 1)
    R = {x0: (0, 1024), x1: (256, 512)}
    assert simplify_index(FloorDiv(256 * x0 + x1 - 256, 32768), R) == FloorDiv(x0, 128)
    assert simplify_index(ModularIndexing(x1, 1, 256), R) == x1 - 256
    R3 = {x0: (0, 1024), x1: (512, 768)}
    assert simplify_index(8192 * ModularIndexing(FloorDiv(x1, 64), 1, 4), R3) == 8192 * FloorDiv(x1, 64) - 65536
    rnd = random.Random(1)
    for _ in range(80):
        g, q = rnd.choice([4, 8, 16]), rnd.choice([2, 4, 8])
        n0, lo = rnd.choice([3, 5, 8]), rnd.choice([0, g, 2 * g, 3 * g])
        hi = lo + rnd.choice([g, g // 2, g + 3])
        c = rnd.choice([0, -lo, -lo + 1, 3])
        f = g * x0 + x1 + c
        e = 5 * FloorDiv(f, g * q) + 3 * ModularIndexing(FloorDiv(x1, q), 1, rnd.choice([2, 4])) \
            + ModularIndexing(x1, 1, g)
        rng = {x0: (0, n0), x1: (lo, hi)}
        if min(g * a + b + c for a in range(n0) for b in range(lo, hi)) < 0:
            continue            # index expressions are never negative
        s = simplify_index(e, rng)
        fs, fe = (eval(f"lambda x0, x1: {pyexpr(ex)}", {"Max": max, "Min": min}) for ex in (s, e))
        for a, b in itertools.product(range(n0), range(lo, hi)):
            assert fs(a, b) == fe(a, b), (e, rng, s, a, b)


def test_symbols_read_back_from_sizes_linear_in_them():
    """A symbol no input dimension holds as itself is read back from one linear in it, once
    the other symbols of that size are known; products, divisions and two unknowns are not."""
    from ember.inductor.sizevars import read_back_symbols, solve_for_unknown
    s0, s1, s2, s3 = (sympy.Symbol(f"s{i}", integer=True, positive=True) for i in range(4))
    assert solve_for_unknown(s0 - s3 + 1, {s3}) == (s0, 1, 1 - s3)
    assert solve_for_unknown(2 * s0 + 4, set()) == (s0, 2, 4)
    assert solve_for_unknown(s0 * s1, {s1}) is None          # coefficient not an integer
    assert solve_for_unknown(s0 - s3, set()) is None         # two unknowns
    assert solve_for_unknown(FloorDiv(s0, 2), set()) is None
    # s2 is only known once s1 is: the order follows
    got = read_back_symbols([[s1 + s2 - 1, 4], [2 * s1 + 3]], {s0})
    assert [(u, pos) for u, pos, _, _ in got] == [(s1, ((1, 0),)), (s2, ((0, 0),))]
    for u, ((i, d),), a, rest in got:
        vals = {s0: 5, s1: 7, s2: 9}
        size = [[s1 + s2 - 1, 4], [2 * s1 + 3]][i][d].subs(vals)
        assert (int(size) - int(rest.subs(vals))) // a == vals[u]


def test_symbol_read_back_from_a_sum_of_two_dimensions():
    from ember.inductor.sizevars import read_back_symbols
    s0, s1 = sympy.symbols("s0 s1", positive=True, integer=True)
    half = sympy.floor(s0 / 2 + sympy.Rational(1, 2))
    sizes = [[half, s1], [s0 - half, s1]]
    assert read_back_symbols(sizes, {s1}) == []                       # no single dim is linear in s0
    ((u, pos, a, rest),) = read_back_symbols(sizes, {s1}, pairs=True)
    assert (u, pos, a, rest) == (s0, ((0, 0), (1, 0)), 1, 0)
    for n in range(2, 40):                                             # the reading, brute force
        dims = [int(half.subs(s0, n)), int((s0 - half).subs(s0, n))]
        assert (sum(dims) - rest) // a == n
