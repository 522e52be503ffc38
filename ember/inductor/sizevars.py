"""Sizes and index arithmetic as sympy expressions.

Every size, stride and index in the loop IR is a sympy expression over
*size symbols* (``s0, s1, ...``: positive integers, always >= 2 because sizes
0 and 1 are specialised) and *loop variables* (``x0..``/``r0..``: integers in
``[0, range)``). Plain Python ints are turned into ``sympy.Integer``.

Integer division and modulo are the two custom functions below rather than
``floor(a/b)`` and ``Mod``: sympy's versions print as floating-point C and
simplify badly. All index values are non-negative, so C's truncating ``/``
and ``%`` are exact for them.

Why the simplifier matters: a reshape of contiguous data is an index
rewrite ``j = (flat // stride) % size``; with the loop variables' ranges the
simplifier proves most of those divisions away (``(x0*s1 + x1) // s1 -> x0``),
which is what lets the rewritten loads stay unit-stride and vectorise.
"""
from __future__ import annotations

import functools
import math
from typing import Dict, Iterable, List, Sequence

import sympy
from sympy.printing.c import C99CodePrinter
from sympy.printing.str import StrPrinter


class FloorDiv(sympy.Function):
    """``a // b`` for non-negative integer ``a`` and positive integer ``b``."""
    nargs = (2,)
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0 or b == 0:       # (b = 0: a view of an empty dim, never evaluated)
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        if isinstance(a, FloorDiv):
            return FloorDiv(a.args[0], a.args[1] * b)
        return _exact_div(a, b)


class ModularIndexing(sympy.Function):
    """``(x // div) % mod`` for non-negative integer ``x``."""
    nargs = (3,)
    is_integer = True

    @classmethod
    def eval(cls, x, div, mod):
        if mod == 1 or x == 0 or mod == 0 or div == 0:
            # (a zero ``mod`` or ``div`` is a view of an empty dim: no index is ever computed)
            return sympy.Integer(0)
        if x.is_Integer and div.is_Integer and mod.is_Integer:
            return sympy.Integer((int(x) // int(div)) % int(mod))
        return None


def _exact_term_div(t, d):
    """``t / d`` for a monomial ``t`` when it is again a monomial with an integer
    coefficient, else None. Mul's own cancellation of powers does the work:
    no ``sympy.cancel`` (which dominated compile time)."""
    q = t / d
    c, rest = q.as_coeff_Mul()
    if not (c.is_Integer or (c.is_Rational and c.q == 1)):
        return None
    for f in sympy.Mul.make_args(rest):
        if f.is_Pow and not (f.exp.is_Integer and f.exp > 0):
            return None
        if not (f.is_Symbol or f.is_Pow or f.is_Integer or f.func in (FloorDiv, ModularIndexing)):
            return None
    return q


def _exact_div(a, d):
    """``a / d`` when every term of the sum ``a`` divides exactly, else None."""
    out = sympy.Integer(0)
    for t in sympy.Add.make_args(sympy.expand(a)):
        q = _exact_term_div(t, d)
        if q is None:
            return None
        out += q
    return out


def _is_poly_int(e) -> bool:
    """True when ``e`` is a polynomial with integer coefficients (no division left)."""
    e = sympy.expand(e)
    if e.is_Integer:
        return True
    if not e.is_polynomial() or not e.free_symbols:     # (a non-integer constant: Poly needs a symbol)
        return False
    try:
        return all(c.is_Integer for c in sympy.Poly(e, *sorted(e.free_symbols, key=str)).coeffs())
    except sympy.PolynomialError:
        return False


def from_shape_env(expr):
    """A caller's size expression (dynamo's ShapeEnv writes ``a // b`` as sympy's
    ``floor(a/b)`` and ``a % b`` as ``Mod``) in inductor's integer functions: printed as C,
    ``floor(s1/2)`` was ``floor((1.0/2.0)*s1)``, a double, and an index using it did not
    compile (a dynamic max_pool2d's backward ran eagerly)."""
    if not expr.has(sympy.floor, sympy.Mod):
        return expr

    def conv(e):
        if not e.args:
            return e
        args = [conv(a) for a in e.args]
        if isinstance(e, sympy.floor):
            num, den = sympy.fraction(sympy.together(args[0]))
            if den.is_Integer and int(den) > 0 and num.is_integer:
                if int(den) == 1:
                    return num
                return floordiv_expr(num, den)
            raise TypeError(f"inductor: size {e} is not a floor division of integers")
        if isinstance(e, sympy.Mod):
            return mod_expr(*args)
        return e.func(*args)
    return conv(expr)


def floordiv_expr(a, b):
    """A size's ``a // b``. FloorDiv is C's truncating division, exact only for a numerator
    known not to be negative and a positive divisor; any other stays sympy's ``floor``, which
    the printers write as a flooring division."""
    if a.is_nonnegative and b.is_positive:
        return FloorDiv(a, b)
    return sympy.floor(a / b)


def mod_expr(a, b):
    """A size's ``a % b``: likewise ModularIndexing is C's ``%``. ``shift % n`` of a roll by a
    negative shift is Python's modulo, ``Mod(-38, s1)`` = 10 for s1 = 16 where C's gives -6."""
    if a.is_nonnegative and b.is_positive:
        return ModularIndexing(a, sympy.Integer(1), b)
    return sympy.Mod(a, b)


def floor_division_parts(e):
    """``(num, den)`` when ``e`` is sympy's ``floor(num / den)`` of an integer numerator and a
    positive denominator (what a printer can write as a flooring integer division), else None."""
    num, den = sympy.fraction(sympy.together(e.args[0]))
    if num.is_integer and den.is_integer and den.is_positive:
        return num, den
    # a quotient whose denominator divides the numerator as polynomials: floor((s0*s1*s2 -
    # 2*s0*s1)/(s2 - 2)) is s0*s1 for every s2 != 2 (a pad's cropped rows, seen by the fuzzer)
    num, den = sympy.fraction(sympy.cancel(e.args[0]))
    if den == 1 and num.is_integer:
        return num, sympy.Integer(1)
    return None


def sympify(v):
    if isinstance(v, sympy.Basic):
        return v
    if isinstance(v, (bool,)):
        return sympy.Integer(int(v))
    if isinstance(v, int):
        return sympy.Integer(v)
    try:  # numpy integers, SymInt-like objects with a sympy node
        node = getattr(v, "node", None)
        if node is not None:
            expr = getattr(node, "expr", None)
            if expr is not None:
                return from_shape_env(expr)
        return sympy.Integer(int(v))
    except TypeError as e:  # pragma: no cover - defensive
        raise TypeError(f"inductor: cannot use {v!r} as a size") from e


def size_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


def loop_var(prefix: str, i: int) -> sympy.Symbol:
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def solve_for_unknown(expr, known):
    """``(u, a, rest)`` when ``expr`` is ``a*u + rest`` for exactly one symbol ``u`` outside
    ``known``, an integer ``a != 0`` and ``rest`` over ``known`` symbols only, else None: a size
    from which the caller's symbol ``u`` can be read back (``u = (n - rest) // a``; a
    convolution's output gradient is ``s0 - s3 + 1`` wide where its input was ``s0``)."""
    expr = sympy.expand(sympify(expr))
    unknown = expr.free_symbols - set(known)
    if len(unknown) != 1:
        return None
    (u,) = unknown
    a = expr.coeff(u, 1)
    rest = sympy.expand(expr - a * u)
    if not a.is_Integer or a == 0 or rest.has(u):
        return None
    return u, int(a), rest


def read_back_symbols(sizes, known, pairs=False):
    """``[(u, positions, a, rest)]``: the symbols of ``sizes`` (per input, its list of size
    expressions) that no dimension holds as itself, each read back from dimensions linear in it
    (:func:`solve_for_unknown`: ``u = (sum of the dims at positions - rest) // a``; a position is
    ``(input, dim)``), in an order where every ``rest`` uses symbols already known. ``known``:
    the symbols held as themselves (updated).

    One dimension is tried first; with ``pairs``, then the sum of two dimensions that each use
    an unknown symbol: a chunk's backward gets its two pieces' gradients, ``floor((s0+1)/2)``
    and ``s0 - floor((s0+1)/2)`` wide, neither linear in s0, their sum is s0."""
    out = []
    progress = True
    while progress:
        progress = False
        for i, size in enumerate(sizes):
            for d, n in enumerate(size):
                sol = solve_for_unknown(n, known) if not sympify(n).is_Symbol else None
                if sol is not None:
                    u, a, rest = sol
                    known.add(u)
                    out.append((u, ((i, d),), a, rest))
                    progress = True
        if progress or not pairs:
            continue
        open_dims = [((i, d), sympify(n)) for i, size in enumerate(sizes) for d, n in enumerate(size)
                     if sympify(n).free_symbols - set(known)]
        if len(open_dims) > _MAX_PAIR_DIMS:
            break
        for x, (pa, na) in enumerate(open_dims):
            for pb, nb in open_dims[x + 1:]:
                sol = solve_for_unknown(na + nb, known)
                if sol is not None:
                    u, a, rest = sol
                    known.add(u)
                    out.append((u, (pa, pb), a, rest))
                    progress = True
                    break
            if progress:
                break
    return out


_MAX_PAIR_DIMS = 24      # dims with unknown symbols tried in pairs (their count squared sympy sums)


def contiguous_strides(size: Sequence) -> List[sympy.Expr]:
    strides: List[sympy.Expr] = []
    acc = sympy.Integer(1)
    for s in reversed(list(size)):
        strides.append(acc)
        acc = acc * s
    return list(reversed(strides))


def product(xs: Iterable) -> sympy.Expr:
    out = sympy.Integer(1)
    for x in xs:
        out = out * x
    return out


@functools.lru_cache(maxsize=16384)
def _nonneg(e) -> bool:
    """Provably ``e >= 0`` given every size symbol >= 2 (sizes 0/1 are specialised):
    substitute ``s = 2 + t`` and check every coefficient of the polynomial in ``t``."""
    e = sympy.expand(e)
    if e.is_Number:
        return bool(e >= 0)
    syms = sorted(e.free_symbols, key=str)
    if any(not s.is_positive for s in syms):  # a loop variable or other: unknown
        return False
    ts = [sympy.Symbol(f"_t{i}", nonnegative=True) for i in range(len(syms))]
    e2 = sympy.expand(e.subs({s: 2 + t for s, t in zip(syms, ts)}, simultaneous=True))
    if e2.is_Number:
        return bool(e2 >= 0)
    try:
        return all(bool(c >= 0) for c in sympy.Poly(e2, *ts).coeffs())
    except sympy.PolynomialError:
        return False


class SizeVarAllocator:
    """Owns the size symbols of one graph: their example values (hints), the
    simplifier with loop-variable ranges, and the guards a compiled graph
    relies on."""

    def __init__(self) -> None:
        self.var_to_val: Dict[sympy.Symbol, int] = {}
        self.guards: List[sympy.Expr] = []  # each must be == 0 at run time

    def new_symbol(self, hint: int) -> sympy.Symbol:
        s = size_symbol(f"s{len(self.var_to_val)}")
        self.var_to_val[s] = int(hint)
        return s

    def size_hint(self, expr) -> int:
        expr = sympify(expr)
        return int(expr.subs(self.var_to_val)) if expr.free_symbols else int(expr)

    def simplify(self, expr):
        return sympy.expand(sympify(expr))

    def statically_known_equals(self, a, b) -> bool:
        return sympy.expand(sympify(a) - sympify(b)) == 0

    def guard_equals(self, a, b):
        """Equality the compiled code relies on: proved statically, else checked
        against the hints and recorded as a run-time guard."""
        a, b = sympify(a), sympify(b)
        if self.statically_known_equals(a, b):
            return a
        if self.size_hint(a) != self.size_hint(b):
            raise AssertionError(f"inductor: sizes {a} and {b} differ ({self.size_hint(a)} vs {self.size_hint(b)})")
        self.guards.append(sympy.expand(a - b))
        return a

    # -- index simplification ------------------------------------------------
    def simplify_with_ranges(self, expr, var_ranges: Dict[sympy.Symbol, sympy.Expr]):
        """Remove divisions and modulos that the ranges prove redundant (memoised:
        the same view index is rebuilt by every analysis and codegen pass)."""
        expr = sympify(expr)
        if not expr.has(FloorDiv, ModularIndexing):
            return sympy.expand(expr)
        key = (expr, tuple(sorted(((k, sympify(v)) for k, v in var_ranges.items() if k in expr.free_symbols),
                                  key=lambda kv: kv[0].name)))
        memo = self.__dict__.setdefault("_memo", {})
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = self._simplify_with_ranges(expr, var_ranges)
        return hit

    def _simplify_with_ranges(self, expr, var_ranges):
        expr = sympy.expand(expr)

        def visit(e):
            if not e.args:
                return e
            args = [visit(a) for a in e.args]
            if isinstance(e, FloorDiv):
                return _simplify_floordiv(sympy.expand(args[0]), args[1], var_ranges)
            if isinstance(e, ModularIndexing):
                return _simplify_modindex(sympy.expand(args[0]), args[1], args[2], var_ranges)
            return e.func(*args)

        return sympy.expand(visit(expr))


# -- index simplification over the loop ranges (integer sizes) --------------------
def _int(v):
    v = sympify(v)
    return int(v) if v.is_Integer else None


def index_bounds(e, ranges):
    """Inclusive integer bounds ``(lo, hi)`` of index expression ``e`` when every
    variable in it has an integer range in ``ranges`` (``var -> (lo, hi_exclusive)``),
    else None."""
    if e.is_Integer:
        return int(e), int(e)
    if e.is_Symbol:
        r = ranges.get(e)
        if r is None:
            return None
        lo, hi = _int(r[0]), _int(r[1])
        return None if lo is None or hi is None or hi <= lo else (lo, hi - 1)
    if e.is_Add:
        lo = hi = 0
        for a in e.args:
            b = index_bounds(a, ranges)
            if b is None:
                return None
            lo, hi = lo + b[0], hi + b[1]
        return lo, hi
    if e.is_Mul:
        lo = hi = 1
        for a in e.args:
            b = index_bounds(a, ranges)
            if b is None:
                return None
            cands = (lo * b[0], lo * b[1], hi * b[0], hi * b[1])
            lo, hi = min(cands), max(cands)
        return lo, hi
    if isinstance(e, FloorDiv):
        b, d = index_bounds(e.args[0], ranges), _int(e.args[1])
        if b is None or d is None or d <= 0 or b[0] < 0:
            return None
        return b[0] // d, b[1] // d
    if isinstance(e, ModularIndexing):
        m, d = _int(e.args[2]), _int(e.args[1])
        if m is None or d is None or d <= 0 or m <= 0:
            return None
        b = index_bounds(e.args[0], ranges)
        if b is not None and b[0] >= 0 and b[1] // d - b[0] // d < m and (b[0] // d) % m <= (b[1] // d) % m:
            return (b[0] // d) % m, (b[1] // d) % m
        return 0, m - 1
    if isinstance(e, (sympy.Max, sympy.Min)):
        bs = [index_bounds(a, ranges) for a in e.args]
        if any(b is None for b in bs):
            return None
        f = max if isinstance(e, sympy.Max) else min
        return f(b[0] for b in bs), f(b[1] for b in bs)
    return None


def _coeff(t):
    c, _ = t.as_coeff_Mul()
    return int(c) if c.is_Integer else None


def _partition(terms, g):
    """(sum of the terms whose integer coefficient ``g`` divides, divided by ``g``;
    the sum of the others)."""
    big, small = sympy.Integer(0), sympy.Integer(0)
    for t in terms:
        c = _coeff(t)
        if c is not None and c % g == 0:
            big += t / g
        else:
            small += t
    return big, small


def _reduce_by_gcd(a, d, ranges):
    """``(A, d')`` with ``a // d == A // d'``: terms divisible by some ``g | d`` are
    divided by it when the other terms stay in one ``[k g, (k + 1) g)`` (then they add
    exactly ``k`` to the divided sum and cannot carry into the quotient). The constant
    counts with the other terms: a cat's second piece reads ``(256*x0 + x1 - 256) // 32768``
    over ``x1`` in ``[256, 512)``, which is ``x0 // 128``. ``(a, d)`` when no such ``g``
    exists. (For ``a >= 0``, as the callers check, ``A >= 0`` too.)"""
    terms = sympy.Add.make_args(a)
    const = sum((t for t in terms if t.is_Integer), sympy.Integer(0))
    terms = [t for t in terms if not t.is_Integer]
    gs = sorted({math.gcd(c, d) for c in (_coeff(t) for t in terms) if c} - {1}, reverse=True)
    for g in gs:
        big, small = _partition(terms, g)
        if big == 0:
            continue
        b = index_bounds(small + const, ranges)
        if b is not None and b[0] // g == b[1] // g:
            return big + b[0] // g, d // g
    return a, d


def _floordiv_ranges(a, d, ranges):
    """``a // d`` simplified; None when the bounds needed are unknown."""
    b = index_bounds(a, ranges)
    if b is None or b[0] < 0:
        return None
    if b[1] < d:
        return sympy.Integer(0)
    a, d = _reduce_by_gcd(a, d, ranges)
    if d == 1:
        return a
    q, rest = _partition(sympy.Add.make_args(a), d)
    br = index_bounds(rest, ranges)
    if br is not None and br[0] >= 0:
        if br[0] // d == br[1] // d:
            return q + br[0] // d
        return q + FloorDiv(rest, d)
    return FloorDiv(a, d)


def _modindex_ranges(x, div, mod, ranges):
    """``(x // div) % mod`` simplified; None when the bounds needed are unknown."""
    b = index_bounds(x, ranges)
    if b is None or b[0] < 0:
        return None
    q = _floordiv_ranges(x, div, ranges) if div != 1 else x
    if q is None:
        return None
    if isinstance(q, FloorDiv) or (q.is_Add and any(isinstance(t, FloorDiv) for t in q.args)):
        # terms of the quotient divisible by ``mod`` drop out of the modulo
        _, rest = _partition(sympy.Add.make_args(q), mod)
        inner = q if rest == q else rest
    else:
        _, inner = _partition(sympy.Add.make_args(sympy.expand(q)), mod)
    bq = index_bounds(inner, ranges)
    if bq is not None and bq[0] >= 0 and bq[0] // mod == bq[1] // mod:
        # within one period (a cat's later piece: (x1 // 64) % 4 over x1 in [512, 768))
        return inner - (bq[0] // mod) * mod
    if isinstance(inner, FloorDiv):
        return ModularIndexing(inner.args[0], inner.args[1], mod)
    if bq is not None and bq[0] >= 0:
        return ModularIndexing(inner, 1, mod)
    return ModularIndexing(x, div, mod)


def _split_digit(t):
    """``(k, x, d, m)`` for a term ``k * ModularIndexing(x, d, m)`` (``m = None`` for
    ``k * FloorDiv(x, d)``, ``d = 1, m = None`` is not produced), else None."""
    k, rest = t.as_coeff_Mul()
    if not k.is_Integer:
        return None
    if isinstance(rest, ModularIndexing):
        return int(k), rest.args[0], rest.args[1], rest.args[2]
    if isinstance(rest, FloorDiv):
        return int(k), rest.args[0], rest.args[1], None
    # a symbolic coefficient (``256*s1*(x // (256*s1))``): size symbols times one digit
    digit, coef = None, k
    for f in sympy.Mul.make_args(rest):
        if isinstance(f, (ModularIndexing, FloorDiv)) and digit is None:
            digit = f
        elif f.free_symbols and all(s.is_positive for s in f.free_symbols) and f.is_integer:
            coef = coef * f
        else:
            return None
    if digit is None:
        return None
    if isinstance(digit, ModularIndexing):
        return coef, digit.args[0], digit.args[1], digit.args[2]
    return coef, digit.args[0], digit.args[1], None


def _join_terms(e):
    """Undo the digit split of a reshape: ``k*((x//d) % m) + k*m*(x//(d*m))`` is
    ``k*(x//d)`` and ``k*((x//d) % m) + k*m*((x//(d*m)) % M)`` is
    ``k*((x//d) % (m*M))``. A flatten of a split dim otherwise leaves a division
    and a modulo per element (``1024*(r//128)*128 + 1024*(r%128)`` is ``1024*r``)."""
    changed = True
    while changed and e.is_Add:
        changed = False
        terms = list(e.args)
        digits = [(i, _split_digit(t)) for i, t in enumerate(terms)]
        digits = [(i, dg) for i, dg in digits if dg is not None and dg[3] is not None]
        for i, (k, x, d, m) in digits:
            for j, t in enumerate(terms):
                if j == i:
                    continue
                o = _split_digit(t)
                if o is None or o[1] != x or sympy.expand(o[2] - d * m) != 0 or \
                        sympy.expand(o[0] - k * m) != 0:
                    continue
                if o[3] is None:
                    new = k * (FloorDiv(x, d) if d != 1 else x)
                else:
                    new = k * ModularIndexing(x, d, m * o[3])
                rest = [tt for n, tt in enumerate(terms) if n not in (i, j)]
                e = sympy.Add(*rest, new)
                changed = True
                break
            if changed:
                break
    return e


def simplify_index(expr, ranges, fallback_ranges=None):
    """Simplify an index expression over loop variables with integer ranges
    (``var -> (lo, hi_exclusive)``): divisions, modulos, ``Max``/``Min`` clamps and
    comparisons that the ranges decide are removed. This is what turns the index of a
    view of a view (a reshape of a permute of a cat ...) back into an affine
    ``sum(coef * var)`` that the C++ compiler vectorises -- an int64 ``/`` or ``%``
    per element costs ~20-40 cycles and blocks SIMD loads. Sub-expressions whose
    bounds are not integers (symbolic sizes) go through ``simplify_with_ranges``
    rules with ``fallback_ranges`` (``var -> size``)."""
    expr = sympify(expr)
    if not expr.has(FloorDiv, ModularIndexing, sympy.Max, sympy.Min) and not isinstance(
            expr, sympy.logic.boolalg.Boolean):
        return sympy.expand(expr)
    fr = fallback_ranges if fallback_ranges is not None else {}
    # memoised: the result depends on the expression and the ranges of its own symbols only, and
    # the same view index comes back from every pass (a cold nanoGPT training compile: 3049
    # calls, 134 distinct, 4.6 s)
    free = expr.free_symbols
    key = (expr, _ranges_key(ranges, free), _ranges_key(fr, free))
    hit = _SIMPLIFY_MEMO.get(key)
    if hit is None:
        if len(_SIMPLIFY_MEMO) >= _SIMPLIFY_MEMO_MAX:
            _SIMPLIFY_MEMO.clear()
        hit = _SIMPLIFY_MEMO[key] = _simplify_index(expr, ranges, fr)
    return hit


_SIMPLIFY_MEMO: Dict[tuple, sympy.Expr] = {}
_SIMPLIFY_MEMO_MAX = 50000


def _ranges_key(ranges, free) -> tuple:
    return tuple(sorted(((v, tuple(r) if isinstance(r, list) else r) for v, r in ranges.items() if v in free),
                        key=lambda kv: kv[0].name))


def _simplify_index(expr, ranges, fr):

    def visit(e):
        r = _visit(e)
        if isinstance(r, (FloorDiv, ModularIndexing, sympy.Max, sympy.Min)):
            b = index_bounds(r, ranges)
            if b is not None and b[0] == b[1]:
                return sympy.Integer(b[0])
        return r

    def _visit(e):
        if not e.args or e.is_Symbol:
            return e
        args = [visit(a) for a in e.args]
        if isinstance(e, FloorDiv):
            a, d = sympy.expand(args[0]), args[1]
            r = _floordiv_ranges(a, int(d), ranges) if d.is_Integer and int(d) > 0 else None
            return r if r is not None else _simplify_floordiv(a, d, fr)
        if isinstance(e, ModularIndexing):
            x, div, mod = sympy.expand(args[0]), args[1], args[2]
            r = None
            if div.is_Integer and mod.is_Integer and int(div) > 0 and int(mod) > 0:
                r = _modindex_ranges(x, int(div), int(mod), ranges)
            return r if r is not None else _simplify_modindex(x, div, mod, fr)
        if isinstance(e, (sympy.Max, sympy.Min)):
            bs = [index_bounds(a, ranges) for a in args]
            if all(b is not None for b in bs):
                is_max = isinstance(e, sympy.Max)
                for i, b in enumerate(bs):
                    # an argument that dominates every other over the whole range
                    if all((b[0] >= o[1]) if is_max else (b[1] <= o[0]) for j, o in enumerate(bs) if j != i):
                        return args[i]
            if all(a is b for a, b in zip(args, e.args)):
                # unchanged: sympy's Max/Min construction compares every pair of arguments
                # (_find_localzeros -> factor_terms): 7 of a cold nanoGPT compile's 16 CPU s
                return e
            # undecided: rebuilt unevaluated for the same reason (the ranges removed what they could)
            return e.func(*args, evaluate=False)
        if isinstance(e, sympy.core.relational.Relational):
            lhs, rhs = args
            b = index_bounds(sympy.expand(lhs - rhs), ranges)
            if b is not None:
                lo, hi = b
                op = e.rel_op
                decided = {"<": (hi < 0, lo >= 0), "<=": (hi <= 0, lo > 0), ">": (lo > 0, hi <= 0),
                           ">=": (lo >= 0, hi < 0), "==": (lo == hi == 0, lo > 0 or hi < 0),
                           "!=": (lo > 0 or hi < 0, lo == hi == 0)}.get(op)
                if decided is not None:
                    if decided[0]:
                        return sympy.true
                    if decided[1]:
                        return sympy.false
            return e.func(*args)
        if e.is_Add:
            summed = sympy.Add(*args)
            joined = _join_terms(summed)
            # a joined digit (``k*(x//d)``) may simplify further with the ranges
            return visit(joined) if joined != summed else joined
        return e.func(*args)

    out = visit(expr)
    return out if isinstance(out, sympy.logic.boolalg.Boolean) else sympy.expand(out)


def _split_terms(a, d):
    """Split sum ``a`` into (terms divisible by ``d``, remainder terms)."""
    exact, rest = sympy.Integer(0), sympy.Integer(0)
    for t in sympy.Add.make_args(sympy.expand(a)):
        if _exact_term_div(t, d) is not None:
            exact += t
        else:
            rest += t
    return exact, rest


def _max_value(e, var_ranges):
    """Upper bound of a sum of non-negative terms, each ``coef * var`` with a
    non-negative size-polynomial coefficient, or None when not of that form."""
    total = sympy.Integer(0)
    for t in sympy.Add.make_args(sympy.expand(e)):
        if t.is_Number:
            if t < 0:
                return None
            total += t
            continue
        vars_in = [v for v in t.free_symbols if v in var_ranges]
        if len(vars_in) != 1:
            if not vars_in and _nonneg(t):
                total += t
                continue
            return None
        v = vars_in[0]
        coef = t / v
        if coef.has(v) or not _nonneg(coef):
            return None
        total += coef * (var_ranges[v] - 1)
    return total


def _simplify_floordiv(a, d, var_ranges):
    exact, rest = _split_terms(a, d)
    if exact != 0:
        mx = _max_value(rest, var_ranges)
        if mx is not None and _nonneg(d - 1 - mx):
            return _exact_div(exact, d)
        if mx is not None:
            return _exact_div(exact, d) + FloorDiv(rest, d)
    mx = _max_value(a, var_ranges)
    if mx is not None and _nonneg(d - 1 - mx):
        return sympy.Integer(0)
    return FloorDiv(a, d)


def _simplify_modindex(x, div, mod, var_ranges):
    # terms divisible by div*mod contribute nothing
    exact, rest = _split_terms(x, div * mod)
    x = rest
    if _max_value(x, var_ranges) is None:
        return ModularIndexing(exact + rest, div, mod)
    q = _simplify_floordiv(x, div, var_ranges)
    if isinstance(q, FloorDiv):
        mx = _max_value(x, var_ranges)
        if mx is not None and _nonneg(mod * div - 1 - mx):
            return q
        return ModularIndexing(x, div, mod)
    mx = _max_value(q, var_ranges)
    if mx is not None and _nonneg(mod - 1 - mx):
        return q
    return ModularIndexing(x, div, mod)


# -- printers -------------------------------------------------------------------
class PythonRounding:
    """Printing of sympy's ``Mod`` and ``floor`` -- Python's rounding: the result of ``%`` has the
    divisor's sign, ``//`` rounds down -- for a target whose integer ``/``-like division and ``%``
    truncate (C++, Triton): a possibly negative operand needs more than the plain operators.
    A printer sets ``_int_div`` and ``_select`` (a conditional expression) and ``_floor_error``."""

    _int_div = "/"
    _floor_error = NotImplementedError

    def _select(self, cond, a, b):
        return f"({cond} ? {a} : {b})"

    def _print_Mod(self, e):
        a, b = (self._print(x) for x in e.args)
        if e.args[0].is_nonnegative and e.args[1].is_positive:
            return f"(({a}) % ({b}))"
        return f"(((({a}) % ({b})) + ({b})) % ({b}))"

    def _print_floor(self, e):
        parts = floor_division_parts(e)
        if parts is None:
            raise self._floor_error(f"inductor: floor of a non-integer quotient in an index: {e}")
        n, d = (self._print(x) for x in parts)
        q = f"(({n}) {self._int_div} ({d}))"
        if parts[0].is_nonnegative:
            return q
        return self._select(f"({n}) >= 0", q, f"-((-({n}) + ({d}) - 1) {self._int_div} ({d}))")


class CppIndexPrinter(PythonRounding, C99CodePrinter):
    """Index expressions as int64 C++: exact integer ``/`` and ``%``, integer powers."""

    def _print_FloorDiv(self, e):
        return f"(({self._print(e.args[0])}) / ({self._print(e.args[1])}))"

    def _print_ModularIndexing(self, e):
        x, div, mod = e.args
        inner = self._print(x) if div == 1 else f"(({self._print(x)}) / ({self._print(div)}))"
        return f"(({inner}) % ({self._print(mod)}))"

    def _print_Pow(self, e):
        base, exp = e.args
        if exp.is_Integer and exp > 0:
            return "(" + "*".join([f"({self._print(base)})"] * int(exp)) + ")"
        raise NotImplementedError(f"inductor: non-integer power in an index: {e}")

    def _print_Integer(self, e):
        v = int(e)
        if abs(v) >= 2 ** 31:
            return f"{v}LL"
        return str(v)

    def _print_Symbol(self, e):
        return e.name

    def _print_Max(self, e):
        args = [self._print(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = f"std::max<int64_t>({out}, {a})"
        return out

    def _print_Min(self, e):
        args = [self._print(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = f"std::min<int64_t>({out}, {a})"
        return out

    def _print_Relational(self, e):
        op = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[e.rel_op]
        return f"({self._print(e.lhs)} {op} {self._print(e.rhs)})"

    def _print_And(self, e):
        return "(" + " && ".join(self._print(a) for a in e.args) + ")"

    def _print_Or(self, e):
        return "(" + " || ".join(self._print(a) for a in e.args) + ")"

    def _print_BooleanTrue(self, e):
        return "true"

    def _print_BooleanFalse(self, e):
        return "false"

    def _print_Mul(self, e):
        c, rest = e.as_coeff_Mul()
        if c == -1:
            return f"(-{self._print(rest)})"
        return super()._print_Mul(e)

class PyIndexPrinter(StrPrinter):
    def _print_FloorDiv(self, e):
        return f"(({self._print(e.args[0])}) // ({self._print(e.args[1])}))"

    def _print_Mod(self, e):        # Python's ``%`` is sympy's Mod
        return f"(({self._print(e.args[0])}) % ({self._print(e.args[1])}))"

    def _print_floor(self, e):
        parts = floor_division_parts(e)
        if parts is None:
            raise NotImplementedError(f"inductor: floor of a non-integer quotient in a size: {e}")
        return f"(({self._print(parts[0])}) // ({self._print(parts[1])}))"

    def _print_ModularIndexing(self, e):
        x, div, mod = e.args
        return f"((({self._print(x)}) // ({self._print(div)})) % ({self._print(mod)}))"

    # (sympy's StrPrinter writes ``Min(6, s0)``: a NameError in the wrapper, which computes
    # the sizes of a dynamic graph's buffers from the size symbols, e.g. a slice's ``x[1:6:2]``)
    def _print_Max(self, e):
        return "max(" + ", ".join(self._print(a) for a in e.args) + ")"

    def _print_Min(self, e):
        return "min(" + ", ".join(self._print(a) for a in e.args) + ")"


_cpp = CppIndexPrinter()
_py = PyIndexPrinter()


@functools.lru_cache(maxsize=4096)
def _cexpr_cached(e):
    return _cpp.doprint(e)


def cexpr(e) -> str:
    return _cexpr_cached(sympify(e))


def pyexpr(e) -> str:
    return _py.doprint(sympify(e))
