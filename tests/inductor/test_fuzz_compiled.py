"""Differential fuzzing of the compiler: random small programs, compiled vs eager.

Why: the CPU inductor rewrites index arithmetic (range-aware simplification,
joined reshape digits, clamp/comparison folding), splits loops at cat/pad
boundaries, tiles transposed reads, interchanges and merges reduction loops,
computes mutated inputs in place and reuses buffers across calls. Each of these
is a chance of a *silent* wrong answer. Hand-written tests pin the cases their
authors thought of; this file draws programs the authors did not think of.

A program is generated as Python source (so dynamo traces a plain function and
a failure prints a readable repro): a chain of pointwise ops (transcendental,
where/clamp, int64 and bool arithmetic), reductions over random dims with
keepdim, views (transpose/permute/reshape/stepped slices/expand/unsqueeze/cat/
stack/pad/flip/select), matmul with bias, in-place ops on inputs and on views of
inputs, gather/index_select/scatter_add/index_put, scans (cumsum/cumprod), sort/topk and
max/min(dim) with their indices, tril/triu/roll/repeat/masked_fill, remainder/fmod/
floor_divide with negative divisors, pow/sign/round/trunc/lerp/addcmul, inf and nan through
nan_to_num/isnan and NaN-propagating ops, int64/int32 bit ops and shifts, bool any/all,
bmm/broadcast batched matmul, float16/bfloat16 pointwise ops and reductions, sizes as values
(symbolic under ``dynamic=True``) -- over random shapes (sizes 1,
odd sizes, sizes around the vector width and the 16/32 tiles) and input layouts
(contiguous, transposed, stepped slices, expanded, rows of a bigger tensor: a contiguous
view, symbolic under ``dynamic=True``).

Each program is compiled with ``ember.compile(fn, backend="inductor")``
(a subset with ``dynamic=True``, which must compile one graph for every size: aot's
per-shape fallback raises there, ``strict_dynamic``; a subset as training: gradients through aot)
and called twice with fresh data (buffer reuse across calls), against eager:
integer and bool results bitwise, floating results to a few ulps of the
accumulated magnitude (strict IEEE: no fast-math; reductions may reassociate),
and inputs mutated identically. Half-precision results are compared to a few half ulps:
compiled code computes them in float and rounds once per stored value, eager rounds after
every op (see ``Gen.op_half``).

CI runs a fixed, derandomized handful of examples; ``EMBER_FUZZ_EXAMPLES=N``
explores more (``EMBER_FUZZ_SEED`` varies the stream). Regression tests for the
bugs the fuzzer found are at the end of the file, minimised by hand.
"""
import os
import re

import numpy as np
import pytest

import hypothesis  # noqa: E402
from hypothesis import given  # noqa: E402
from fuzz_settings import fuzz_settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402

N_EXAMPLES = int(os.environ.get("EMBER_FUZZ_EXAMPLES", "0"))
EXPLORE = N_EXAMPLES > 0
SEED = os.environ.get("EMBER_FUZZ_SEED")

SIZES = [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33]
FLOAT = ("float32", "float64")
HALF = ("float16", "bfloat16")


# -- program generation ------------------------------------------------------------
class Gen:
    """Builds the source of ``def f(a0, a1, ...)`` while running every line eagerly
    on example tensors (that is how it knows each value's shape and dtype)."""

    def __init__(self, data, training=False, dynamic=False):
        self.d = data
        self.training = training
        self.dynamic = dynamic
        self.inputs = []     # (name, shape, dtype, layout, kind)
        self.lines = []
        self.vals = []       # names of the values usable as operands
        self.ns = {"ember": ember, "F": F}
        self.rng = np.random.default_rng(0)
        self.mutable = set()  # inputs that may be written in place
        self.sinks = []       # values holding inf/nan: extra outputs, never operands

    # helpers ---------------------------------------------------------------
    def draw(self, s):
        return self.d.draw(s)

    def pick(self, xs):
        return self.draw(st.sampled_from(list(xs)))

    def shape_of(self, n):
        return tuple(self.ns[n].shape)

    def dtype_of(self, n):
        return str(self.ns[n].dtype).replace("ember.", "")

    def new_input(self, shape, dtype="float32", kind="data", layout=None):
        name = f"a{len(self.inputs)}"
        if layout is None:
            choices = ["contig", "contig", "sliced"] + (["rows"] if len(shape) >= 1 else [])
            if len(shape) >= 2:
                choices.append("transposed")
            if any(s > 1 for s in shape) and kind == "data":
                choices.append("expanded")
            layout = self.pick(choices)
        if self.dynamic and layout != "rows":
            layout = "contig"     # (contiguous layouts only: views of rows get symbolic sizes too)
        spec = (name, tuple(shape), dtype, layout, kind)
        self.inputs.append(spec)
        self.ns[name] = make_input(spec, self.rng)
        if layout != "expanded" and kind == "data":
            self.mutable.add(name)
        return name

    def emit(self, expr, usable=True):
        name = f"v{len(self.lines)}"
        line = f"{name} = {expr}"
        try:
            exec(line, self.ns)
        except (RuntimeError, IndexError, ValueError) as e:
            if not any(0 in self.shape_of(v) for v in self.vals):
                raise AssertionError(f"generator produced an invalid line {line!r}: {e}\n" + self.source()) from e
            return None   # an op eager rejects on an empty tensor (amax of nothing): not drawn
        self.lines.append(line)
        if usable:
            self.vals.append(name)
        return name

    def stmt(self, line):
        exec(line, self.ns)
        self.lines.append(line)

    def shape(self, max_dims=4):
        nd = self.draw(st.integers(1 if self.dynamic else 0, max_dims))
        sizes = SIZES + ([0] if not self.dynamic else [])   # (0-sized: fixed, never symbolic)
        return tuple(self.draw(st.sampled_from(sizes)) for _ in range(nd))

    def operand(self, dtypes=FLOAT):
        cands = [v for v in self.vals if self.dtype_of(v) in dtypes]
        if not cands:
            return None
        return self.pick(cands[-4:]) if self.draw(st.booleans()) else self.pick(cands)

    def partner(self, x, dtype=None):
        """A second operand that broadcasts with ``x``: an existing value of the same
        shape, or a new input whose shape is a suffix of x's with some dims 1."""
        shp = self.shape_of(x)
        dtype = dtype or self.dtype_of(x)
        same = [v for v in self.vals if v != x and self.shape_of(v) == shp and self.dtype_of(v) == dtype]
        if same and self.draw(st.booleans()):
            return self.pick(same)
        k = self.draw(st.integers(0, len(shp)))
        sub = tuple(s if self.draw(st.integers(0, 3)) else 1 for s in shp[len(shp) - k:])
        kind = "data"
        return self.new_input(sub, dtype, kind)

    # ops -------------------------------------------------------------------
    def step(self):
        kinds = ["unary", "unary", "binary", "binary", "reduce", "view", "view", "view",
                 "shape2", "matmul", "index", "intbool", "where",
                 "scan", "sortk", "tri", "arith", "bits", "maxdim", "bmm", "half", "sizes"]
        if not self.training:
            kinds += ["inplace", "inplace", "nonfinite"]
        getattr(self, "op_" + self.pick(kinds))()

    def op_unary(self):
        x = self.operand()
        if x is None:
            return
        f = self.pick([
            "ember.tanh({x})", "ember.sigmoid({x})", "ember.sin({x})", "ember.cos({x})", "ember.erf({x})",
            "ember.exp({x}.clamp(-4, 4))", "ember.log1p({x}.abs())", "ember.sqrt({x}.abs() + 0.5)",
            "F.gelu({x})", "F.relu({x})", "F.silu({x})", "({x} * 0.5 + 1.25)", "(-{x})",
            "ember.rsqrt({x} * {x} + 1.0)", "{x}.clamp(-0.5, 0.75)", "{x}.clamp(min=0.1)",
            "{x}.clamp(max=-0.2)", "ember.abs({x})", "ember.floor({x} * 3.0 + 0.125)", "({x} * {x})",
            "ember.log(ember.abs({x}) + 1e-3)", "ember.atan({x})", "(1.0 / ({x}.abs() + 1.0))",
            "ember.maximum({x}, {x}.flip(-1))" if self.shape_of(x) else "ember.abs({x})",
        ])
        self.emit(f.format(x=x))

    def op_binary(self):
        x = self.operand()
        if x is None:
            return
        y = self.partner(x)
        if self.draw(st.booleans()):
            x, y = y, x
        f = self.pick(["({x} + {y})", "({x} - {y})", "({x} * {y})", "({x} / ({y}.abs() + 0.5))",
                       "ember.maximum({x}, {y})", "ember.minimum({x}, {y})", "ember.atan2({x}, {y})",
                       "({x} * 2.0 - {y} * 0.25)"])
        self.emit(f.format(x=x, y=y))

    def op_where(self):
        x = self.operand()
        if x is None:
            return
        y = self.partner(x)
        c = self.pick(["({x} > 0.1)", "({y} <= {x})", "({x} != {x})"])
        self.emit(f"ember.where({c.format(x=x, y=y)}, {x}, {y})")

    def dims(self, nd, allow_none=True):
        if nd == 0:
            return None
        k = self.draw(st.integers(1, nd))
        ds = sorted(self.draw(st.permutations(range(nd)))[:k])
        if self.draw(st.booleans()):
            ds = [d - nd for d in ds]
        return ds

    def op_reduce(self):
        x = self.operand()
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        kd = self.draw(st.booleans())
        if nd == 0:
            self.emit(self.pick([f"{x}.sum()", f"{x}.amax()", f"{x}.mean()"]))
            return
        ds = self.dims(nd)
        dim = self.draw(st.integers(-nd, nd - 1))
        f = self.pick(["sum", "mean", "amax", "amin", "var", "var0", "std", "softmax", "log_softmax",
                       "layer_norm", "logsumexp", "argmax", "sum_all", "prod"])
        if f in ("sum", "mean", "amax", "amin"):
            self.emit(f"{x}.{f}({tuple(ds)}, keepdim={kd})")
        elif f == "var":
            self.emit(f"{x}.var({tuple(ds)}, keepdim={kd})")
        elif f == "var0":
            self.emit(f"{x}.var({tuple(ds)}, keepdim={kd}, correction=0)")
        elif f == "std":
            if self.training and shp[dim] > 1:
                # std's gradient is (x - mean) / ((n - 1) std): 0/0 for a constant row (an expanded
                # input), one ulp over another, different in eager and compiled (seed 309): a ramp
                # keeps the rows' spread away from 0, as for layer_norm
                n = shp[dim]
                rshape = (n,) + (1,) * (nd - 1 - dim % nd)
                x = f"({x} + ember.arange({n}, dtype={x}.dtype).reshape({rshape}) * 0.25)"
            self.emit(f"{x}.std({dim}, keepdim={kd})")
        elif f in ("softmax", "log_softmax"):
            self.emit(f"F.{f}({x}, {dim})")
        elif f == "logsumexp":
            self.emit(f"ember.logsumexp({x}, {dim}, keepdim={kd})")
        elif f == "argmax":
            self.emit(f"{x}.argmax({dim}, keepdim={kd})")
        elif f == "prod":
            self.emit(f"({x}.clamp(-1.5, 1.5)).prod({dim}, keepdim={kd})")
        elif f == "sum_all":
            self.emit(f"{x}.sum()")
        else:
            k = self.draw(st.integers(1, min(nd, 2)))
            ns_ = shp[nd - k:]
            # a ramp keeps every normalised row's variance away from 0: an expanded input's rows
            # can be constant, and then (x - mean) / sqrt(eps) turns one ulp of the mean into
            # 6e-5 of the output and its gradients, differently in torch, eager and compiled
            # (seed 1541)
            n = int(np.prod(ns_))
            xr = f"({x} + ember.arange({n}, dtype={x}.dtype).reshape({tuple(ns_)}) * 0.25)"
            if self.draw(st.booleans()):
                w = self.new_input(ns_, self.dtype_of(x), layout="contig")
                b = self.new_input(ns_, self.dtype_of(x), layout="contig")
                self.emit(f"F.layer_norm({xr}, {ns_}, {w}, {b})")
            else:
                self.emit(f"F.layer_norm({xr}, {ns_})")

    def op_view(self):
        x = self.pick(self.vals)
        shp = self.shape_of(x)
        nd = len(shp)
        opts = ["unsqueeze"]
        if nd >= 2:
            opts += ["transpose", "permute", "t"]
        if nd >= 1:
            opts += ["slice", "reshape", "flip", "expand", "select", "flatten", "reshape_split", "pad"]
        f = self.pick(opts)
        if f == "unsqueeze":
            self.emit(f"{x}.unsqueeze({self.draw(st.integers(-nd - 1, nd))})")
        elif f == "transpose":
            a, b = self.draw(st.permutations(range(nd)))[:2]
            self.emit(f"{x}.transpose({a}, {b})")
        elif f == "permute":
            self.emit(f"{x}.permute({tuple(self.draw(st.permutations(range(nd))))})")
        elif f == "t":
            a, b = nd - 2, nd - 1
            self.emit(f"{x}.transpose({a}, {b})")
        elif f == "slice":
            d = self.draw(st.integers(0, nd - 1))
            n = shp[d]
            start = self.draw(st.integers(0, max(0, n - 1)))
            stop = self.draw(st.integers(start, n))
            step = self.draw(st.sampled_from([1, 1, 2, 3]))
            idx = ", ".join([":"] * d + [f"{start}:{stop}:{step}"])
            self.emit(f"{x}[{idx}]")
        elif f == "select":
            d = self.draw(st.integers(0, nd - 1))
            if shp[d] == 0:
                return
            i = self.draw(st.integers(-shp[d], shp[d] - 1))
            self.emit(f"{x}.select({d}, {i})")
        elif f == "flip":
            self.emit(f"{x}.flip({tuple(self.dims(nd))})")
        elif f == "expand":
            ones = [i for i, s in enumerate(shp) if s == 1]
            new = list(shp)
            for i in ones:
                new[i] = self.pick(SIZES[1:])
            lead = [self.pick([2, 3])] if self.draw(st.booleans()) and nd < 4 else []
            self.emit(f"{x}.expand({tuple(lead + new)})")
        elif f == "flatten":
            self.emit(f"{x}.reshape(-1)")
        elif f == "reshape":
            # merge a run of adjacent dims
            if nd < 2:
                self.emit(f"{x}.reshape({shp[0]}, 1)")
                return
            i = self.draw(st.integers(0, nd - 2))
            j = self.draw(st.integers(i + 2, nd))
            new = list(shp[:i]) + [int(np.prod(shp[i:j]))] + list(shp[j:])
            self.emit(f"{x}.reshape({tuple(new)})")
        elif f == "reshape_split":
            d = self.draw(st.integers(0, nd - 1))
            n = shp[d]
            divs = [k for k in range(1, n + 1) if n % k == 0] or [1]
            k = self.pick(divs)
            new = list(shp[:d]) + [k, n // k if n else 0] + list(shp[d + 1:])
            self.emit(f"{x}.reshape({tuple(new)})")
        elif f == "pad":
            if self.dtype_of(x) not in FLOAT:
                self.emit(f"{x}.unsqueeze(0)")
                return
            k = self.draw(st.integers(1, min(nd, 2)))
            pads = []
            for i in range(k):
                n = shp[nd - 1 - i]
                lo = self.draw(st.integers(-(n - 1) // 2 if n > 1 else 0, 3))
                hi = self.draw(st.integers(-(n - 1) // 2 if n > 1 else 0, 3))
                pads += [lo, hi]
            val = self.pick([0.0, 1.5])
            self.emit(f"F.pad({x}, {tuple(pads)}, value={val})")

    def op_shape2(self):
        x = self.operand(FLOAT + ("int64",))
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        if nd == 0:
            self.emit(f"ember.stack([{x}, {x} * 2], 0)")
            return
        d = self.draw(st.integers(0, nd - 1))
        if self.draw(st.booleans()):
            other = list(shp)
            other[d] = self.pick(SIZES + ([0] if not self.dynamic else []))
            y = self.new_input(tuple(other), self.dtype_of(x))
            order = [x, y] if self.draw(st.booleans()) else [y, x]
            if self.draw(st.booleans()):
                order.append(x)
            self.emit(f"ember.cat([{', '.join(order)}], {d - nd if self.draw(st.booleans()) else d})")
        else:
            y = self.new_input(shp, self.dtype_of(x))
            self.emit(f"ember.stack([{x}, {y}], {self.draw(st.integers(0, nd))})")

    def op_matmul(self):
        x = self.operand()
        if x is None:
            return
        shp = self.shape_of(x)
        if not shp:
            return
        n = self.pick(SIZES)
        dt = self.dtype_of(x)
        if len(shp) == 2 and self.draw(st.booleans()):
            w = self.new_input((n, shp[-1]), dt)
            b = self.new_input((n,), dt)
            self.emit(f"F.linear({x}, {w}, {b})")
            return
        w = self.new_input((shp[-1], n), dt)
        if self.draw(st.booleans()):
            b = self.new_input((n,), dt)
            self.emit(f"({x} @ {w} + {b})")
        else:
            self.emit(f"ember.matmul({x}, {w})")

    def op_index(self):
        x = self.operand(FLOAT + ("int64",))
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        if nd == 0 or 0 in shp:
            return
        d = self.draw(st.integers(0, nd - 1))
        f = self.pick(["gather", "index_select", "getitem", "scatter_add", "index_put", "index_add"])
        m = self.pick(SIZES)
        if f == "gather":
            ishape = list(shp)
            ishape[d] = m
            idx = self.new_input(tuple(ishape), "int64", kind=f"index:{shp[d]}", layout="contig")
            self.emit(f"ember.gather({x}, {d}, {idx})")
        elif f == "index_select":
            idx = self.new_input((m,), "int64", kind=f"index:{shp[d]}", layout="contig")
            self.emit(f"{x}.index_select({d}, {idx})")
        elif f == "getitem":
            idx = self.new_input((m,), "int64", kind=f"index:{shp[0]}", layout="contig")
            self.emit(f"{x}[{idx}]")
        elif f == "scatter_add":
            ishape = list(shp)
            ishape[d] = m
            idx = self.new_input(tuple(ishape), "int64", kind=f"index:{shp[d]}", layout="contig")
            src = self.new_input(tuple(ishape), self.dtype_of(x), layout="contig")
            self.emit(f"{x}.scatter_add({d}, {idx}, {src})")
        elif f == "index_add":
            idx = self.new_input((m,), "int64", kind=f"index:{shp[d]}", layout="contig")
            sshape = list(shp)
            sshape[d] = m
            src = self.new_input(tuple(sshape), self.dtype_of(x), layout="contig")
            self.emit(f"{x}.index_add({d}, {idx}, {src})")
        else:
            if self.training or x not in self.mutable and not x.startswith("v"):
                return
            idx = self.new_input((m,), "int64", kind=f"index:{shp[0]}", layout="contig")
            v = self.new_input(shp[1:], self.dtype_of(x), layout="contig")
            y = (self.emit(f"{x}.clone()") or x) if self.draw(st.booleans()) else x
            self.stmt(f"{y}.index_put_(({idx},), {v}, accumulate=True)")
            if y != x:
                self.vals.append(y)

    def op_intbool(self):
        x = self.operand(FLOAT + ("int64", "bool"))
        if x is None:
            return
        dt = self.dtype_of(x)
        if dt in FLOAT:
            # x < mean + 1/8, not x < mean: an expanded input (every element equal) made that an
            # exact tie, decided by the last bit of the mean -- numpy's pairwise float32 sum of 15
            # equal values rounds, the compiled double sum does not (seed 1529)
            # (+ 0.25 and + 0.125 before truncating or flooring: tanh, sin, sigmoid saturate at
            # exactly +-1 in one libm and one ulp short of it in another -- numpy's sin and
            # glibc's vector sin: (sin(x) * 8).to(int64) was -8 eagerly, -7 compiled (seed 211);
            # the offsets move every integer boundary off such values)
            f = self.pick(["({x} * 8.0 + 0.25).to(ember.int64)", "({x} > 0.2)", "({x} < {x}.mean() + 0.125)"])
            self.emit(f.format(x=x))
        elif dt == "int64":
            y = self.partner(x, "int64")
            f = self.pick(["({x} + {y})", "({x} * {y})", "({x} - 3 * {y})", "ember.floor_divide({x}, {y}.abs() + 1)",
                           "ember.remainder({x}, {y}.abs() + 1)", "({x} % 7)", "ember.maximum({x}, {y})",
                           "({x} & {y})", "({x} ^ {y})", "{x}.sum(-1)" if self.shape_of(x) else "({x} + 1)",
                           "({x} > {y})", "({x}.to(ember.float32) * 0.5)", "{x}.amax(0)" if self.shape_of(x) else "{x}",
                           "{x}.clamp(-20, 20)"])
            self.emit(f.format(x=x, y=y))
        else:
            f = self.pick(["({x} & {x}.flip(0))" if self.shape_of(x) else "(~{x})", "(~{x})",
                           "{x}.any(0)" if self.shape_of(x) else "{x}", "{x}.to(ember.float32)",
                           "{x}.to(ember.int64)", "({x} ^ ({x}.to(ember.int64) > 0))",
                           "{x}.all(-1)" if self.shape_of(x) else "{x}"])
            self.emit(f.format(x=x))

    def op_inplace(self):
        cands = [n for n in self.vals if self.dtype_of(n) in FLOAT and
                 (n in self.mutable or n.startswith("v") and self.ns[n]._data.flags.writeable and
                  _owns_memory(self.ns[n]))]
        if not cands:
            return
        x = self.pick(cands)
        shp = self.shape_of(x)
        target = x
        # (x may be an input that is itself a view -- sliced or transposed: the write goes into
        # it, see test_inplace_on_view_of_transposed_input)
        if shp and 0 not in shp and self.draw(st.booleans()):
            d = self.draw(st.integers(0, len(shp) - 1))
            n = shp[d]
            start = self.draw(st.integers(0, n - 1))
            step = self.pick([1, 2])
            target = f"{x}[{', '.join([':'] * d + [f'{start}::{step}'])}]"
        elif len(shp) >= 2 and self.draw(st.booleans()):
            target = f"{x}.transpose(0, {len(shp) - 1})"
        y = self.partner(x)
        # y broadcasts to x, not to a slice or transpose of x: added to those only when it has
        # x's own shape, transposed like the target (a shape mismatch raised while generating)
        if target != x and self.shape_of(y) == shp and target.endswith(".transpose(0, %d)" % (len(shp) - 1)):
            y = f"{y}.transpose(0, {len(shp) - 1})"
        elif target != x:
            y = None
        f = self.pick(["{t}.add_({y})" if y is not None else "{t}.mul_(1.5)",
                       "{t}.mul_(0.5)", "{t}.clamp_(-0.3, 0.4)", "{t}.sub_(0.25)", "{t}.copy_({t} * 2.0)",
                       "{t}.tanh_()", "{t}.add_({t}.flip(0))",
                       # (later: writes that read other elements of the target -- compiled in
                       # place, they must read the old values)
                       "{t}.masked_fill_({t} > 0.5, 0.25)", "{t}.fill_(0.5)", "{t}.lerp_({t}.flip(-1), 0.5)",
                       "{t}.copy_({t}.roll(1, 0))" if shp else "{t}.zero_()",
                       "{t}.mul_({t}.cumsum(-1).clamp(-2, 2))" if shp else "{t}.clamp_(max=0.3)"])
        self.stmt(f.format(t=target, y=y))

    # -- families added later: scans, sort/topk, triangles/roll/repeat/masked_fill, division
    # and rounding, non-finite values, integer bits and bool reductions, max/min with indices,
    # batched matmul, half precision ----------------------------------------------------
    def ramp(self, x, d):
        """``x`` made distinct along dim ``d`` (sort/topk/max indices are compared bitwise: an
        expanded input, a clamp bound or relu's zeros would tie). int64: ``x * n + k``; floats
        (only for n <= 64, see can_index): ``x.clamp(-64, 64) + k / 1024`` -- a float32 ulp at
        64 is 2**-17, far below the step, and distinct constants of the generator differ by
        more than 64 / 1024."""
        shp = self.shape_of(x)
        nd = len(shp)
        d = d % nd
        n = shp[d]
        rshape = (n,) + (1,) * (nd - 1 - d)
        if self.dtype_of(x) == "int64":
            return f"({x} * {max(n, 1)} + ember.arange({n}).reshape({rshape}))"
        return f"({x}.clamp(-64.0, 64.0) + ember.arange({n}, dtype={x}.dtype).reshape({rshape}) * {2.0 ** -10})"

    def can_index(self, x, d):
        return self.dtype_of(x) == "int64" or self.shape_of(x)[d] <= 64

    def op_scan(self):
        x = self.operand(FLOAT + ("int64",))
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        d = self.draw(st.integers(-nd, nd - 1)) if nd else self.pick([0, -1])
        # (long scans only where the float32 rounding of the running value stays inside the
        # tolerance: a flattened 4-d value is a scan over 10^5 elements)
        if nd and shp[d] > 256:
            return
        if self.dtype_of(x) == "int64":
            f = self.pick(["{x}.cumsum({d})", "ember.cumsum({x}.clamp(-3, 3), dim={d})",
                           "{x}.clamp(-1, 1).cumprod({d})", "({x} > 0).cumsum({d})"])
        else:
            f = self.pick(["{x}.cumsum({d})", "ember.cumsum({x}, dim={d})", "{x}.clamp(-1.5, 1.5).cumprod({d})",
                           "({x} > 0.3).cumsum({d})", "ember.cumsum({x} * {x}, {d})"])
        self.emit(f.format(x=x, d=d))

    def op_sortk(self):
        x = self.operand(FLOAT + ("int64",))
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        if nd == 0:
            return
        d = self.draw(st.integers(-nd, nd - 1))
        n = shp[d]
        # indices are compared bitwise, so only of distinct values (ramp); training always:
        # the gradient goes where the indices say
        idx = self.can_index(x, d) and (self.training or self.draw(st.booleans()))
        if self.training and not idx:
            return
        xs = self.ramp(x, d) if idx else x
        f = self.pick(["sort", "sort_desc", "sort_stable", "topk", "topk_small", "argsort"])
        if f == "argsort" and not idx:
            f = "sort"
        if f.startswith("topk") and n == 0:
            return
        k = self.draw(st.integers(1, max(n, 1)))
        if f == "sort_stable":
            # stable: the indices of ties are defined -- compared even without the ramp
            t = self.emit(f"ember.sort({x}, dim={d}, stable=True)", usable=False)
            if t is None:
                return
            self.emit(f"{t}.values")
            if not self.training:
                self.emit(f"{t}.indices")
            return
        expr = {"sort": f"ember.sort({xs}, {d})", "sort_desc": f"{xs}.sort({d}, descending=True)",
                "topk": f"ember.topk({xs}, {k}, {d})", "topk_small": f"{xs}.topk({k}, dim={d}, largest=False)",
                "argsort": f"ember.argsort({xs}, {d}, descending={self.draw(st.booleans())})"}[f]
        t = self.emit(expr, usable=(f == "argsort"))
        if t is None or f == "argsort":
            return
        self.emit(self.pick([f"{t}.values", f"{t}[0]"]))
        if idx:
            self.emit(self.pick([f"{t}.indices", f"{t}[1]"]))

    def op_tri(self):
        x = self.operand(FLOAT + ("int64",))
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        opts = ["roll", "roll", "repeat", "masked_fill", "masked_fill"] + (["tril", "triu"] if nd >= 2 else [])
        f = self.pick(opts)
        if f in ("tril", "triu"):
            k = self.draw(st.integers(-3, 3))
            self.emit(self.pick([f"{x}.{f}({k})", f"ember.{f}({x}, diagonal={k})"]))
        elif f == "roll":
            if nd == 0 or self.draw(st.booleans()):
                self.emit(f"{x}.roll({self.draw(st.integers(-40, 40))})")     # flattened
            else:
                ds = self.dims(nd)
                sh = [self.draw(st.integers(-40, 40)) for _ in ds]
                if len(ds) == 1 and self.draw(st.booleans()):
                    self.emit(f"ember.roll({x}, {sh[0]}, {ds[0]})")
                else:
                    self.emit(f"{x}.roll({tuple(sh)}, {tuple(ds)})")
        elif f == "repeat":
            extra = self.draw(st.integers(0, 1)) if nd < 4 else 0
            reps = tuple(self.pick([1, 1, 2, 3]) for _ in range(nd + extra))
            if int(np.prod(shp)) * int(np.prod(reps)) > 40000 or not reps:
                return
            self.emit(f"{x}.repeat{reps}" if len(reps) > 1 else f"{x}.repeat({reps[0]})")
        else:
            is_int = self.dtype_of(x) == "int64"
            if self.draw(st.booleans()):
                m = self.partner(x, "bool")
            else:
                m = f"({x} > {0 if is_int else 0.3})"
            val = self.pick([-3, 0, 7] if is_int else [0.0, -1.5, 2.25])
            self.emit(f"{x}.masked_fill({m}, {val})")

    def op_arith(self):
        """Division with remainder, pow, rounding, lerp/addcmul on floats (integers: op_bits).
        Negative divisors on purpose: remainder takes the divisor's sign, fmod the dividend's,
        floor_divide rounds toward -inf."""
        x = self.operand()
        if x is None:
            return
        y = self.partner(x)
        if self.draw(st.booleans()):
            x, y = y, x
        fs = [
            "ember.remainder({x}, {y}.abs() + 0.5)", "ember.remainder({x}, -({y}.abs() + 0.5))",
            "ember.fmod({x}, {y}.abs() + 0.5)", "ember.fmod({x}, -0.75)", "({x} % 0.7)", "ember.remainder({x}, -1.25)",
            "ember.floor_divide({x}, {y}.abs() + 0.5)", "({x} // -0.6)",
            "ember.div({x}, {y}.abs() + 0.5, rounding_mode='trunc')",
            "ember.pow({x}.abs().clamp(max=4.0) + 0.5, {y}.clamp(-3.0, 3.0))", "({x} ** 2)", "({x}.clamp(-4.0, 4.0) ** 3)",
            "(({x}.abs() + 0.25) ** 0.5)", "(({x}.abs() + 0.25) ** -1.5)", "(2.0 ** {x}.clamp(-8.0, 8.0))",
            "ember.sign({x})", "ember.sign(ember.floor({x} + 0.125))", "ember.round({x} * 4.0)",
            "ember.round(ember.floor({x} * 3.0 + 0.125) * 0.5)", "ember.round({x}, decimals=1)",
            "ember.trunc({x} * 2.0 + 0.25)", "ember.trunc(ember.floor({x} * 4.0 + 0.125) * 0.5)",
            "ember.ceil({x} * 1.5)", "ember.frac({x} * 1.5 + 0.25)",
            "ember.lerp({x}, {y}, 0.3)", "ember.lerp({x}, {y}, ember.sigmoid({y}))", "{x}.lerp({y}, 1.5)",
            "ember.addcmul({x}, {y}, {y}, value=-0.5)", "ember.addcdiv({x}, {y}, {y}.abs() + 1.0, value=0.25)",
            "ember.hypot({x}, {y})", "ember.copysign({x}, {y})", "ember.expm1({x}.clamp(-4.0, 4.0))",
        ]
        if self.training:       # (floor_divide has no derivative: eager's backward raises)
            fs = [f for f in fs if "floor_divide" not in f and "//" not in f]
        self.emit(self.pick(fs).format(x=x, y=y))

    def op_nonfinite(self):
        """inf, -inf and nan made by x / (x - x) and (x - x) / (x - x) where x is finite: tests
        and nan_to_num give usable (finite) values; the non-finite values themselves go through
        one more op (nan propagation of max/clamp/relu/amax/argmax/sort...) into an extra output
        only (``self.sinks``), never into another op's operand."""
        x = self.operand()
        if x is None or self.training:
            return
        t = self.emit(f"ember.where({x} > 0.5, {x} / ({x} - {x}), ember.where({x} < -1.0, ({x} - {x}) / ({x} - {x}), "
                      f"ember.where({x} < -0.6, {x} / ({x} - {x}), {x})))", usable=False)
        if t is None:
            return
        nd = len(self.shape_of(t))
        if self.draw(st.booleans()):
            f = self.pick(["ember.nan_to_num({t}, nan=0.5, posinf=2.0, neginf=-3.0)", "ember.nan_to_num({t}).clamp(-1e4, 1e4)",
                           "ember.isnan({t})", "ember.isinf({t})", "ember.isfinite({t})", "({t} == {t})",
                           "ember.where(ember.isnan({t}), 0.25, {t}).clamp(-3.0, 3.0)", "ember.nan_to_num({t}, nan=-1.0, posinf=4.0)",
                           "ember.isnan({t}).any(-1)" if nd else "ember.isnan({t})", "ember.isposinf({t})"])
            self.emit(f.format(t=t))
            return
        d = self.draw(st.integers(-nd, nd - 1)) if nd else None
        opts = ["F.relu({t})", "{t}.clamp(-1.0, 1.0)", "ember.maximum({t}, {x})", "ember.minimum({x}, {t})",
                "ember.sigmoid({t})", "ember.tanh({t})", "ember.exp({t})", "({t} * 0.0)", "ember.where({t} > 0, {t}, {x})",
                "{t}.clamp(min=0.0)", "ember.sign({t})", "{t}"]
        if nd and self.shape_of(t)[d] > 0:
            opts += ["{t}.amax({d})", "{t}.amin({d})", "{t}.sum({d})", "{t}.argmax({d})", "{t}.argmin({d})",
                     "ember.sort({t}, {d}).values", "ember.sort({t}, {d}, descending=True).values", "{t}.max({d}).values",
                     "F.softmax({t}, {d})", "{t}.mean({d})", "{t}.cumsum({d})", "{t}.topk(1, {d}).values"]
        s = self.emit(self.pick(opts).format(t=t, x=x, d=d), usable=False)
        if s is not None:
            self.sinks.append(s)

    def op_bits(self):
        """Integer (int64/int32) bit ops, shifts, negative divisors, mixed int widths; float
        comparisons and bool any/all reductions."""
        ints = ("int64", "int32")
        if self.draw(st.integers(0, 3)) == 0:
            x = self.operand()
            if x is None:
                return
            y = self.partner(x)
            nd = len(self.shape_of(x))
            d = self.draw(st.integers(-nd, nd - 1)) if nd else None
            kd = self.draw(st.booleans())
            opts = ["ember.logical_and({x} > 0, {y} < 0.5)", "ember.logical_xor({x} > {y}, {x} < 0)",
                    "ember.logical_or({x} >= {y}, ember.logical_not({y} > 0.25))", "({x}.clamp(-0.5, 0.75) * 4.0 == ({x}.clamp(-0.5, 0.75) * 4.0).round())",
                    "({x} != {y})", "(({x} > {y}) & ({y} > -0.5))"]
            if nd:
                opts += ["({x} >= {y}).all({d}, keepdim={kd})", "({x} < {y}).any({d})", "({x} > 0.5).any({d}, keepdim={kd})",
                         "({x} > -1.5).all({d})", "({x} > 0).sum({d})"]
            opts += ["({x} > {y}).any()", "({x} > -1.9).all()"]
            self.emit(self.pick(opts).format(x=x, y=y, d=d, kd=kd))
            return
        x = self.operand(ints)
        if x is None or self.draw(st.integers(0, 4)) == 0:
            f = self.operand()
            if f is None:
                return
            dt = self.pick(ints)
            # (the offsets: see op_intbool)
            self.emit(self.pick([f"({f} * 16.0 + 0.25).to(ember.{dt})", f"ember.floor({f} * 4.0 + 0.125).to(ember.{dt})",
                                 f"({f} > 0).to(ember.{dt})", f"({f}.clamp(-1e6, 1e6) * 1000.0 + 0.25).to(ember.{dt})"]))
            return
        dt = self.dtype_of(x)
        y = self.partner(x, self.pick([dt, dt, "int64" if dt == "int32" else "int32"]))
        if self.draw(st.booleans()):
            x, y = y, x
        nd = len(self.shape_of(x))
        d = self.draw(st.integers(-nd, nd - 1)) if nd else None
        kd = self.draw(st.booleans())
        # (clamped before << and *: no signed overflow)
        opts = ["({x} | {y})", "({x} & {y})", "({x} ^ -{y})", "(~{x})", "ember.bitwise_or({x}, 12)", "({x} & -8)",
                "({x}.clamp(-1000, 1000) << 3)", "({x} >> 2)", "({x}.clamp(-1000, 1000) << ({y}.abs() % 5))",
                "({x} >> ({y}.abs() % 7))", "({x} // -3)", "({x} % -5)", "({x} // 4)", "({x} % 6)",
                "ember.fmod({x}, -({y}.abs() + 1))", "ember.remainder({x}, -({y}.abs() + 1))",
                "ember.floor_divide({x}, -({y}.abs() + 1))", "ember.div({x}, {y}.abs() + 1, rounding_mode='trunc')",
                "ember.div({x}, -({y}.abs() + 1), rounding_mode='floor')", "({x} / ({y}.abs() + 1))",
                "({x}.clamp(-1000, 1000) * {y}.clamp(-1000, 1000))", "({x} + {y})", "ember.sign({x})",
                "({x}.clamp(-1000, 1000) ** 2)", "{x}.abs()", "(-{x})", "({x} == {y})", "ember.maximum({x}, {y})",
                "ember.minimum({x}, {y}).to(ember.float32)", "{x}.to(ember.int64)", "{x}.to(ember.int32)"]
        if nd:
            opts += ["({x} >= {y}).all({d}, keepdim={kd})", "({x} != 0).any({d})", "{x}.sum({d})", "{x}.amin({d})",
                     "{x}.sum({d}, keepdim={kd})", "({x} & 1).to(ember.bool).any({d})"]
        self.emit(self.pick(opts).format(x=x, y=y, d=d, kd=kd))

    def op_maxdim(self):
        x = self.operand(FLOAT + ("int64",))
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        if nd == 0:
            return
        d = self.draw(st.integers(-nd, nd - 1))
        if shp[d] == 0:
            return
        kd = self.draw(st.booleans())
        # max/min(dim) return the first extreme index on ties (documented, like argmax): the
        # indices are compared with or without the ramp; training: always the ramp (the
        # gradient of a tie goes to one element, which is not specified)
        ramp = self.can_index(x, d) and (self.training or self.draw(st.booleans()))
        if self.training and not ramp:
            return
        xs = self.ramp(x, d) if ramp else x
        t = self.emit(self.pick([f"{xs}.max({d}, keepdim={kd})", f"ember.min({xs}, {d}, keepdim={kd})",
                                 f"ember.max({xs}, dim={d})", f"{xs}.min({d})"]), usable=False)
        if t is None:
            return
        self.emit(self.pick([f"{t}.values", f"{t}[0]"]))
        if self.draw(st.integers(0, 2)):
            self.emit(self.pick([f"{t}.indices", f"{t}[1]"]))

    def op_bmm(self):
        """bmm and matmul with broadcast batch dims (and a 1-d operand on either side)."""
        x = self.operand()
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        if nd == 0:
            return
        dt = self.dtype_of(x)
        n = self.pick(SIZES)
        if nd == 1:
            batch = tuple(self.pick([1, 2, 3]) for _ in range(self.draw(st.integers(0, 2))))
            w = self.new_input(batch + (shp[0], n), dt)
            self.emit(f"ember.matmul({x}, {w})")
            return
        if nd == 3 and self.draw(st.booleans()):
            w = self.new_input((shp[0], shp[2], n), dt)
            self.emit(f"ember.bmm({x}, {w})")
            return
        batch = list(shp[:-2])
        wb = [s if self.draw(st.integers(0, 2)) else 1 for s in batch]
        wb = wb[self.draw(st.integers(0, len(wb))):]
        if nd < 4 and len(wb) == len(batch) and self.draw(st.booleans()):
            wb = [self.pick([2, 3])] + wb
        wb = tuple(wb)
        f = self.pick(["right", "right", "left", "vec"])
        if f == "right":
            w = self.new_input(wb + (shp[-1], n), dt)
            self.emit(self.pick([f"ember.matmul({x}, {w})", f"({x} @ {w})"]))
        elif f == "left":
            w = self.new_input(wb + (n, shp[-2]), dt)
            self.emit(f"({w} @ {x})")
        else:
            w = self.new_input((shp[-1],), dt)
            self.emit(f"ember.matmul({x}, {w})")

    def op_sizes(self):
        """Sizes as values -- symbolic under dynamic=True: arithmetic on them as a tensor operand
        (possibly negative), arange bounds, narrow bounds and roll shifts computed from them."""
        x = self.operand()
        if x is None:
            return
        shp = self.shape_of(x)
        nd = len(shp)
        if nd == 0:
            return
        i = self.draw(st.integers(0, nd - 1))
        j = self.draw(st.integers(-nd, nd - 1))
        si, sj, sl = f"{x}.shape[{i}]", f"{x}.shape[{j}]", f"{x}.shape[-1]"
        fs = ["({x} / ({si} + 1))", "({x} + {si} % 4 - 2)", "({x} - {si} // 3)",
              "({x} * ember.arange({sl}, dtype={x}.dtype) - {sl})", "{x}.narrow({i}, {si} // 3, {si} - {si} // 3)",
              "{x}.roll(-({si} // 2) - 1, {i})", "{x}.roll({si} // 2 + 1, {i})",
              "({x} + ember.arange({sl} - 1, -1, -1, dtype={x}.dtype))",
              # negative size expressions as a tensor operand or arange start were 0 in compiled
              # code (the SymInt became ones(n).sum(); fixed in c7c20ab); topk's k from a
              # symbolic size reached the numpy fallback as a sympy expression (d9d6366)
              "({x} * ({si} - {sj}))", "({x} * ({si} - 10))", "(({si} - {sj}) - {x})",
              "({x} - ember.arange(-{sl}, 0, dtype={x}.dtype))", "{x}.clamp(max={si} - 10)",
              "{x}.topk({si} // 2 + 1, {i}).values"]
        f = self.pick(fs)
        self.emit(f.format(x=x, si=si, sj=sj, sl=sl, i=i))

    def op_half(self):
        """float16/bfloat16 pointwise ops on values cast from float32/64. Compiled code computes
        half precision in float and rounds once per stored value, eager rounds after every op:
        the half results are compared to a few half ulps (see _tol). They stay outputs (views
        of them too): an op on them in float32 would inherit that difference with float32's
        tolerance (so: no half arithmetic followed by a cast back or a comparison either)."""
        x = self.operand()
        if x is None:
            return
        hd = self.pick(HALF)
        y = self.partner(x)
        if self.draw(st.booleans()):
            x, y = y, x
        h, hy = f"{x}.to(ember.{hd})", f"{y}.to(ember.{hd})"
        f = self.pick([
            "({h} * {hy} + 0.5)", "(ember.tanh({h}) * {hy})", "(ember.exp({h}.clamp(-4, 4)) - {hy})",
            "(F.silu({h}) + ember.sigmoid({hy}))", "ember.where({h} > {hy}, {h}, {hy} * 0.5)",
            "({h} / ({hy}.abs() + 0.5))", "(ember.sqrt({h}.abs() + 0.25) * 2.0)", "ember.maximum({h}, {hy}).clamp(-1.0, 1.0)",
            "({h} - {hy}).abs()", "F.gelu({h} * 0.5)", "({h} > {hy})", "({h} + {y})", "{h}",
            "(ember.log1p({h}.abs()) * ember.cos({hy}))", "ember.floor({h} * 2.0)", "ember.lerp({h}, {hy}, 0.25)",
            "reduce", "reduce",
        ])
        nd = len(self.shape_of(x))
        if f == "reduce":
            # reductions and scans of one cast: eager accumulates in float too and rounds once
            if not nd:
                f = "({h} * 2.0)"
            else:
                d = self.draw(st.integers(-nd, nd - 1))
                f = self.pick([f"{{h}}.sum({d})", f"{{h}}.mean({d}, keepdim=True)", f"F.softmax({{h}}, {d})",
                               f"{{h}}.amax({d})", f"{{h}}.cumsum({d})", f"ember.sort({{h}}, {d}).values",
                               f"F.log_softmax({{h}}, {d})", f"{{h}}.sum()", f"{{h}}.argmax({d})",
                               f"ember.logsumexp({{h}}, {d})"])
        self.emit(f.format(h=h, hy=hy, y=y))

    # ------------------------------------------------------------------------
    def build(self, n_steps):
        shp = self.shape()
        dt = self.pick(["float32", "float32", "float32", "float64"])
        self.new_input(shp, dt)
        self.vals.append("a0")
        if self.draw(st.booleans()):
            k = self.draw(st.integers(0, len(shp)))
            n = self.new_input(shp[len(shp) - k:], self.pick(["int64", "bool", dt]))
            self.vals.append(n)
        for _ in range(n_steps):
            self.step()
        outs = [self.vals[-1]]
        extra = [v for v in self.vals[:-1] if v.startswith("v")]
        if extra and self.draw(st.booleans()):
            outs.append(self.pick(extra))
        self.outs = outs + self.sinks

    def source(self):
        args = ", ".join(s[0] for s in self.inputs)
        body = "\n".join("    " + ln for ln in self.lines)
        ret = ", ".join(getattr(self, "outs", []) or ["None"])
        return f"def f({args}):\n{body}\n    return ({ret},)\n"

    def specs(self):
        return list(self.inputs)


def _owns_memory(t):
    return t._data.base is None and t._data.flags.c_contiguous


def make_input(spec, rng):
    """A fresh tensor for an input spec, with the spec's layout (strides)."""
    name, shape, dtype, layout, kind = spec
    shape = tuple(shape)

    def data(shp):
        if kind.startswith("index:"):
            n = int(kind.split(":")[1])
            return rng.integers(0, n, size=shp).astype(np.int64)
        if dtype == "bool":
            return rng.random(shp) < 0.5
        if dtype in ("int64", "int32"):
            return rng.integers(-40, 40, size=shp).astype(dtype)
        a = rng.uniform(-2.0, 2.0, size=shp)
        return a.astype(dtype)

    t = None
    if layout == "contig" or len(shape) == 0:
        t = ember.from_numpy(np.array(data(shape), order="C"))
    elif layout == "transposed":
        nd = len(shape)
        perm = list(range(nd))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        if nd >= 3 and rng.random() < 0.5:
            perm = perm[::-1]
        base = ember.from_numpy(np.array(data(tuple(shape[p] for p in perm)), order="C"))
        inv = list(np.argsort(perm))
        t = base.permute(*[int(i) for i in inv])
    elif layout == "sliced":
        base = ember.from_numpy(np.array(data(shape[:-1] + (2 * shape[-1] + 1,)), order="C"))
        t = base[..., 1::2]
    elif layout == "rows":      # a C-contiguous view: rows of a bigger tensor
        base = ember.from_numpy(np.array(data((shape[0] + 3,) + tuple(shape[1:])), order="C"))
        t = base[1:1 + shape[0]]
    elif layout == "expanded":
        d = max(i for i, s in enumerate(shape) if s > 1)
        small = list(shape)
        small[d] = 1
        t = ember.from_numpy(np.array(data(tuple(small)), order="C")).expand(*shape)
    assert tuple(t.shape) == shape, (spec, t.shape)
    return t


# -- running and comparing ------------------------------------------------------------
def _tol(dtype):
    if dtype == np.float16:      # 2**-11 relative per rounding: eager rounds after each op
        return (4e-3, 4e-3)
    if dtype.name == "bfloat16":  # 2**-8
        return (3e-2, 3e-2)
    return (2e-4, 1e-5) if dtype == np.float32 else (1e-9, 1e-12)


def assert_close(got, want, what, tol_dtype=None):
    got = got.detach().numpy() if isinstance(got, ember.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, ember.Tensor) else np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    rtol, atol = _tol(got.dtype if tol_dtype is None else np.dtype(str(tol_dtype).replace("ember.", "")))
    got, want = got.astype(np.float64), want.astype(np.float64)
    fin = np.isfinite(want)
    scale = float(np.max(np.abs(want[fin]))) if fin.any() else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol * max(1.0, scale), equal_nan=True, err_msg=what)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [a for v in x for a in _flat(v)]
    return [x]


def run_program(src, specs, mode="infer", seed=0, calls=2):
    """Compile ``src`` and compare with eager on ``calls`` fresh draws of the inputs; then
    once more after ``dynamo.reset()``: a recompile that the FX-graph cache answers."""
    ns = {"ember": ember, "F": F}
    exec(src, ns)
    fn = ns["f"]
    ember.dynamo.reset()
    cfn = ember.compile(fn, backend="inductor", dynamic=(mode == "dynamic") or None)
    for call in range(calls + 1):
        if call == calls:
            ember.dynamo.reset()
            cfn = ember.compile(fn, backend="inductor", dynamic=(mode == "dynamic") or None)
        # the same draw twice: identical values and strides for the compiled and the eager run
        args = [make_input(s, r) for r in [np.random.default_rng((seed, call))] for s in specs]
        ref_args = [make_input(s, r) for r in [np.random.default_rng((seed, call))] for s in specs]
        rng = np.random.default_rng((seed, call, 1))
        if mode == "train":
            for a, r in zip(args, ref_args):
                if a.dtype in (ember.float32, ember.float64):
                    a.requires_grad_(True)
                    r.requires_grad_(True)
        got = _flat(cfn(*args))
        want = _flat(fn(*ref_args))
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, f"call {call}: output {i}")
        if call == 0:
            # a later call must not write into memory the first call returned (buffer pool)
            first = [(g, w.detach().clone() if isinstance(w, ember.Tensor) else w) for g, w in zip(got, want)]
        for i, (a, r) in enumerate(zip(args, ref_args)):
            assert_close(a.detach(), r.detach(), f"call {call}: input a{i} after the call")
        if mode == "train":
            # half-precision outputs are in the loss too (through a float32 cast): an input
            # that reaches only them has a gradient, zeros, from the compiled backward -- and
            # None in eager if it were left out. Their gradients went through half-precision
            # ops, computed in float by compiled code: compared to the half dtype's tolerance.
            halves = (ember.float16, ember.bfloat16)
            fouts = [(g, w) for g, w in zip(got, want) if w.dtype in (ember.float32, ember.float64) + halves
                     and w.requires_grad]
            if not fouts:
                continue
            gtol = None
            for _, w in fouts:
                if w.dtype in halves:
                    gtol = w.dtype if gtol is None or w.dtype is ember.bfloat16 else gtol
            wts = [ember.from_numpy(np.array(rng.uniform(-1, 1, size=tuple(w.shape)),
                                             dtype=np.float32 if w.dtype in halves else w.detach().numpy().dtype))
                   for _, w in fouts]

            def up(t):
                return t.to(ember.float32) if t.dtype in halves else t
            lg = sum(((up(g) * wt).sum() for (g, _), wt in zip(fouts, wts)), ember.tensor(0.0))
            lw = sum(((up(w) * wt).sum() for (_, w), wt in zip(fouts, wts)), ember.tensor(0.0))
            lg.backward()
            lw.backward()
            for i, (a, r) in enumerate(zip(args, ref_args)):
                if r.grad is not None or a.grad is not None:
                    assert a.grad is not None and r.grad is not None, f"grad of a{i}"
                    assert_close(a.grad, r.grad, f"call {call}: grad of a{i}", tol_dtype=gtol)
    for i, (g, w) in enumerate(first):
        assert_close(g, w, f"output {i} of the first call, after the later calls")
    # the comparison means something only if the program really ran compiled
    c = ember.dynamo.counters
    # (a program whose only line names an input, ``v0 = a1``, has nothing to compile)
    has_ops = any(ln.strip() and not re.fullmatch(r"\s*v\d+ = a\d+", ln) for ln in src.splitlines()[1:-1])
    assert (c["compiled"] >= 1 or not has_ops) and c["eager_fallback"] == 0 and c["internal_errors"] == 0 and \
        c["graph_breaks"] == 0, dict(c)


def _program(mode):
    @st.composite
    def prog(draw):
        data = draw(st.data())
        g = Gen(data, training=(mode == "train"), dynamic=(mode == "dynamic"))
        g.build(data.draw(st.integers(1, 6)))
        return g.source(), g.specs()
    return prog()


def _settings(n):
    return fuzz_settings(N_EXAMPLES if EXPLORE else n, SEED)


def _check(src, specs, mode):
    try:
        run_program(src, specs, mode)
    except Exception:
        print("---- failing program (mode=%s) ----\n%s\nspecs=%r" % (mode, src, specs))
        raise


@_settings(30)
@given(p=_program("infer"))
def test_fuzz_inference(p, strict_lowering):
    _check(*p, "infer")


@_settings(10)
@given(p=_program("dynamic"))
def test_fuzz_dynamic(p, strict_dynamic):
    _check(*p, "dynamic")


@_settings(10)
@given(p=_program("train"))
def test_fuzz_training(p, strict_lowering):
    _check(*p, "train")


# -- regression tests: the fuzzer's findings, minimised --------------------------------
def _rand(*shape, dtype=np.float64, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype))


def test_local_buffer_load_not_hoisted(strict_lowering):
    """Backward of sin(exp(clamp(x))): exp(clamp(x)) lives in a kernel-local one-element
    buffer written inside the loop; its load (index 0) looked loop-invariant and was
    hoisted before the loop nest, where the buffer is not declared (g++ failed; without
    debug_lowering the graph silently ran eagerly)."""
    x = _rand(2, 16)
    x.requires_grad_(True)
    xr = ember.from_numpy(x.detach().numpy().copy())
    xr.requires_grad_(True)

    def f(x):
        return ember.sin(ember.exp(x.clamp(-4, 4)))

    ember.dynamo.reset()
    ember.compile(f, backend="inductor")(x).sum().backward()
    f(xr).sum().backward()
    assert_close(x.grad, xr.grad, "grad")


@pytest.mark.parametrize("on_input", [True, False])
def test_inplace_on_full_slice_alias(on_input):
    """a[:, 0:] traces as alias(a), whose decomposition (prims.reshape) was not marked
    as a view of a: the in-place op on it reached neither a's write-back nor later
    reads of a (fixed in proxy_tensor._mark_decomposed_view)."""
    def f(a):
        v = a if on_input else a * 1.0
        v[:, 0:].mul_(0.5)
        return (v * 1.0,)

    a, ar = _rand(4, 3, dtype=np.float32), _rand(4, 3, dtype=np.float32)
    ember.dynamo.reset()
    out = ember.compile(f, backend="inductor")(a)
    ref = f(ar)
    assert_close(a, ar, "input")
    assert_close(out[0], ref[0], "output")


def test_loop_nest_buffer_load_not_hoisted(strict_lowering):
    """Backward of tanh(x.unsqueeze(-1)) for a 0-d x: the forward kernel writes tanh(x)
    into an output buffer in a one-iteration loop and the next stage (1 - t*t, saved for
    the backward) read it at index 0 -- a 'loop-invariant' load hoisted before the loop,
    i.e. before the write: uninitialised memory, a silently wrong gradient (0 here)."""
    x = ember.from_numpy(np.array(0.5, np.float32))
    x.requires_grad_(True)
    f = lambda x: ember.tanh(x.unsqueeze(-1))   # noqa: E731
    ember.dynamo.reset()
    ember.compile(f, backend="inductor")(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh(np.float32(0.5)) ** 2, rtol=1e-6)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_grad_of_view_output_of_transposed_input(backend):
    """aot regenerates an output that views an input with as_strided on the input; its
    backward assumed a contiguous input (an unsaved input's metadata has no strides)
    and sent the gradient to the wrong elements of a transposed input."""
    base = np.random.default_rng(0).uniform(-2, 2, (3, 4)).astype(np.float32)
    w = ember.from_numpy(np.random.default_rng(1).uniform(-1, 1, 3).astype(np.float32))

    def f(a):
        return (a.select(0, 0),)

    grads = []
    for compiled in (True, False):
        a = ember.from_numpy(base.copy()).T     # (4, 3), strides (1, 4)
        a.requires_grad_(True)
        ember.dynamo.reset()
        out = (ember.compile(f, backend=backend) if compiled else f)(a)
        (out[0] * w).sum().backward()
        grads.append(a.grad)
    assert_close(grads[0], grads[1], "grad")


@pytest.mark.parametrize("mode", ["infer", "dynamic"])
def test_view_taken_before_inplace_update_lowers(mode, strict_lowering):
    """A view taken before an in-place update of its base reads the new values; the
    functionalized graph regenerates it as ``as_strided`` of the updated (computed) value,
    which had no lowering ('as_strided of a computed (non-view) value': the whole graph
    fell back to eager). It is now written out and viewed."""
    src = ("def f(a0):\n    v = a0[1:6:2]\n    a0.clamp_(-0.3, 0.4)\n    return (v * 2.0,)\n")
    run_program(src, [("a0", (7,), "float32", "contig", "data")], mode)


def test_dynamic_slice_with_clamped_bound():
    """``x[1:6:2]`` of a symbolic-size x has size ``min(6, s0) // 2``: the wrapper printed
    sympy's ``Min(6, s0)``, a NameError on the first call (not a compile-time fallback)."""
    def f(a):
        return a[1:6:2] * 2.0

    ember.dynamo.reset()
    cf = ember.compile(f, backend="inductor", dynamic=True)
    for n in (7, 9, 4):
        a = _rand(n, dtype=np.float32, seed=n)
        assert_close(cf(a), f(a), f"size {n}")


def test_aot_cache_hit_with_bool_values(caplog, tmp_path, monkeypatch):
    """An aot-cache entry whose graph holds a bool value did not unpickle ("module
    'ember.types' has no attribute 'bool'"), was logged as corrupt and traced again:
    such graphs never hit the cache (fixed in 3aef146)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    a = _rand(3, 4, dtype=np.float32)

    def f(x):
        return ember.where(x > 0.1, x, -x)

    with caplog.at_level("WARNING", logger="ember.aot.cache"):
        for _ in range(2):
            ember.dynamo.reset()
            assert_close(ember.compile(f, backend="inductor")(a), f(a), "output")
    assert not [r for r in caplog.records if "corrupt" in r.getMessage()]


@pytest.mark.parametrize("case", ["slice", "whole", "view_before", "view_after", "sliced_input"])
def test_inplace_on_view_of_transposed_input(case, caplog):
    """An in-place op on (a view of) an input that is itself a view (a transposed or sliced
    argument). Functionalization first wrote into the input's hidden base, captured as a
    graph constant (a fake tensor at trace time): inductor read uninitialised memory and
    wrote garbage into the input. aot then refused such graphs and ran them eagerly. Now
    the write goes into the input itself (``put`` at the view's positions in it), views of
    it read after the write are gathered from its new value (``take``), and the input is
    written back: the graph compiles and matches eager."""
    def f(a):
        if case == "slice":
            a[:, 1:].add_(100.0)
        elif case == "whole":
            a.mul_(3.0)
        elif case == "view_before":
            row = a[1]
            a[:, 2:].mul_(-2.0)
            return (a * 1.0, row + 0.5)          # row was made before the write: sees it
        elif case == "view_after":
            a[:, ::2].add_(7.0)
            return (a * 1.0, a[2].exp())
        elif case == "sliced_input":
            a[2:, :2].sub_(a[:2, 1:3])
        return (a * 1.0,)

    def mk():
        x = np.random.default_rng(7).standard_normal((4, 9)).astype(np.float32)
        if case == "sliced_input":
            return ember.from_numpy(x)[:, 1::2]                     # (4, 4), strides (9, 2)
        return ember.from_numpy(x[:, :3].copy()).T                   # (3, 4), strides (1, 3)

    a, ar = mk(), mk()
    ember.dynamo.reset()
    with caplog.at_level("DEBUG"):
        out = ember.compile(f, backend="inductor")(a)
    assert not [r for r in caplog.records if "cannot be compiled" in r.getMessage()]
    ref = f(ar)
    assert_close(a, ar, "input")
    assert_close(a._base, ar._base, "the input's base")
    for o, r in zip(out, ref):
        assert_close(o, r, "output")


def test_inplace_on_views_of_one_tensor_passed_twice_runs_eagerly(caplog):
    """Two inputs that are views of one tensor (f(a[0], a[1:])): a write through one may have
    to show in the other, which functionalization cannot express -- the graph runs eagerly,
    logged, with eager's values."""
    def f(x, y):
        x.add_(1.0)
        return (y * 2.0,)

    base = ember.from_numpy(np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32))
    ref_base = base.clone()
    ember.dynamo.reset()
    with caplog.at_level("DEBUG"):
        out = ember.compile(f, backend="inductor")(base[0], base[:2])
    ref = f(ref_base[0], ref_base[:2])
    assert [r for r in caplog.records if "several inputs" in r.getMessage()]
    assert_close(base, ref_base, "base")
    assert_close(out[0], ref[0], "output")


def test_float32_sum_accumulates_accurately():
    """A float32 mean over 60k values: each SIMD lane summed its share in float, 1.7e-4
    relative off numpy's pairwise sum -- enough to flip ``x < x.mean()`` for values near
    the mean (found as a bool mismatch). Sums of float32 now accumulate in double."""
    a = ember.from_numpy(np.random.default_rng(0).uniform(-1, 3, (31, 31, 31, 2)).astype(np.float32))

    def f(x):
        return x.mean(), x.sum((0, 1, 2)), x.var()

    ember.dynamo.reset()
    got = ember.compile(f, backend="inductor")(a)
    x64 = a.numpy().astype(np.float64)
    for g, w in zip(got, (x64.mean(), x64.sum((0, 1, 2)), x64.var(ddof=1))):
        np.testing.assert_allclose(g.numpy().astype(np.float64), w, rtol=2e-6)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_grad_of_view_output_of_expanded_input(backend):
    """View outputs of an input with overlapping memory (an expanded leaf, stride 0) were
    regenerated with as_strided on the input, whose backward summed the gradients of the
    elements sharing memory into each of them; aot now keeps such outputs' values only."""
    def f(a):
        return (a.unsqueeze(0),)

    w = ember.from_numpy(np.array([[1.0, 2.0, 3.0]], np.float32))
    grads = []
    for compiled in (True, False):
        a = ember.from_numpy(np.array([0.5], np.float32)).expand(3)
        a.requires_grad_(True)
        ember.dynamo.reset()
        out = (ember.compile(f, backend=backend) if compiled else f)(a)
        (out[0] * w).sum().backward()
        grads.append(a.grad)
    assert_close(grads[1], ember.from_numpy(np.array([1.0, 2.0, 3.0], np.float32)), "eager grad")
    assert_close(grads[0], grads[1], "grad")


def test_as_strided_of_empty_value_lowers(strict_lowering):
    """A view regenerated (as_strided) from an updated 0-element input: the layout check
    compared strides that describe no element and refused the lowering."""
    src = "def f(a0):\n    a0.sub_(0.25)\n    return (a0.reshape((3, 0, 8)),)\n"
    run_program(src, [("a0", (3, 0, 7, 8), "float64", "sliced", "data")])


@pytest.mark.parametrize("index", [-15, 3])
def test_view_of_empty_extern_output(index):
    """select on a size-0 matmul output: the wrapper made the view with the ndarray
    constructor at the element's byte offset, which numpy refuses past the end of an empty
    buffer (ValueError at run time; found by the fuzzer with seed 1515)."""
    rng = np.random.default_rng(0)
    a = ember.from_numpy(rng.uniform(-2, 2, (0, 2, 1)))
    b = ember.from_numpy(rng.uniform(-2, 2, (1, 16)))

    def f(a, b):
        return (a @ b).select(2, index), (a @ b)[:, 1]

    ember.dynamo.reset()
    out = ember.compile(f, backend="inductor")(a, b)
    ref = f(a, b)
    for o, r in zip(out, ref):
        assert tuple(o.shape) == tuple(r.shape)


def test_cropping_pad_then_matmul_compiles_for_every_size(strict_dynamic):
    """A pad that crops rows and columns, read by a product, under ``dynamic=True``: an index
    held ``floor((s0*s1*s2 - 2*s0*s1 - 9*s0*s2 + 18*s0)/(s2 - 2))``, whose denominator divides
    the numerator as polynomials (it is ``s0*(s1 - 9)``), and the printer refused it, so the
    graph ran eagerly (found by the fuzzer with seed 5801)."""
    src = ("def f(a0, a1):\n    v0 = F.silu(a0)\n    v2 = F.pad(v0, (0, -2, -3, -6), value=0.0)\n"
           "    v4 = ember.matmul(v2, a1)\n    v2[2::2].sub_(0.25)\n    return (v4,)\n")
    run_program(src, [("a0", (9, 15, 5), "float32", "rows", "data"), ("a1", (3, 3), "float32", "contig", "data")],
                mode="dynamic")
