"""Triton code generation from the scheduler's fused groups.

The same loop IR and the same :class:`~ember.inductor.scheduler.FusedGroup`
s that feed the C++ backend feed this one; only the interpretation of a group
differs (``inner_fn`` bodies run under :class:`TritonOps`, which returns
Triton expressions instead of C++).

A group with outer sizes ``P`` becomes one kernel whose programs each own
``XBLOCK`` consecutive outer iterations (``P`` flattened, decomposed back into
``x0, x1, ...`` with ``//`` and ``%``):

* **pointwise** -- no stage has an inner extent: a 1-D block over ``xnumel``;
* **persistent** -- some stage has an inner extent (a reduction's
  ``reduction_ranges``, or a pointwise node narrower than its size) and every
  such extent is a static size <= :data:`PERSISTENT_RNUMEL_MAX`: 2-D tiles
  ``[XBLOCK, RBLOCKk]`` holding whole rows, one power-of-two ``RBLOCKk`` per
  distinct extent; stage results stay in registers, so softmax reads its input
  once;
* **looped** -- otherwise: every stage with an inner extent loops over it in
  ``RBLOCK`` chunks (accumulators of ``[XBLOCK, RBLOCK]``, one final
  ``tl.reduce``); an inner pointwise stage that a later stage reads goes
  through memory, read back after ``tl.debug_barrier()`` (the scheduler only
  fuses a read at the exact element the same program wrote).

float16/bfloat16 are loaded into float32, computed in float32 and rounded when
stored or converted (as the C++ backend does); transcendental functions call
libdevice (``_lib``), IEEE ``div_rn``/``sqrt_rn`` for ``/`` and ``sqrt``;
integer division, remainders and shifts carry the prims' semantics (no
undefined behaviour for oversized shifts; a zero divisor fails a device assertion, which
raises under the interpreter and in debug builds as the eager prim raises, and otherwise
gives 0). Philox random
numbers reproduce ``ember.prims.philox_rand``/``philox_randn`` bit for bit.

The generated module text is backend-neutral Python: its ``_jit`` (kernels)
and ``_helper`` (device functions) decorators and ``_lib`` namespace are
injected when it is loaded, as
``triton.runtime.interpreter.InterpretedFunction`` + numpy stand-ins
(:mod:`.triton_interp_lib`) under the interpreter, or ``JITFunction`` +
libdevice for compilation (PTX, cubin) -- so one source is both checked on the
CPU and compiled for the GPU.

Scatters (scatter, scatter_add, index_put) are separate launches (see
:class:`ScatterKernels`); so are scans (cumsum/cumprod, :class:`ScanKernel`:
persistent ``tl.cumsum``/``tl.cumprod`` over whole rows, or a loop over chunks
carrying the running value). A reduction with few outputs and long rows is
split into a partials kernel and a second pass (:func:`split_factor` documents
the heuristic, :class:`SplitReduction` the kernels). Not lowered
(``TritonCodegenError`` naming the op, so the caller can fall back or keep the
graph on the CPU): scatter-adds of dtypes without atomic add (bool, int8, int16,
uint8). Externs (matmul, convolution, prim fallbacks) are the wrapper's.
"""
from __future__ import annotations

import itertools
import math
from typing import Dict, List, Optional, Tuple

import sympy
from sympy.printing.str import StrPrinter

from ... import types as _t
from .. import ir
from ..ir import index_vars
from ..scheduler import ExternGroup, FusedGroup
from ..sizevars import PythonRounding, contiguous_strides, product, sympify
from ..virtualized import set_ops_handler

# rows (inner extents) up to this many elements are held whole in one block
PERSISTENT_RNUMEL_MAX = 1024
# elements of one [XBLOCK, RBLOCK] tile at most (register pressure)
TILE_MAX = 4096


class TritonCodegenError(NotImplementedError):
    """A construct the Triton backend cannot generate; the message names it."""


TL_DTYPE = {
    _t.bool_: "tl.int1", _t.uint8: "tl.uint8", _t.int8: "tl.int8", _t.int16: "tl.int16",
    _t.int32: "tl.int32", _t.int64: "tl.int64", _t.float16: "tl.float16", _t.bfloat16: "tl.bfloat16",
    _t.float32: "tl.float32", _t.float64: "tl.float64",
}
# dtype of the values a kernel computes with (half precision computes in float32)
COMPUTE = dict(TL_DTYPE)
COMPUTE[_t.float16] = "tl.float32"
COMPUTE[_t.bfloat16] = "tl.float32"
# pointer element types of the signature given to triton.compile
SIG = {
    _t.bool_: "i1", _t.uint8: "u8", _t.int8: "i8", _t.int16: "i16", _t.int32: "i32", _t.int64: "i64",
    _t.float16: "fp16", _t.bfloat16: "bf16", _t.float32: "fp32", _t.float64: "fp64",
}
INT_BITS = {_t.uint8: 8, _t.int8: 8, _t.int16: 16, _t.int32: 32, _t.int64: 64}
UNSIGNED = {_t.uint8, _t.bool_}

# unary float functions that go to libdevice (precise; tl.exp & co. are approximations)
LIBDEVICE_UNARY = {
    "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2", "log10": "log10",
    "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos",
    "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh",
    "atanh": "atanh", "erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "lgamma": "lgamma",
    "trunc": "trunc", "round": "rint",
}

# module prelude: helpers every kernel may call (jit functions; `_jit` and `_lib` are injected)
PRELUDE = '''
import triton
import triton.language as tl

_INF = tl.constexpr(float("inf"))
_NAN = tl.constexpr(float("nan"))


@_helper
def _philox10(c0, c1, c2, c3, k0, k1):
    # Philox 4x32-10 (the stream of ember.prims.random)
    for _ in tl.static_range(10):
        _c0 = c0
        _c2 = c2
        c0 = tl.umulhi(tl.full([], 0xCD9E8D57, tl.uint32), _c2) ^ c1 ^ k0
        c2 = tl.umulhi(tl.full([], 0xD2511F53, tl.uint32), _c0) ^ c3 ^ k1
        c1 = _c2 * tl.full([], 0xCD9E8D57, tl.uint32)
        c3 = _c0 * tl.full([], 0xD2511F53, tl.uint32)
        k0 = k0 + tl.full([], 0x9E3779B9, tl.uint32)
        k1 = k1 + tl.full([], 0xBB67AE85, tl.uint32)
    return c0, c1, c2, c3


@_helper
def _philox_words(seed, offset, block):
    s = seed.to(tl.uint64, bitcast=True)
    b = offset.to(tl.uint64, bitcast=True) + block.to(tl.uint64, bitcast=True)
    c0 = (b & 0xFFFFFFFF).to(tl.uint32)
    c1 = (b >> 32).to(tl.uint32)
    z = tl.zeros_like(c0)
    k0 = (s & 0xFFFFFFFF).to(tl.uint32)
    k1 = (s >> 32).to(tl.uint32)
    return _philox10(c0, c1, z, z, k0, k1)


@_helper
def _philox_uniform(seed, offset, i, BITS: tl.constexpr):
    w0, w1, w2, w3 = _philox_words(seed, offset, i >> 2)
    lane = i & 3
    u = tl.where(lane == 0, w0, tl.where(lane == 1, w1, tl.where(lane == 2, w2, w3)))
    if BITS >= 32:
        r = u.to(tl.float64) * 2.3283064365386963e-10
    else:
        r = (u >> (32 - BITS)).to(tl.float32) * (2.0 ** -BITS)
    return r


@_helper
def _philox_normal(seed, offset, i):
    w0, w1, w2, w3 = _philox_words(seed, offset, i >> 1)
    hi = (i & 1) != 0
    u1 = tl.where(hi, w2, w0).to(tl.float64)
    u2 = tl.where(hi, w3, w1).to(tl.float64)
    r = tl.sqrt(-2.0 * _lib.log((u1 + 1.0) * 2.3283064365386963e-10))
    return r * _lib.cos((2.0 * 3.141592653589793 * 2.3283064365386963e-10) * u2)


@_helper
def _round_bf16(x):
    # float32 -> the nearest bfloat16 (ties to even), still as float32; bit exact on
    # the GPU and under the interpreter (whose float32 -> bfloat16 cast truncates)
    u = x.to(tl.uint32, bitcast=True)
    r = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    r = tl.where((u & 0x7FFFFFFF) > 0x7F800000, u | 0x00400000, r)  # NaN stays a (quiet) NaN
    return r.to(tl.float32, bitcast=True)


@_helper
def _div_ieee(a, b):
    # correctly rounded division (fp32 `/` is an approximation on the GPU)
    if a.dtype == tl.float32:
        r = tl.div_rn(a, b)
    else:
        r = a / b
    return r


@_helper
def _sqrt_ieee(a):
    if a.dtype == tl.float32:
        r = tl.sqrt_rn(a)
    else:
        r = tl.sqrt(a)
    return r


@_helper
def _floordiv_fp(a, b):
    # PyTorch's div_floor: floor(a / b) through fmod, so the result is exact
    mod = _lib.fmod(a, b)
    div = _div_ieee(a - mod, b)
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1, fl)
    q = _div_ieee(a, b)
    res = tl.where(div != 0, fl, _lib.copysign(tl.zeros_like(q), q))
    return tl.where(b == 0, q, res)


@_helper
def _remainder_fp(a, b):
    m = _lib.fmod(a, b)
    fix = (m != 0) & ((b < 0) != (m < 0))
    return tl.where(fix, m + b, m)      # a zero keeps fmod's sign (the dividend's), as PyTorch


@_helper
def _pow_int(base, exp, BITS: tl.constexpr):
    result = tl.full(base.shape, 1, base.dtype) + tl.zeros_like(exp).to(base.dtype)
    b = base + tl.zeros_like(exp).to(base.dtype)
    e = exp + tl.zeros_like(base).to(exp.dtype)
    for _ in tl.static_range(BITS):
        result = tl.where((e & 1) != 0, result * b, result)
        b = b * b
        e = e >> 1
    return tl.where(exp < 0, tl.zeros_like(result), result)


@_helper
def _argmax_combine(av, ai, bv, bi):
    # first occurrence; NaN counts as the largest value
    a_nan = av != av
    b_nan = bv != bv
    take_b = (bv > av) | (b_nan & ~a_nan) | (((bv == av) | (a_nan & b_nan)) & (bi < ai))
    return tl.where(take_b, bv, av), tl.where(take_b, bi, ai)


@_helper
def _argmin_combine(av, ai, bv, bi):
    a_nan = av != av
    b_nan = bv != bv
    take_b = (bv < av) | (b_nan & ~a_nan) | (((bv == av) | (a_nan & b_nan)) & (bi < ai))
    return tl.where(take_b, bv, av), tl.where(take_b, bi, ai)


@_helper
def _prod_combine(a, b):
    return a * b
'''


# ----------------------------------------------------------------------- index printing
class TritonIndexPrinter(PythonRounding, StrPrinter):
    """Index expressions as Triton integer arithmetic (all values non-negative, so
    Triton's truncating ``//`` and ``%`` are exact; sympy's ``Mod``/``floor`` of a possibly
    negative size: ``PythonRounding``)."""

    _int_div = "//"
    _floor_error = TritonCodegenError

    def _select(self, cond, a, b):
        return f"tl.where({cond}, {a}, {b})"

    def _print_FloorDiv(self, e):
        return f"(({self._print(e.args[0])}) // ({self._print(e.args[1])}))"

    def _print_ModularIndexing(self, e):
        x, div, mod = e.args
        inner = self._print(x) if div == 1 else f"(({self._print(x)}) // ({self._print(div)}))"
        return f"(({inner}) % ({self._print(mod)}))"

    def _print_Pow(self, e):
        base, exp = e.args
        if exp.is_Integer and exp > 0:
            return "(" + "*".join([f"({self._print(base)})"] * int(exp)) + ")"
        raise TritonCodegenError(f"triton: non-integer power in an index: {e}")

    def _print_Integer(self, e):
        return str(int(e))

    def _print_Symbol(self, e):
        return e.name

    def _print_Max(self, e):
        args = [self._print(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = f"tl.maximum({out}, {a})"
        return out

    def _print_Min(self, e):
        args = [self._print(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = f"tl.minimum({out}, {a})"
        return out

    def _print_Relational(self, e):
        return f"(({self._print(e.lhs)}) {e.rel_op} ({self._print(e.rhs)}))"

    def _print_And(self, e):
        return "(" + " & ".join(self._print(a) for a in e.args) + ")"

    def _print_Or(self, e):
        return "(" + " | ".join(self._print(a) for a in e.args) + ")"

    def _print_Not(self, e):
        return f"(~{self._print(e.args[0])})"

    def _print_BooleanTrue(self, e):
        return "True"

    def _print_BooleanFalse(self, e):
        return "False"

    def _print_Mul(self, e):
        c, rest = e.as_coeff_Mul()
        if c == -1:
            return f"(-{self._print(rest)})"
        return "(" + " * ".join(self._print(a) for a in e.args) + ")"

    def _print_Add(self, e, order=None):
        return "(" + " + ".join(self._print(a) for a in e.args) + ")"


_printer = TritonIndexPrinter()


def texpr(e) -> str:
    return _printer.doprint(sympify(e))


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _literal(value, dtype) -> str:
    if dtype is _t.bool_:
        return "1" if value else "0"
    if dtype.category == 1:
        return str(int(value))
    v = float(value)
    if math.isnan(v):
        return "_NAN"
    if math.isinf(v):
        return "_INF" if v > 0 else "-_INF"
    return repr(v)


# ----------------------------------------------------------------------- the ops handler
class TV:
    """A value in a kernel: a Python variable name and its ember dtype (the Triton
    value is in ``COMPUTE[dtype]``)."""
    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name = name
        self.dtype = dtype

    def __str__(self):
        return self.name


class TritonOps:
    """Writes one stage's body as Triton statements into ``lines``."""

    def __init__(self, kernel: "TritonKernel", lines: List[str], indent: str, mask: str, rkey, cse=None):
        self.k = kernel
        self.lines = lines
        self.indent = indent
        self.mask = mask
        self.rkey = rkey
        # values of earlier stages over the same (straight-line) range are reused
        self.cse: Dict[Tuple[str, object], TV] = {} if cse is None else cse

    def _emit(self, expr: str, dtype) -> TV:
        key = (expr, dtype)
        v = self.cse.get(key)
        if v is not None:
            return v
        name = self.k.new_tmp()
        self.lines.append(f"{self.indent}{name} = {expr}")
        v = TV(name, dtype)
        self.cse[key] = v
        return v

    # -- memory ------------------------------------------------------------------
    def load(self, name, index):
        reg = self.k.registers.get(name)
        if reg is not None:
            val, rkey = reg
            if rkey is None or rkey == self.rkey:
                return val
            if name not in self.k.writes:
                # a register of another row extent: only a broadcastable one (size-1 rows)
                if self.k.rnumels[rkey] == 1:
                    return val
                raise TritonCodegenError(f"triton: {name} is read over another row extent than it was "
                                         "computed over (no memory copy planned)")
        dtype = self.k.buffer_dtype(name)
        self.k.note_read(name)
        if name in self.k.stored and name not in self.k.barrier_done:
            self.lines.append(f"{self.indent}tl.debug_barrier()")
            self.k.barrier_done.add(name)
        index = sympify(index)
        loopvars = {s.name[0] for s in index.free_symbols if s.name[0] in "xr" and s.name[1:].isdigit()}
        indirect = {s for s in index.free_symbols if s.name.startswith("tmp")}
        if not loopvars and not indirect:
            expr = f"tl.load({name} + {texpr(index)})"
        else:
            # an address that does not depend on r is masked by rows only (a smaller load)
            mask = self.mask if indirect or "r" in loopvars else "xmask"
            expr = f"tl.load({name} + ({texpr(index)}), {mask}, other=0)"
        if dtype in (_t.float16, _t.bfloat16):
            expr += ".to(tl.float32)"
        return self._emit(expr, dtype)

    def constant(self, value, dtype):
        return self._emit(f"tl.full([], {_literal(value, dtype)}, {COMPUTE[dtype]})", dtype)

    def index_expr(self, expr, dtype):
        expr = sympify(expr)
        if dtype is _t.bool_:
            if expr in (sympy.true, sympy.false) or expr.is_Number:
                return self.constant(bool(expr), dtype)
            return self._emit(texpr(expr), dtype)
        if expr.is_Number:
            return self.constant(expr, dtype)
        return self._emit(f"({texpr(expr)}).to({COMPUTE[dtype]})", dtype)

    def indirect_indexing(self, x, size, wrap_negative=False):
        """A data-dependent index: negative values wrapped where the prim does; an
        out-of-range value fails a device assertion (an error under the interpreter
        and in debug builds, as the eager prim raises IndexError) and otherwise
        reads element 0 -- the GPU kernel must never touch stray memory."""
        v = self._emit(f"{x}.to(tl.int64)", _t.int64)
        s = texpr(size)
        if wrap_negative:
            v = self._emit(f"tl.where({v} < 0, {v} + ({s}), {v})", _t.int64)
        # raises under the interpreter and in debug builds (like the eager IndexError);
        # compiled without debug it is dropped and the clamp below keeps memory safe
        self.lines.append(f'{self.indent}tl.device_assert(({v} >= 0) & ({v} < ({s})), '
                          f'"index out of bounds")')
        v = self._emit(f"tl.where(({v} >= 0) & ({v} < ({s})), {v}, 0)", _t.int64)
        return sympy.Symbol(v.name, integer=True)

    def philox(self, seed, offset, index, dtype, normal):
        if normal:
            v = self._emit(f"_philox_normal({seed}, {offset}, {index})", _t.float64)
            return self.to_dtype(v, dtype)
        bits = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 32}[dtype.name]
        v = self._emit(f"_philox_uniform({seed}, {offset}, {index}, {bits})",
                       _t.float64 if bits >= 32 else _t.float32)
        return self.to_dtype(v, dtype)

    def to_dtype(self, x, dtype):
        src = x.dtype
        if dtype is src:
            return x
        if dtype is _t.bool_:
            return self._emit(f"({x} != 0)", dtype)
        if dtype in (_t.float16, _t.bfloat16):
            # round to the half type, keep computing in float32; like the C++ backend and
            # PyTorch (c10::Half is built from a float), everything goes through float32
            via = "" if COMPUTE[src] == "tl.float32" else ".to(tl.float32)"
            if dtype is _t.bfloat16:
                return self._emit(f"_round_bf16({x}{via})", dtype)
            return self._emit(f"{x}{via}.to({TL_DTYPE[dtype]}).to(tl.float32)", dtype)
        if src in (_t.float16, _t.bfloat16) and COMPUTE[dtype] == "tl.float32":
            return TV(x.name, dtype)
        return self._emit(f"{x}.to({COMPUTE[dtype]})", dtype)

    def where(self, c, a, b):
        return self._emit(f"tl.where({c}, {a}, {b})", a.dtype)

    # -- unary -------------------------------------------------------------------
    def _unary(self, op, x):
        dt = x.dtype
        fp = dt.category == 2
        if op in LIBDEVICE_UNARY and fp:
            return self._emit(f"_lib.{LIBDEVICE_UNARY[op]}({x})", dt)
        if op == "abs":
            return x if dt in UNSIGNED else self._emit(f"tl.abs({x})", dt)
        if op == "neg":
            return self._emit(f"-{x}", dt)
        if op == "sign":
            if dt is _t.bool_:
                return x
            if fp:
                return self._emit(f"tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, 0.0)).to({COMPUTE[dt]})", dt)
            return self._emit(f"(({x} > 0).to({COMPUTE[dt]}) - ({x} < 0).to({COMPUTE[dt]}))", dt)
        if op == "sqrt":
            return self._emit(f"_sqrt_ieee({x})", dt)
        if op == "rsqrt":
            return self._emit(f"_div_ieee(tl.full([], 1, {COMPUTE[dt]}), _sqrt_ieee({x}))", dt)
        if op == "reciprocal":
            return self._emit(f"_div_ieee(tl.full([], 1, {COMPUTE[dt]}), {x})", dt)
        if op in ("floor", "ceil"):
            return self._emit(f"tl.{op}({x})", dt) if fp else x
        if op in ("trunc", "round"):
            return x
        if op == "bitwise_not":
            return self._emit(f"({x} == 0)" if dt is _t.bool_ else f"~{x}", dt)
        if op == "isnan":
            return self._emit(f"({x} != {x})", _t.bool_)
        if op == "isinf":
            return self._emit(f"(tl.abs({x}) == _INF)" if fp else f"({x} != {x})", _t.bool_)
        if op == "isfinite":
            return self._emit(f"(tl.abs({x}) < _INF)" if fp else f"({x} == {x})", _t.bool_)
        if op == "signbit":
            if fp:
                return self._emit(f"(_lib.signbit({x}) != 0)", _t.bool_)
            return self._emit(f"({x} != {x})" if dt in UNSIGNED else f"({x} < 0)", _t.bool_)
        if op == "logical_not":
            return self._emit(f"({x} == 0)", _t.bool_)
        raise TritonCodegenError(f"triton: prims.{op} of {dt.name}")

    # -- binary ------------------------------------------------------------------
    def _int_div_guard(self, a, b, dt, expr_fn, zero_result, neg1_result):
        """``expr_fn(a, b')`` with ``b'`` never 0 (nor -1 for signed types: INT_MIN / -1
        overflows), the special cases patched in afterwards."""
        ct = COMPUTE[dt]
        signed = dt not in UNSIGNED
        # a zero divisor raises under the interpreter and in debug builds, as the eager prim
        # does (RuntimeError "ZeroDivisionError"); compiled without debug the lane gives 0.
        # Masked-off lanes (loaded as 0) are exempt.
        ok = f"({b} != 0)" if not self.mask else f"({b} != 0) | ~({self.mask})"
        self.lines.append(f'{self.indent}tl.device_assert({ok}, "ZeroDivisionError")')
        bad = f"({b} == 0) | ({b} == -1)" if signed else f"({b} == 0)"
        safe = self._emit(f"tl.where({bad}, tl.full([], 1, {ct}), {b})", dt)
        core = self._emit(expr_fn(a, safe), dt)
        out = core
        if signed:
            out = self._emit(f"tl.where({b} == -1, {neg1_result}, {out})", dt)
        return self._emit(f"tl.where({b} == 0, {zero_result}, {out})", dt)

    def _binary(self, op, a, b):
        dt = a.dtype
        fp = dt.category == 2
        ct = COMPUTE[dt]
        isbool = dt is _t.bool_
        zero = f"tl.full([], 0, {ct})"
        if op == "add":
            return self._emit(f"({a} | {b})" if isbool else f"({a} + {b})", dt)
        if op == "mul":
            return self._emit(f"({a} & {b})" if isbool else f"({a} * {b})", dt)
        if op == "sub":
            return self._emit(f"({a} ^ {b})" if isbool else f"({a} - {b})", dt)
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
            sym = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}[op]
            return self._emit(f"({a} {sym} {b})", dt)
        if op == "div":
            if fp:
                return self._emit(f"_div_ieee({a}, {b})", dt)
            return self._int_div_guard(a, b, dt, lambda x, y: f"{x} // {y}", zero, f"-{a}")
        if op == "floor_divide":
            if fp:
                return self._emit(f"_floordiv_fp({a}, {b})", dt)

            def fd(x, y):
                return f"({x} // {y}) - ((({x} % {y}) != 0) & ((({x} % {y}) < 0) != ({y} < 0))).to({ct})"
            return self._int_div_guard(a, b, dt, fd, zero, f"-{a}")
        if op == "remainder":
            if fp:
                return self._emit(f"_remainder_fp({a}, {b})", dt)

            def rem(x, y):
                r = f"({x} % {y})"
                return f"tl.where(({r} != 0) & (({r} < 0) != ({y} < 0)), {r} + {y}, {r})"
            return self._int_div_guard(a, b, dt, rem, zero, zero)
        if op == "fmod":
            if fp:
                return self._emit(f"_lib.fmod({a}, {b})", dt)
            return self._int_div_guard(a, b, dt, lambda x, y: f"{x} % {y}", zero, zero)
        if op == "pow":
            if fp:
                return self._emit(f"_lib.pow({a}, {b})", dt)
            if isbool:
                return self._emit(f"({a} | ({b} == 0))", dt)
            return self._emit(f"_pow_int({a}, {b}, {INT_BITS[dt]})", dt)
        if op == "atan2":
            return self._emit(f"_lib.atan2({a}, {b})", dt)
        if op in ("maximum", "minimum"):
            if isbool:
                return self._emit(f"({a} | {b})" if op == "maximum" else f"({a} & {b})", dt)
            cmp = ">" if op == "maximum" else "<"
            if fp:
                return self._emit(f"tl.where({a} != {a}, {a}, tl.where({b} != {b}, {b}, "
                                  f"tl.where({a} {cmp} {b}, {a}, {b})))", dt)
            return self._emit(f"tl.where({a} {cmp} {b}, {a}, {b})", dt)
        if op == "copysign":
            return self._emit(f"_lib.copysign({a}, {b})", dt)
        if op in ("shift_left", "shift_right"):
            if isbool:
                raise TritonCodegenError(f"triton: prims.{op} of bool")
            bits = INT_BITS[dt]
            oob = f"(({b} < 0) | ({b} >= {bits}))"
            amt = self._emit(f"tl.where({oob}, tl.full([], 0, {ct}), {b})", dt)
            if op == "shift_left":
                return self._emit(f"tl.where({oob}, {zero}, {a} << {amt})", dt)
            fill = zero if dt in UNSIGNED else f"tl.where({a} < 0, tl.full([], -1, {ct}), {zero})"
            return self._emit(f"tl.where({oob}, {fill}, {a} >> {amt})", dt)
        cmp = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
        if op in cmp:
            return self._emit(f"({a} {cmp[op]} {b})", _t.bool_)
        if op == "logical_and":
            return self._emit(f"(({a} != 0) & ({b} != 0))", _t.bool_)
        if op == "logical_or":
            return self._emit(f"(({a} != 0) | ({b} != 0))", _t.bool_)
        if op == "logical_xor":
            return self._emit(f"(({a} != 0) ^ ({b} != 0))", _t.bool_)
        raise TritonCodegenError(f"triton: prims.{op}")

    def __getattr__(self, name):
        if name in ir.UNARY_OPS or name in ir.UNARY_BOOL_OPS:
            return lambda x: self._unary(name, x)
        if name in ir.BINARY_OPS or name in ir.BINARY_BOOL_OPS:
            return lambda a, b: self._binary(name, a, b)
        raise TritonCodegenError(f"triton: ops.{name} has no Triton lowering")


# ----------------------------------------------------------------------- kernels
class KernelSpec:
    """What the wrapper and the compiler need to know about one generated kernel."""

    def __init__(self, name, kind, params, param_dtypes, size_syms, xnumel, rblocks, looped, configs,
                 aligned):
        self.name = name
        self.kind = kind                  # "pointwise" | "persistent" | "looped"
        self.params = params              # buffer names, in argument order
        self.param_dtypes = param_dtypes  # ember dtypes of the buffers
        self.size_syms = size_syms        # size symbols passed after the buffers
        self.xnumel = xnumel              # sympy expression over the size symbols
        self.rblocks = rblocks            # persistent: {"RBLOCK0": 64, ...} (fixed constexprs)
        self.looped = looped
        self.configs = configs            # list of dicts: constexprs + num_warps
        self.aligned = aligned            # params known 16-byte aligned (wrapper-allocated)
        self.local = set()                # results kept in registers (no memory)
        self.scratch = []                 # (name, numel, dtype, fill): wrapper-allocated temporaries
        self.source = ""                  # the kernel's own source text
        # False: a launch reads what it writes (scatter-add's atomics accumulate into the
        # output), so it must run exactly once per call -- the launcher does not autotune it
        self.idempotent = True

    def signature(self):
        sig = {p: "*" + SIG[d] for p, d in zip(self.params, self.param_dtypes)}
        for s in self.size_syms:
            sig[s.name] = "i64"
        sig["xnumel"] = "i64"
        for c in self.constexpr_names():
            sig[c] = "constexpr"
        return sig

    def constexpr_names(self):
        names = ["XBLOCK"] + list(self.rblocks)   # the kernel's argument order
        if self.looped:
            names.append("RBLOCK")
        return names

    def __repr__(self):
        return f"KernelSpec({self.name}, {self.kind}, params={self.params})"


class TritonKernel:
    """One fused group as one ``@_jit`` Triton function."""

    def __init__(self, name, group: FusedGroup, graph, size_syms, outside_reads):
        self.name = name
        self.group = group
        self.graph = graph
        self.size_syms = size_syms
        self.outside = set(outside_reads)
        self._tmp = itertools.count()
        self.reads = set()
        self.registers: Dict[str, tuple] = {}
        self.stored = set()
        self.barrier_done = set()
        self.writes: List[str] = []
        self.local: set = set()
        self._current_extent = None
        self._cse: Dict[object, dict] = {}
        # buffers that only the kernels know (split-reduction partials): name -> dtype
        self.extra_buffers: Dict[str, object] = {}
        # split-reduction first pass: (splits, chunk, {reduction: partials}) -- see SplitReduction
        self.split = None

    def stage_cse(self, rkey):
        """The CSE table a stage over ``rkey`` may share: straight-line code (x-only
        stages anywhere, every stage of a persistent kernel) shares one per extent;
        a looped stage's body is a loop of its own and starts empty."""
        if rkey is None or self.persistent:
            return self._cse.setdefault(rkey, {})
        return None

    def new_tmp(self):
        return f"tmp{next(self._tmp)}"

    def buffer_dtype(self, name):
        dt = self.extra_buffers.get(name)
        if dt is not None:
            return dt
        return self.graph.buffers_by_name[name].get_dtype()

    def note_read(self, name):
        self.reads.add(name)

    def _hint(self, e):
        return self.graph.sizevars.size_hint(e)

    # -- structure ---------------------------------------------------------------
    def _plan(self):
        g = self.group
        p = g.p
        for n in g.nodes:
            if n.is_scan:
                raise TritonCodegenError(f"triton: cumsum/cumprod (scan over dim {n.data.dim}) of {n.name}")
            if n.is_scatter:  # pragma: no cover - generate_kernels sends scatters to ScatterKernels
                raise TritonCodegenError(f"triton: scatter/index_put ({n.name}) inside a fused kernel")
        self.P = list(g.outer_sizes)
        # distinct inner extents, in order of first use
        self.extents: List[list] = []
        self.node_rkey: Dict[str, Optional[int]] = {}
        for n in g.nodes:
            q = list(n.inner(p))
            if not q:
                self.node_rkey[n.name] = None
                continue
            for k, e in enumerate(self.extents):
                if _same(e, q):
                    self.node_rkey[n.name] = k
                    break
            else:
                self.extents.append(q)
                self.node_rkey[n.name] = len(self.extents) - 1
        self.tiled = bool(self.extents)
        numels = [sympy.expand(product(e)) for e in self.extents]
        self.persistent = self.tiled and not self.split and \
            all(m.is_Integer and int(m) <= PERSISTENT_RNUMEL_MAX for m in numels)
        self.rnumels = numels
        # which results need memory: read by another kernel/extern/output, or (looped)
        # an inner pointwise stage read back by a later stage of this kernel
        later_reads = {}
        for i, n in enumerate(g.nodes):
            for nm in n.read_names:
                later_reads.setdefault(nm, i)
        if self.split:
            # pass 1 of a split reduction: the partials, and row-wise pointwise stages that
            # something outside or a later stage reads (each element belongs to one chunk)
            self.writes = list(self.split[2].values())
            self.local = set()
            for n in g.nodes:
                if not n.is_reduction and (n.name in self.outside or n.name in later_reads):
                    self.writes.append(n.name)
                else:
                    self.local.add(n.name)
            return
        for n in g.nodes:
            need = n.name in self.outside
            if not need and not self.persistent and self.node_rkey[n.name] is not None and not n.is_reduction \
                    and n.name in later_reads:
                need = True
            if need:
                self.writes.append(n.name)
            else:
                self.local.add(n.name)

    def generate(self) -> Tuple[str, KernelSpec]:
        self._plan()
        g = self.group
        p = g.p
        xs = index_vars("x", p)
        body: List[str] = []
        ind = "    "
        xnumel = sympy.expand(product(self.P)) if self.P else sympy.Integer(1)
        base = "xindex"
        if self.split:
            xnumel = xnumel * self.split[0]
        if self.tiled:
            body.append(f"{ind}xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
        else:
            body.append(f"{ind}xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)")
        if self._needs_int64(xnumel):
            body.append(f"{ind}xindex = xindex.to(tl.int64)")
        body.append(f"{ind}xmask = xindex < xnumel")
        if self.split:
            # program row = (outer index, split): split k reduces elements [k*chunk, (k+1)*chunk)
            body.append(f"{ind}xsplit = xindex % {self.split[0]}")
            body.append(f"{ind}xouter = xindex // {self.split[0]}")
            base = "xouter"
        for x, s, n in zip(xs, contiguous_strides(self.P), self.P):
            e = base if s == 1 else f"({base} // ({texpr(s)}))"
            body.append(f"{ind}{x} = {e} % ({texpr(n)})" if x != xs[0] else f"{ind}{x} = {e}")
        for k, (ext, numel) in enumerate(zip(self.extents, self.rnumels)):
            body.append(f"{ind}rnumel{k} = {texpr(numel)}")
        for n in g.nodes:
            body.append(f"{ind}# {n!r}")
            if n.is_reduction:
                self._reduction_stage(n, p, xs, body, ind)
            else:
                self._pointwise_stage(n, p, xs, body, ind)
        return self._finish(body, xnumel)

    def _needs_int64(self, xnumel):
        biggest = self._hint(xnumel) * max([self._hint(m) for m in self.rnumels] + [1])
        for nm in self.group.names() | self.group.read_names():
            buf = self.graph.buffers_by_name.get(nm)
            if buf is not None:
                biggest = max(biggest, self._hint(product(buf.get_size())))
        return biggest >= 2 ** 31 - 1 or bool(self.size_syms)

    def _rvars(self, k, ind, lines, base):
        """Decompose the flat ``rindex`` of extent ``k`` into r0, r1, ...; returns the vars."""
        ext = self.extents[k]
        rs = index_vars("r", len(ext))
        for r, s, n in zip(rs, contiguous_strides(ext), ext):
            e = base if s == 1 else f"({base} // ({texpr(s)}))"
            lines.append(f"{ind}{r} = {e} % ({texpr(n)})" if r != rs[0] else f"{ind}{r} = {e}")
        return rs

    def _rblock_name(self, k):
        return f"RBLOCK{k}" if self.persistent else "RBLOCK"

    def _open_r(self, k, ind, lines):
        """Start an r-range of extent ``k``: persistent = the whole row, looped = a loop.
        Returns (indent inside, mask expression, r vars)."""
        rb = self._rblock_name(k)
        if self.persistent:
            rs = index_vars("r", len(self.extents[k]))
            if self._current_extent != k:  # (re)bind rindex and r0, r1, ... for extent k
                lines.append(f"{ind}rindex = tl.arange(0, {rb})[None, :]")
                lines.append(f"{ind}rmask = rindex < rnumel{k}")
                self._rvars(k, ind, lines, "rindex")
                self._current_extent = k
            return ind, "xmask & rmask", rs
        ind2 = ind + "    "
        if self.split:
            chunk = self.split[1]
            lines.append(f"{ind}for roffset in range(0, {chunk}, RBLOCK):")
            lines.append(f"{ind2}rlocal = roffset + tl.arange(0, RBLOCK)[None, :]")
            lines.append(f"{ind2}rindex = xsplit * {chunk} + rlocal")
            lines.append(f"{ind2}rmask = (rindex < rnumel{k}) & (rlocal < {chunk})")
        else:
            lines.append(f"{ind}for roffset in range(0, rnumel{k}, RBLOCK):")
            lines.append(f"{ind2}rindex = roffset + tl.arange(0, RBLOCK)[None, :]")
            lines.append(f"{ind2}rmask = rindex < rnumel{k}")
        rs = self._rvars(k, ind2, lines, "rindex")
        return ind2, "xmask & rmask", rs

    @staticmethod
    def _bcast(index, mask):
        """Offsets that do not vary over the whole block (a reduction to one value, an
        inner loop over size-1 dims) are broadcast to the mask's shape: a store needs a
        pointer block at least as large as its value."""
        names = {s.name[0] for s in sympify(index).free_symbols if s.name[1:].isdigit()}
        if "r" in mask and "r" not in names:
            return " + tl.zeros_like(xindex + rindex)"
        if "x" not in names and "r" not in names:
            return " + tl.zeros_like(xindex)"
        return ""

    def _store(self, name, index, val: TV, mask, ind, lines):
        dt = self.buffer_dtype(name)
        v = val.name
        if dt is _t.bfloat16:
            v = f"_round_bf16({v}).to(tl.bfloat16)"
        elif dt is _t.float16:
            v = f"{v}.to(tl.float16)"
        elif COMPUTE[val.dtype] != COMPUTE[dt]:
            v = f"{v}.to({TL_DTYPE[dt]})"
        lines.append(f"{ind}tl.store({name} + ({texpr(index)}){self._bcast(index, mask)}, {v}, {mask})")
        self.stored.add(name)

    def _pointwise_stage(self, n, p, xs, lines, ind):
        k = self.node_rkey[n.name]
        if k is None:
            h = TritonOps(self, lines, ind, "xmask", None, self.stage_cse(None))
            with set_ops_handler(h):
                val = n.data.inner_fn(xs)
            val = _as_tv(h, val, n.data.get_dtype())
            if n.name in self.writes:
                self._store(n.name, n.write_index(p), val, "xmask", ind, lines)
            self.registers[n.name] = (val, None)
            return
        inner, mask, rs = self._open_r(k, ind, lines)
        h = TritonOps(self, lines, inner, mask, k, self.stage_cse(k))
        with set_ops_handler(h):
            val = n.data.inner_fn(xs + rs)
        val = _as_tv(h, val, n.data.get_dtype())
        if n.name in self.writes:
            self._store(n.name, n.write_index(p), val, mask, inner, lines)
        if self.persistent:
            self.registers[n.name] = (val, k)

    def _reduction_stage(self, n, p, xs, lines, ind):
        red = n.data
        rtype = red.reduction_type
        src = red.src_dtype
        k = self.node_rkey[n.name]
        ct = COMPUTE[src]
        fp = src.category == 2
        shape = "[XBLOCK, RBLOCK]"

        def body(inner, mask, rs):
            h = TritonOps(self, lines, inner, mask, k, self.stage_cse(k))
            with set_ops_handler(h):
                v = red.inner_fn(xs, rs)
            return h, _as_tv(h, v, src)

        if rtype in ("sum", "prod", "any", "all") or (rtype in ("amax", "amin") and src is _t.bool_):
            if src is _t.bool_:
                rtype = {"sum": "any", "prod": "all", "amax": "any", "amin": "all"}.get(rtype, rtype)
            if rtype in ("any", "all"):
                acc_t, ident = "tl.int32", ("0" if rtype == "any" else "1")
                fin = "tl.max" if rtype == "any" else "tl.min"
                prep = lambda v: f"({v} != 0).to(tl.int32)"  # noqa: E731
            else:
                acc_t = ct
                ident = "0" if rtype == "sum" else "1"
                fin = "tl.sum" if rtype == "sum" else None
                prep = lambda v: f"{v}"  # noqa: E731
            if self.persistent:
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                t = self.new_tmp()
                lines.append(f"{inner}{t} = tl.where({mask}, {prep(v)}, tl.full([], {ident}, {acc_t}))")
                res = self._final_reduce(fin, t, lines, inner)
            else:
                acc = self.new_tmp()
                lines.append(f"{ind}{acc} = tl.full({shape}, {ident}, {acc_t})")
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                op = {"sum": "+", "prod": "*"}.get(rtype)
                if op:
                    lines.append(f"{inner}{acc} = tl.where({mask}, {acc} {op} {prep(v)}, {acc})")
                elif rtype == "any":
                    lines.append(f"{inner}{acc} = {acc} | tl.where({mask}, {prep(v)}, 0)")
                else:
                    lines.append(f"{inner}{acc} = {acc} & tl.where({mask}, {prep(v)}, 1)")
                res = self._final_reduce(fin, acc, lines, ind)
            out_dt = red.get_dtype()
            if rtype in ("any", "all"):
                res = f"({res} != 0)"
            elif COMPUTE[out_dt] != acc_t:
                res = f"{res}.to({COMPUTE[out_dt]})"
            self._finish_reduction(n, p, res, out_dt, lines, ind)
            return
        if rtype in ("amax", "amin"):
            cmp = ">" if rtype == "amax" else "<"
            if fp:
                ident = "-_INF" if rtype == "amax" else "_INF"
            else:
                info = _int_limits(src)
                ident = str(info[0] if rtype == "amax" else info[1])
            fin = "tl.max" if rtype == "amax" else "tl.min"
            if self.persistent:
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                t = self.new_tmp()
                lines.append(f"{inner}{t} = tl.where({mask}, {v}, tl.full([], {ident}, {ct}))")
                res = self._final_reduce(fin, t, lines, inner)
                if fp:
                    nn = self.new_tmp()
                    lines.append(f"{inner}{nn} = tl.where({mask} & ({v} != {v}), 1, 0)")
                    res = f"tl.where({self._final_reduce('tl.max', nn, lines, inner)} != 0, _NAN, {res})"
            else:
                acc = self.new_tmp()
                nn = self.new_tmp()
                lines.append(f"{ind}{acc} = tl.full({shape}, {ident}, {ct})")
                if fp:
                    lines.append(f"{ind}{nn} = tl.zeros({shape}, tl.int32)")
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                lines.append(f"{inner}{acc} = tl.where({mask} & ({v} {cmp} {acc}), {v}, {acc})")
                if fp:
                    lines.append(f"{inner}{nn} = {nn} | tl.where({mask} & ({v} != {v}), 1, 0)")
                res = self._final_reduce(fin, acc, lines, ind)
                if fp:
                    res = f"tl.where({self._final_reduce('tl.max', nn, lines, ind)} != 0, _NAN, {res})"
            self._finish_reduction(n, p, res, red.get_dtype(), lines, ind)
            return
        if rtype in ("argmax", "argmin"):
            combine = f"_{rtype}_combine"
            if fp:
                ident = "-_INF" if rtype == "argmax" else "_INF"
            else:
                info = _int_limits(src)
                ident = str(info[0] if rtype == "argmax" else info[1])
            big = str(2 ** 62)
            if self.persistent:
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                tv, ti = self.new_tmp(), self.new_tmp()
                lines.append(f"{inner}{tv} = tl.where({mask}, {v}, tl.full([], {ident}, {ct}))")
                lines.append(f"{inner}{ti} = tl.where({mask}, rindex.to(tl.int64), {big})")
                rv, ri = self.new_tmp(), self.new_tmp()
                lines.append(f"{inner}{rv}, {ri} = tl.reduce(({tv}, {ti}), 1, {combine})")
            else:
                av, ai = self.new_tmp(), self.new_tmp()
                lines.append(f"{ind}{av} = tl.full({shape}, {ident}, {ct})")
                lines.append(f"{ind}{ai} = tl.full({shape}, {big}, tl.int64)")
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                nv, ni = self.new_tmp(), self.new_tmp()
                lines.append(f"{inner}{nv}, {ni} = {combine}({av}, {ai}, {v} + tl.zeros({shape}, {ct}), "
                             f"rindex.to(tl.int64) + tl.zeros({shape}, tl.int64))")
                lines.append(f"{inner}{av} = tl.where({mask}, {nv}, {av})")
                lines.append(f"{inner}{ai} = tl.where({mask}, {ni}, {ai})")
                rv, ri = self.new_tmp(), self.new_tmp()
                lines.append(f"{ind}{rv}, {ri} = tl.reduce(({av}, {ai}), 1, {combine})")
            if self.split:
                # partials: the chunk's extreme value and its (global) index, merged in pass 2
                xi = sympy.Symbol("xindex", integer=True)
                self._store(self.split[2][n.name], xi, TV(f"{rv}[:, None]", src), "xmask", ind, lines)
                self._store(self.split[2][n.name + ":idx"], xi, TV(f"{ri}[:, None]", _t.int64), "xmask", ind, lines)
                return
            self._finish_reduction(n, p, f"{ri}[:, None]", _t.int64, lines, ind)
            return
        if rtype in ("argmax_merge", "argmin_merge"):
            self._arg_merge(n, p, xs, lines, ind)
            return
        if rtype == "var_merge":
            self._var_merge(n, p, xs, lines, ind)
            return
        if rtype == "var":
            corr = float(red.correction)
            nexpr = texpr(product(red.reduction_ranges))
            if self.split:
                # this chunk's element count: the last chunks may be short or empty
                cnt = self.new_tmp()
                chunk = self.split[1]
                lines.append(f"{ind}{cnt} = tl.minimum(tl.maximum(({nexpr}) - xsplit * {chunk}, 0), {chunk})"
                             f".to({ct})")
                nexpr = f"tl.maximum({cnt}, 1.0)"
            mean = self.new_tmp()
            if self.persistent:
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                s, d = self.new_tmp(), self.new_tmp()
                lines.append(f"{inner}{s} = tl.sum(tl.where({mask}, {v}, 0.0).to({ct}), 1)[:, None]")
                lines.append(f"{inner}{mean} = {s} / ({nexpr})")
                lines.append(f"{inner}{d} = tl.where({mask}, {v} - {mean}, 0.0).to({ct})")
                m2 = self.new_tmp()
                lines.append(f"{inner}{m2} = tl.sum({d} * {d}, 1)[:, None]")
            else:
                acc = self.new_tmp()
                lines.append(f"{ind}{acc} = tl.zeros({shape}, {ct})")
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                lines.append(f"{inner}{acc} = tl.where({mask}, {acc} + {v}, {acc})")
                lines.append(f"{ind}{mean} = tl.sum({acc}, 1)[:, None] / ({nexpr})")
                acc2 = self.new_tmp()
                lines.append(f"{ind}{acc2} = tl.zeros({shape}, {ct})")
                inner, mask, rs = self._open_r(k, ind, lines)
                h, v = body(inner, mask, rs)
                d = self.new_tmp()
                lines.append(f"{inner}{d} = {v} - {mean}")
                lines.append(f"{inner}{acc2} = tl.where({mask}, {acc2} + {d} * {d}, {acc2})")
                m2 = self.new_tmp()
                lines.append(f"{ind}{m2} = tl.sum({acc2}, 1)[:, None]")
            if self.split:
                # partials: the chunk's mean and sum of squared deviations (merged in pass 2)
                xi = sympy.Symbol("xindex", integer=True)
                self._store(self.split[2][n.name], xi, TV(mean, src), "xmask", ind, lines)
                self._store(self.split[2][n.name + ":m2"], xi, TV(m2, src), "xmask", ind, lines)
                self.registers[n.name] = (TV(mean, src), None)
                return
            denom = f"tl.maximum(({nexpr}) - {corr!r}, 0.0)"
            res = f"({m2} / {denom}).to({ct})"
            self._finish_reduction(n, p, res, red.get_dtype(), lines, ind)
            return
        raise TritonCodegenError(f"triton: reduction {rtype}")

    def _arg_merge(self, n, p, xs, lines, ind):
        """Pass 2 of a split argmax/argmin: the same combine (first occurrence, NaN the
        extreme) over the chunks' (value, global index) pairs."""
        d = n.data
        k = self.node_rkey[n.name]
        if not self.persistent:
            raise TritonCodegenError("triton: a split argmax's second pass must hold its partials in one block")
        ct = COMPUTE[d.src_dtype]
        rtype = d.reduction_type[:-len("_merge")]
        if d.src_dtype.category == 2:
            ident = "-_INF" if rtype == "argmax" else "_INF"
        else:
            lo, hi = _int_limits(d.src_dtype)
            ident = str(lo if rtype == "argmax" else hi)
        inner, mask, rs = self._open_r(k, ind, lines)
        h = TritonOps(self, lines, inner, mask, k, self.stage_cse(k))
        flat = sum((x * st for x, st in zip(xs, contiguous_strides(self.P))), sympy.Integer(0))
        idx = flat * d.splits + rs[0]
        v = h.load(d.value_partials, idx)
        i = h.load(d.index_partials, idx)
        tv, ti, rv, ri = (self.new_tmp() for _ in range(4))
        lines.append(f"{inner}{tv} = tl.where({mask}, {v}, tl.full([], {ident}, {ct}))")
        lines.append(f"{inner}{ti} = tl.where({mask}, {i}, {2 ** 62})")
        lines.append(f"{inner}{rv}, {ri} = tl.reduce(({tv}, {ti}), 1, _{rtype}_combine)")
        self._finish_reduction(n, p, f"{ri}[:, None]", _t.int64, lines, ind)

    def _var_merge(self, n, p, xs, lines, ind):
        """Pass 2 of a split var: Chan et al.'s merge of the chunks' (count, mean, M2):
        mean = sum(n_k mean_k) / N, M2 = sum(M2_k + n_k (mean_k - mean)^2), N the row
        length (static); the counts follow from the chunk layout."""
        d = n.data
        k = self.node_rkey[n.name]
        if not self.persistent:
            raise TritonCodegenError("triton: a split var's second pass must hold its partials in one block")
        ct = COMPUTE[d.src_dtype]
        inner, mask, rs = self._open_r(k, ind, lines)
        h = TritonOps(self, lines, inner, mask, k, self.stage_cse(k))
        flat = sum((x * st for x, st in zip(xs, contiguous_strides(self.P))), sympy.Integer(0))
        idx = flat * d.splits + rs[0]
        mk = h.load(d.mean_partials, idx)
        m2k = h.load(d.m2_partials, idx)
        cnt, mean, dev, m2 = (self.new_tmp() for _ in range(4))
        lines.append(f"{inner}{cnt} = tl.where({mask}, tl.minimum(tl.maximum({d.rnumel} - {rs[0]} * {d.chunk}, 0), "
                     f"{d.chunk}), 0).to({ct})")
        lines.append(f"{inner}{mean} = tl.sum({cnt} * tl.where({mask}, {mk}, 0.0).to({ct}), 1)[:, None] / "
                     f"{float(d.rnumel)!r}")
        lines.append(f"{inner}{dev} = tl.where({mask}, {mk} - {mean}, 0.0).to({ct})")
        lines.append(f"{inner}{m2} = tl.sum(tl.where({mask}, {m2k}, 0.0).to({ct}) + {cnt} * {dev} * {dev}, 1)"
                     "[:, None]")
        denom = f"tl.maximum({float(d.rnumel)!r} - {float(d.correction)!r}, 0.0)"
        self._finish_reduction(n, p, f"({m2} / {denom}).to({ct})", d.get_dtype(), lines, ind)

    def _final_reduce(self, fin, t, lines, ind):
        out = self.new_tmp()
        if fin is None:
            lines.append(f"{ind}{out} = tl.reduce({t}, 1, _prod_combine)[:, None]")
        else:
            lines.append(f"{ind}{out} = {fin}({t}, 1)[:, None]")
        return out

    def _finish_reduction(self, n, p, res_expr, out_dt, lines, ind):
        """A reduction's result: a register of shape [XBLOCK, 1] for later stages,
        stored when anything outside this kernel reads it."""
        name = self.new_tmp()
        lines.append(f"{ind}{name} = {res_expr}")
        val = TV(name, out_dt)
        self.registers[n.name] = (val, None)
        if self.split:
            # first pass of a split reduction: one partial per (outer index, split)
            self._store(self.split[2][n.name], sympy.Symbol("xindex", integer=True), val, "xmask", ind, lines)
            return
        if n.name in self.writes:
            self._store(n.name, n.write_index(p), val, "xmask", ind, lines)

    # -- signature -----------------------------------------------------------------
    def _finish(self, body, xnumel) -> Tuple[str, KernelSpec]:
        reads = sorted(self.reads - set(self.writes) - self.local, key=_natural)
        params = reads + list(self.writes)
        dtypes = [self.buffer_dtype(p) for p in params]
        used_syms = [s for s in self.size_syms]
        args = params + [s.name for s in used_syms] + ["xnumel", "XBLOCK: tl.constexpr"]
        rblocks = {}
        if self.persistent:
            for k, m in enumerate(self.rnumels):
                rblocks[f"RBLOCK{k}"] = next_pow2(int(m))
                args.append(f"RBLOCK{k}: tl.constexpr")
        looped = self.tiled and not self.persistent
        if looped:
            args.append("RBLOCK: tl.constexpr")
        head = f"@_jit\ndef {self.name}({', '.join(args)}):"
        src = head + "\n" + "\n".join(body) + "\n"
        kind = "looped" if looped else ("persistent" if self.persistent else "pointwise")
        aligned = [p for p in params if p in self.extra_buffers or p in self.graph.buffers_by_name and
                   not isinstance(self.graph.buffers_by_name[p], ir.InputBuffer)]
        spec = KernelSpec(self.name, kind, params, dtypes, used_syms, xnumel, rblocks, looped,
                          _configs(kind, self._hint(xnumel), rblocks), aligned)
        spec.source = src
        return src, spec


def _configs(kind, xnumel_hint, rblocks):
    """The small autotuning space of a kernel; the first entry is the default (and the
    one the interpreter runs)."""
    if kind == "pointwise":
        cands = [(1024, 4), (512, 4), (256, 4), (128, 4), (2048, 8)]
        out = [dict(XBLOCK=min(x, next_pow2(max(xnumel_hint, 1))), num_warps=w) for x, w in cands]
    elif kind == "persistent":
        rb = max(rblocks.values())
        out = []
        for x in (max(1, min(64, TILE_MAX // rb)), 8, 1):
            x = min(x, next_pow2(max(xnumel_hint, 1)))
            w = min(16, max(1, next_pow2(x * rb // 256)))
            out.append(dict(XBLOCK=x, num_warps=w, **rblocks))
    else:
        out = []
        for x, r, w in ((1, 2048, 8), (8, 512, 8), (64, 64, 4), (1, 1024, 4)):
            x = min(x, next_pow2(max(xnumel_hint, 1)))
            out.append(dict(XBLOCK=x, RBLOCK=r, num_warps=w))
    uniq, seen = [], set()
    for c in out:
        key = tuple(sorted(c.items()))
        if key not in seen:
            seen.add(key)
            uniq.append(c)
    return uniq


def _int_limits(dt):
    import numpy as np
    if dt is _t.bool_:
        return 0, 1
    info = np.iinfo(dt.np)
    return int(info.min), int(info.max)


def _as_tv(h: TritonOps, v, dtype) -> TV:
    if isinstance(v, TV):
        return v
    if isinstance(v, sympy.Basic):  # a bare indirect index symbol
        return h._emit(f"{v.name}", dtype)
    raise TritonCodegenError(f"triton: unexpected body value {v!r}")


def _same(a, b):
    return len(a) == len(b) and all(sympy.expand(x - y) == 0 for x, y in zip(a, b))


def _natural(name):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


# ----------------------------------------------------------------------- a whole graph
def outside_reads(graph, groups) -> Dict[int, set]:
    """Per group: the buffers of that group that something else reads (another
    kernel, an extern, a graph output)."""
    outs = {o.name for o in graph.outputs if isinstance(o, ir.Buffer)}
    outs |= {o[1].name for o in graph.outputs if isinstance(o, tuple) and o[0] == "view"}
    res = {}
    for gi, g in enumerate(groups):
        other = set(outs)
        for gj, h in enumerate(groups):
            if gj != gi:
                other |= h.read_names()
        res[gi] = other & g.names()
    return res


def generate_kernels(graph, groups, size_syms) -> Tuple[str, Dict[int, List[KernelSpec]]]:
    """Triton source of every fused group of ``groups`` (the scheduler's output) and
    the :class:`KernelSpec` s of each group index, in launch order (one kernel per
    group; a scatter is two or three). Raises :class:`TritonCodegenError` naming
    the op when a group cannot be generated."""
    outside = outside_reads(graph, groups)
    parts = [PRELUDE]
    specs: Dict[int, List[KernelSpec]] = {}
    for gi, grp in enumerate(groups):
        if isinstance(grp, FusedGroup):
            if len(grp.nodes) == 1 and grp.nodes[0].is_scan:
                src, spec = ScanKernel(f"triton_kernel{gi}", grp.nodes[0], graph, size_syms).generate()
                parts.append(src)
                specs[gi] = [spec]
                continue
            if len(grp.nodes) == 1 and grp.nodes[0].is_scatter:
                srcs, sps = ScatterKernels(f"triton_kernel{gi}", grp.nodes[0], graph, size_syms).generate()
                parts.extend(srcs)
                specs[gi] = sps
                continue
            splits = split_factor(grp, graph)
            if splits:
                srcs, sps = SplitReduction(f"triton_kernel{gi}", grp, graph, size_syms, outside[gi],
                                           splits).generate()
                parts.extend(srcs)
                specs[gi] = sps
                continue
            kg = TritonKernel(f"triton_kernel{gi}", grp, graph, size_syms, outside[gi])
            src, spec = kg.generate()
            spec.local = kg.local
            parts.append(src)
            specs[gi] = [spec]
        elif not isinstance(grp, ExternGroup):  # pragma: no cover - scheduler gives only these two
            raise TritonCodegenError(f"triton: unknown group {grp!r}")
    return "\n\n".join(parts), specs


# ----------------------------------------------------------------------- scatters
ATOMIC_ADD_DTYPES = {_t.float16, _t.bfloat16, _t.float32, _t.float64, _t.int32, _t.int64}


class _CopyNode:
    """The "copy the input" half of a scatter, shaped like a scheduler node so the
    ordinary pointwise kernel generator writes it."""
    is_reduction = is_scan = is_scatter = False

    def __init__(self, node):
        self.name = node.name
        self.buf = node.buf
        self.size = list(node.size)
        self.data = ir.Pointwise(node.size, node.data.get_dtype(), node.data.inner_fn)
        xs = index_vars("x", len(self.size))
        self.read_names = {nm for nm, _ in ir.extract_reads(self.data.inner_fn, xs).reads}

    def inner(self, p):
        return self.size[p:]

    def write_index(self, p):
        xs = index_vars("x", len(self.size))
        return sympy.expand(sum((i * s for i, s, n in zip(xs, contiguous_strides(self.size), self.size)
                                 if n != 1), sympy.Integer(0)))

    def __repr__(self):
        return f"{self.name}: copy of the scattered-into input size={self.size}"


class _CopyGroup:
    def __init__(self, node):
        self.nodes = [node]
        self.p = len(node.size)
        self.outer_sizes = list(node.size)

    def names(self):
        return {self.nodes[0].name}

    def read_names(self):
        return set(self.nodes[0].read_names)


class ScatterKernels:
    """``out = copy(init); out[target(j)] (op)= value(j)`` as launches in order:

    1. the copy (a pointwise kernel over the output);
    2. ``mode="add"``: one kernel over the iteration space with ``tl.atomic_add``
       (the order of additions is unspecified: floating-point sums may differ
       from the sequential reference in the last bits, integers are exact);
       overwrite: the last write must win, as in the reference, whatever order the
       GPU runs the iterations in -- ``tl.atomic_max`` of the iteration number
       into a scratch ``int64`` array (filled with -1) elects the last writer of
       each element, then a third kernel stores only the elected values."""

    def __init__(self, name, node, graph, size_syms):
        self.name = name
        self.node = node
        self.graph = graph
        self.size_syms = size_syms

    def generate(self):
        d = self.node.data
        dtype = d.get_dtype()
        if d.mode in ("amax", "amin"):
            # (tl.atomic_max/min neither orders floats nor propagates NaN as the reference does)
            raise TritonCodegenError(f"triton: scatter_{d.mode} (scatter_reduce reduce='{d.mode}') has no "
                                     "atomic lowering")
        if d.mode == "add" and dtype not in ATOMIC_ADD_DTYPES:
            raise TritonCodegenError(f"triton: scatter_add/index_put(accumulate) of {dtype.name} "
                                     "(no atomic add for this dtype)")
        copy = _CopyNode(self.node)
        kg = TritonKernel(f"{self.name}_copy", _CopyGroup(copy), self.graph, self.size_syms, {copy.name})
        src0, spec0 = kg.generate()
        srcs, specs = [src0], [spec0]
        if d.mode == "add":
            src, spec = self._pass("add")
            srcs.append(src)
            specs.append(spec)
        else:
            scratch = f"{self.node.name}_winner"
            s1, sp1 = self._pass("elect", scratch)
            s2, sp2 = self._pass("store", scratch)
            sp1.scratch = [(scratch, product(d.size), _t.int64, -1)]
            srcs += [s1, s2]
            specs += [sp1, sp2]
        return srcs, specs

    def _pass(self, what, scratch=None):
        d = self.node.data
        kname = f"{self.name}_{what}"
        k = TritonKernel(kname, None, self.graph, self.size_syms, set())
        ys = index_vars("x", len(d.iter_size))
        lines = ["    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)"]
        xnumel = sympy.expand(product(d.iter_size)) if d.iter_size else sympy.Integer(1)
        lines.append("    xindex = xindex.to(tl.int64)")
        lines.append("    xmask = xindex < xnumel")
        for y, st, n in zip(ys, contiguous_strides(d.iter_size), d.iter_size):
            e = "xindex" if st == 1 else f"(xindex // ({texpr(st)}))"
            lines.append(f"    {y} = {e} % ({texpr(n)})" if y != ys[0] else f"    {y} = {e}")
        h = TritonOps(k, lines, "    ", "xmask", None)
        with set_ops_handler(h):
            tgt = d.target_fn(ys)
            val = None if what == "elect" else _as_tv(h, d.value_fn(ys), d.get_dtype())
        widx = sympy.expand(sum((t * st for t, st, sz in zip(tgt, contiguous_strides(d.size), d.size) if sz != 1),
                                sympy.Integer(0)))
        out = self.node.name
        ptr = f"{out} + ({texpr(widx)}) + tl.zeros_like(xindex)"
        dt = d.get_dtype()
        if what == "add":
            v = val.name
            if dt is _t.bfloat16:
                v = f"_round_bf16({v}).to(tl.bfloat16)"
            elif dt is _t.float16:
                v = f"{v}.to(tl.float16)"
            lines.append(f"    tl.atomic_add({ptr}, {v}, xmask, sem='relaxed')")
            written = [out]
        elif what == "elect":
            lines.append(f"    tl.atomic_max({scratch} + ({texpr(widx)}) + tl.zeros_like(xindex), xindex, xmask, "
                         "sem='relaxed')")
            written = [scratch]
        else:
            win = k.new_tmp()
            lines.append(f"    {win} = tl.load({scratch} + ({texpr(widx)}) + tl.zeros_like(xindex), xmask, "
                         "other=-1)")
            v = val.name
            if dt is _t.bfloat16:
                v = f"_round_bf16({v}).to(tl.bfloat16)"
            elif COMPUTE[val.dtype] != TL_DTYPE[dt] or dt is _t.float16:
                v = f"{v}.to({TL_DTYPE[dt]})"
            lines.append(f"    tl.store({ptr}, {v}, xmask & ({win} == xindex))")
            written = [out]
            k.reads.add(scratch)
        reads = sorted(k.reads - {out} - {scratch}, key=_natural)
        params = reads + ([scratch] if what == "store" else []) + written
        dtypes = [_t.int64 if p_ == scratch else k.buffer_dtype(p_) for p_ in params]
        args = params + [s.name for s in self.size_syms] + ["xnumel", "XBLOCK: tl.constexpr"]
        src = f"@_jit\ndef {kname}({', '.join(args)}):\n" + "\n".join(lines) + "\n"
        hint = self.graph.sizevars.size_hint(xnumel)
        spec = KernelSpec(kname, "pointwise", params, dtypes, list(self.size_syms), xnumel, {}, False,
                          _configs("pointwise", hint, {}), [p_ for p_ in params if p_ in (out, scratch)])
        spec.idempotent = what != "add"
        spec.source = src
        return src, spec


# ----------------------------------------------------------------------- split reductions
# A reduction whose output has few elements (a full sum, a loss, BatchNorm's
# per-channel statistics, the column sums of a tall matrix) gives the GPU only that
# many programs, each looping over a huge row: most SMs idle. Such a group is split
# in two kernels -- the first runs the group's row stages over ``splits`` contiguous
# chunks of every row (P * splits programs): its reductions write partials [P,
# splits] (var: each chunk's mean and M2), its row-wise pointwise stages write their
# elements as usual; the second reduces the partials (a short persistent row; var
# by Chan's merge) and runs the group's per-output stages. The heuristic, on static
# sizes only:
#   * every row stage of the group has the same extent; its reductions are
#     sum/prod/amax/amin/any/all/var/argmax/argmin; no row stage reads a whole-row result of the
#     group (softmax's exp(x - max) needs the max of the row first);
#   * P (outputs) <= SPLIT_MAX_OUTPUTS (about two per SM of an H100: more outputs
#     already fill the GPU) and rows of >= SPLIT_MIN_RNUMEL elements;
#   * splits = min(SPLIT_TARGET_PROGRAMS // P, R // SPLIT_MIN_CHUNK, SPLIT_MAX),
#     rounded down to a power of two, and at least 2 -- enough programs to fill the
#     132 SMs several times, each with at least SPLIT_MIN_CHUNK elements.
# argmax/argmin split into (value, global index) partials merged with the same
# first-occurrence combine.
SPLIT_MIN_RNUMEL = 8192
SPLIT_MAX_OUTPUTS = 256
SPLIT_TARGET_PROGRAMS = 1024
SPLIT_MIN_CHUNK = 2048
SPLIT_MAX = 1024
SPLITTABLE = ("sum", "prod", "amax", "amin", "any", "all", "var", "argmax", "argmin")


def split_factor(grp, graph) -> int:
    """How many chunks to split the group's reductions into (0: do not split); see
    the comment above."""
    n0 = next((n for n in grp.nodes if n.inner(grp.p)), None)
    if n0 is None or not any(n.is_reduction for n in grp.nodes):
        return 0
    ext = n0.inner(grp.p)
    names = grp.names()
    rowwise = {n.name for n in grp.nodes if n.inner(grp.p) and not n.is_reduction}
    seen_x_only = set()
    for n in grp.nodes:
        if not n.inner(grp.p):
            seen_x_only.add(n.name)
            continue  # a per-output stage: runs in the second pass
        if not _same(n.inner(grp.p), ext):
            return 0
        if n.is_reduction and n.data.reduction_type not in SPLITTABLE:
            return 0
        if (n.read_names & names) - rowwise:
            # it needs a whole-row result of this group (softmax's sum of exp(x - max))
            return 0
    outputs = sympy.expand(product(grp.outer_sizes)) if grp.outer_sizes else sympy.Integer(1)
    rnumel = sympy.expand(product(ext))
    if not (outputs.is_Integer and rnumel.is_Integer):
        return 0
    outputs, rnumel = int(outputs), int(rnumel)
    if outputs > SPLIT_MAX_OUTPUTS or rnumel < SPLIT_MIN_RNUMEL:
        return 0
    # (the second pass holds a row of partials in one block)
    s = min(SPLIT_TARGET_PROGRAMS // max(outputs, 1), rnumel // SPLIT_MIN_CHUNK, SPLIT_MAX, PERSISTENT_RNUMEL_MAX)
    if s < 2:
        return 0
    return 1 << (s.bit_length() - 1)


class _VarMerge:
    """The second pass of a split var (see ``TritonKernel._var_merge``)."""
    reduction_type = "var_merge"

    def __init__(self, red, mean_partials, m2_partials, part_dtype, splits, chunk, rnumel):
        self.size = red.size
        self.dtype = red.get_dtype()
        self.src_dtype = part_dtype
        self.correction = red.correction
        self.mean_partials, self.m2_partials = mean_partials, m2_partials
        self.splits, self.chunk, self.rnumel = splits, chunk, rnumel
        self.reduction_ranges = [sympy.Integer(splits)]

    def get_dtype(self):
        return self.dtype

    def get_size(self):
        return self.size


class _ArgMerge:
    """The second pass of a split argmax/argmin (see ``TritonKernel._arg_merge``)."""

    def __init__(self, red, value_partials, index_partials, part_dtype, splits):
        self.reduction_type = red.reduction_type + "_merge"
        self.size = red.size
        self.dtype = red.get_dtype()
        self.src_dtype = part_dtype
        self.value_partials, self.index_partials = value_partials, index_partials
        self.splits = splits
        self.reduction_ranges = [sympy.Integer(splits)]

    def get_dtype(self):
        return self.dtype

    def get_size(self):
        return self.size


class _PartialsNode:
    """The leading reduction of a split group, as the second pass sees it: the same
    buffer, reduced over the ``splits`` partials instead of the row."""
    is_reduction = True
    is_scan = is_scatter = False

    def __init__(self, node, partials, part_dtype, splits, outer, chunk, rnumel):
        from ..virtualized import ops
        red = node.data
        self.name = node.name
        self.buf = node.buf
        self.size = list(node.size)
        self._node = node
        strides = contiguous_strides(outer)
        rtype = red.reduction_type

        def inner_fn(xs, rs):
            flat = sum((x * st for x, st in zip(xs, strides)), sympy.Integer(0))
            return ops.load(partials, flat * splits + rs[0])

        if rtype == "var":
            self.data = _VarMerge(red, partials, partials + "_m2", part_dtype, splits, chunk, rnumel)
            self.read_names = {partials, partials + "_m2"}
        elif rtype in ("argmax", "argmin"):
            self.data = _ArgMerge(red, partials, partials + "_idx", part_dtype, splits)
            self.read_names = {partials, partials + "_idx"}
        else:
            self.data = ir.Reduction(red.size, [splits], rtype, part_dtype, inner_fn, dtype=red.get_dtype())
            self.read_names = {partials}
        self.rranges = [sympy.Integer(splits)]

    def outer(self, p):
        return self._node.outer(p)

    def inner(self, p):
        return self.rranges

    def write_index(self, p):
        return self._node.write_index(p)

    def __repr__(self):
        return f"{self.name}: second pass of a split {self.data.reduction_type} over {self.rranges[0]} partials"


class SplitReduction:
    """The two kernels of a split reduction (see :func:`split_factor`)."""

    def __init__(self, name, grp, graph, size_syms, outside, splits):
        self.name = name
        self.grp = grp
        self.graph = graph
        self.size_syms = size_syms
        self.outside = outside
        self.splits = splits

    def generate(self):
        grp = self.grp
        rows = [n for n in grp.nodes if n.inner(grp.p)]            # pass 1: the row stages
        reds = [n for n in rows if n.is_reduction]
        outputs = int(sympy.expand(product(grp.outer_sizes))) if grp.outer_sizes else 1
        rnumel = int(sympy.expand(product(rows[0].inner(grp.p))))
        chunk = -(-rnumel // self.splits)
        chunk = -(-chunk // 64) * 64
        partials, dtypes, extra = {}, {}, {}
        for n in reds:
            red = n.data
            src = red.src_dtype
            if red.reduction_type in ("any", "all") or src is _t.bool_:
                dt = _t.bool_
            else:
                # half precision accumulates in float32: the partials keep that precision
                dt = _t.float32 if src in (_t.float16, _t.bfloat16) else src
            dtypes[n.name] = dt
            partials[n.name] = f"{n.name}_partials"
            extra[partials[n.name]] = dt
            if red.reduction_type == "var":
                partials[n.name + ":m2"] = f"{n.name}_partials_m2"
                extra[partials[n.name + ":m2"]] = dt
            if red.reduction_type in ("argmax", "argmin"):
                partials[n.name + ":idx"] = f"{n.name}_partials_idx"
                extra[partials[n.name + ":idx"]] = _t.int64
        k1 = TritonKernel(f"{self.name}_split", FusedGroup(rows, grp.p), self.graph, self.size_syms, self.outside)
        k1.split = (self.splits, chunk, partials)
        k1.extra_buffers.update(extra)
        src1, spec1 = k1.generate()
        spec1.scratch = [(nm, sympy.Integer(outputs * self.splits), extra[nm], 0) for nm in partials.values()]
        nodes2 = [_PartialsNode(n, partials[n.name], dtypes[n.name], self.splits, grp.outer_sizes, chunk, rnumel)
                  if n.is_reduction else n for n in grp.nodes if n.is_reduction or not n.inner(grp.p)]
        k2 = TritonKernel(f"{self.name}", FusedGroup(nodes2, grp.p), self.graph, self.size_syms, self.outside)
        k2.extra_buffers.update(extra)
        src2, spec2 = k2.generate()
        # buffers that neither pass writes need no memory
        spec1.local = spec2.local = grp.names() - set(k1.writes) - set(k2.writes)
        return [src1, src2], [spec1, spec2]


# ----------------------------------------------------------------------- scans
class ScanKernel:
    """Inclusive cumsum/cumprod (``ir.Scan``) along ``dim``: programs own ``XBLOCK``
    rows (every index of the other dims, flattened), the scan dim is the block's
    second axis.

    * persistent (static length <= PERSISTENT_RNUMEL_MAX): the whole row in one
      ``[XBLOCK, RBLOCK0]`` tile, one ``tl.cumsum``/``tl.cumprod`` (Triton's
      ``associative_scan`` with its own combine functions, which the interpreter
      runs as numpy cumsum/cumprod);
    * looped (longer or symbolic rows): chunks of ``RBLOCK`` in order, each scanned
      with the previous chunk's last value folded into its first element (the
      carry), so the row's prefix continues across chunks; the carry is read back
      from the chunk's last column by a reduction that adds -0.0 / multiplies by 1
      everywhere else (exact, signed zeros and NaN included).

    The accumulator is the compute dtype (float16/bfloat16 in float32, rounded once
    per element when stored, like the prim); integers wrap in their own dtype.
    Within a chunk the combine order is a tree, not sequential: floating-point
    results differ from numpy's sequential cumsum in the last bits."""

    def __init__(self, name, node, graph, size_syms):
        self.name = name
        self.node = node
        self.graph = graph
        self.size_syms = size_syms

    def generate(self):
        d = self.node.data
        size = list(d.size)
        dim = d.dim
        n = len(size)
        dt = d.get_dtype()
        ct = COMPUTE[dt]
        k = TritonKernel(self.name, None, self.graph, self.size_syms, set())
        rnumel = sympy.expand(size[dim])
        persistent = rnumel.is_Integer and int(rnumel) <= PERSISTENT_RNUMEL_MAX
        k.persistent = persistent
        k.rnumels = [rnumel]
        others = [i for i in range(n) if i != dim]
        osizes = [size[i] for i in others]
        xnumel = sympy.expand(product(osizes)) if osizes else sympy.Integer(1)
        xs = index_vars("x", n)
        r0 = index_vars("r", 1)[0]
        full = list(xs)
        full[dim] = r0
        ind = "    "
        rb = "RBLOCK0" if persistent else "RBLOCK"
        L = [f"{ind}xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]"]
        hint = self.graph.sizevars.size_hint
        biggest = hint(xnumel) * hint(rnumel)
        if biggest >= 2 ** 31 - 1 or self.size_syms:
            L.append(f"{ind}xindex = xindex.to(tl.int64)")
        L.append(f"{ind}xmask = xindex < xnumel")
        for j, (i, st) in enumerate(zip(others, contiguous_strides(osizes))):
            e = "xindex" if st == 1 else f"(xindex // ({texpr(st)}))"
            L.append(f"{ind}{xs[i]} = {e} % ({texpr(size[i])})" if j else f"{ind}{xs[i]} = {e}")
        L.append(f"{ind}rnumel0 = {texpr(rnumel)}")
        widx = sympy.expand(self.node.write_index(n)).subs(xs[dim], r0)
        scan = "tl.cumsum" if d.op == "sum" else "tl.cumprod"
        if persistent:
            L.append(f"{ind}rindex = tl.arange(0, RBLOCK0)[None, :]")
            L.append(f"{ind}rmask = rindex < rnumel0")
            L.append(f"{ind}{r0} = rindex")
            inner = ind
        else:
            carry = k.new_tmp()
            ident = "0" if d.op == "sum" else "1"
            L.append(f"{ind}{carry} = tl.full([XBLOCK, 1], {ident}, {ct})")
            L.append(f"{ind}for roffset in range(0, rnumel0, RBLOCK):")
            inner = ind + "    "
            L.append(f"{inner}rindex = roffset + tl.arange(0, RBLOCK)[None, :]")
            L.append(f"{inner}rmask = rindex < rnumel0")
            L.append(f"{inner}{r0} = rindex")
        h = TritonOps(k, L, inner, "xmask & rmask", 0)
        with set_ops_handler(h):
            v = _as_tv(h, d.inner_fn(full), dt)
        blk = k.new_tmp()
        L.append(f"{inner}{blk} = ({v} + tl.zeros([XBLOCK, {rb}], {ct})).to({ct})")
        if not persistent:
            op = "+" if d.op == "sum" else "*"
            L.append(f"{inner}{blk} = tl.where(rindex == roffset, {blk} {op} {carry}, {blk})")
        acc = k.new_tmp()
        # the block is of the compute type already; cumsum still takes dtype= (it would widen
        # small ints), cumprod has no such keyword before Triton 3.7 and never widens
        cast = f", dtype={ct}" if d.op == "sum" else ""
        L.append(f"{inner}{acc} = {scan}({blk}, 1{cast})")
        if not persistent:
            last = "(rindex == roffset + RBLOCK - 1)"
            if d.op == "sum":
                neutral = "-0.0" if dt.category == 2 else "0"
                L.append(f"{inner}{carry} = tl.sum(tl.where({last}, {acc}, {neutral}).to({ct}), 1)[:, None]"
                         f".to({ct})")
            else:
                L.append(f"{inner}{carry} = tl.reduce(tl.where({last}, {acc}, 1).to({ct}), 1, "
                         "_prod_combine)[:, None]")
        k._store(self.node.name, widx, TV(acc, dt), "xmask & rmask", inner, L)
        reads = sorted(k.reads - {self.node.name}, key=_natural)
        params = reads + [self.node.name]
        dtypes = [k.buffer_dtype(p_) for p_ in params]
        args = params + [s.name for s in self.size_syms] + ["xnumel", "XBLOCK: tl.constexpr"]
        rblocks = {"RBLOCK0": next_pow2(int(rnumel))} if persistent else {}
        args += [f"{c}: tl.constexpr" for c in rblocks] + ([] if persistent else ["RBLOCK: tl.constexpr"])
        src = f"@_jit\ndef {self.name}({', '.join(args)}):\n" + "\n".join(L) + "\n"
        kind = "persistent" if persistent else "looped"
        spec = KernelSpec(self.name, kind, params, dtypes, list(self.size_syms), xnumel, rblocks, not persistent,
                          _configs(kind, hint(xnumel), rblocks), [self.node.name])
        spec.source = src
        return src, spec
