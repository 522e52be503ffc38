"""``ember.utils.flop_counter.FlopCounterMode``: count the floating-point operations a block of
code runs, per module, forward and backward -- torch.utils.flop_counter for ember.

How. A dispatch mode (the stack the profiler and fake tensors use) sees every op below
autograd, the backward's included; the ops that dominate a model's arithmetic have a formula
(torch's: a multiply-add is 2 FLOPs, bias additions are not counted). A
:class:`~ember.utils.module_tracker.ModuleTracker` says which modules are running, and each
count goes to all of them and to ``"Global"``. On exit the counts are printed as a table
(``display=True``) with ``depth`` levels of modules.

Counted ops and the names they are reported under (torch's ATen names): ``aten.mm``,
``aten.addmm``, ``aten.bmm``, ``aten.baddbmm``, ``aten.addbmm``, ``aten.mv``, ``aten.addmv``,
``aten.dot``, ``aten.convolution`` and ``aten.convolution_backward`` (ember's two convolution
gradient ops under torch's one name). ember's ``scaled_dot_product_attention`` runs as two
``bmm``s, so it is counted -- the same number torch's attention formula gives -- under
``aten.bmm``. ``custom_mapping`` adds formulas: ``{name: fn(*shapes, out_shape=...) -> int}``
keyed by an ember op name or its ``aten.`` name.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional

from .._state import STATE
from ..tensor import Tensor
from .module_tracker import ModuleTracker

__all__ = ["FlopCounterMode", "register_flop_formula", "get_suffix_str", "convert_num_with_suffix"]


# ---------------------------------------------------------------------- formulas (on shapes)
def mm_flop(a, b, *rest, out_shape=None, **kw) -> int:
    m, k = a
    k2, n = b
    if k != k2:
        raise AssertionError(f"matmul: inner dimensions must match (k == k2), got {k} and {k2}")
    return m * n * 2 * k


def addmm_flop(bias, a, b, *rest, out_shape=None, **kw) -> int:
    return mm_flop(a, b)


def bmm_flop(a, b, *rest, out_shape=None, **kw) -> int:
    bs, m, k = a
    bs2, k2, n = b
    if bs != bs2 or k != k2:
        raise AssertionError(f"bmm: shapes {list(a)} and {list(b)} do not multiply")
    return bs * m * n * 2 * k


def baddbmm_flop(bias, a, b, *rest, out_shape=None, **kw) -> int:
    return bmm_flop(a, b)


def mv_flop(a, v, *rest, out_shape=None, **kw) -> int:
    return a[0] * a[1] * 2


def addmv_flop(bias, a, v, *rest, out_shape=None, **kw) -> int:
    return mv_flop(a, v)


def dot_flop(a, b, *rest, out_shape=None, **kw) -> int:
    return a[0] * 2


def conv_flop_count(x_shape, w_shape, out_shape, transposed=False) -> int:
    """torch's count: every output point (input point, transposed) of every batch element takes
    a filter's worth of multiply-adds per (output channel, input channel of the group) pair."""
    batch = x_shape[0]
    spatial = (x_shape if transposed else out_shape)[2:]
    c_out, c_in, *kernel = w_shape
    return math.prod(spatial) * math.prod(kernel) * batch * c_out * c_in * 2


def conv_flop(x, w, bias, stride, padding, dilation, transposed, *rest, out_shape=None, **kw) -> int:
    return conv_flop_count(x, w, out_shape, transposed=transposed)


def _t(shape):
    return [shape[1], shape[0]] + list(shape[2:])


def conv_input_grad_flop(grad, w, *rest, out_shape=None, **kw) -> int:
    """The input gradient is a transposed convolution of the output gradient by the weight."""
    return conv_flop_count(grad, w, out_shape, transposed=True)


def conv_weight_grad_flop(grad, x, *rest, out_shape=None, **kw) -> int:
    """The weight gradient convolves the input (batch and channels swapped) by the output
    gradient (torch's count, channel groups included in both factors)."""
    return conv_flop_count(_t(x), _t(grad), _t(out_shape), transposed=False)


# ember op name -> (reported name, formula)
flop_registry: Dict[str, tuple] = {
    "mm": ("aten.mm", mm_flop), "addmm": ("aten.addmm", addmm_flop), "bmm": ("aten.bmm", bmm_flop),
    "baddbmm": ("aten.baddbmm", baddbmm_flop), "addbmm": ("aten.addbmm", baddbmm_flop),
    "mv": ("aten.mv", mv_flop), "addmv": ("aten.addmv", addmv_flop), "dot": ("aten.dot", dot_flop),
    "convolution": ("aten.convolution", conv_flop),
    "_conv_input_grad": ("aten.convolution_backward", conv_input_grad_flop),
    "_conv_weight_grad": ("aten.convolution_backward", conv_weight_grad_flop),
}


def register_flop_formula(targets, get_raw=False):
    """Decorator: ``fn(*shapes, out_shape=...)`` counts the FLOPs of the ember op(s) ``targets``
    (names; ``aten.`` prefixes accepted). ``get_raw``: ``fn`` gets the arguments themselves."""
    names = [targets] if isinstance(targets, str) else list(targets)

    def register(fn):
        if get_raw:
            fn._get_raw = True
        for name in names:
            op = name[5:] if name.startswith("aten.") else name
            flop_registry[op] = (f"aten.{op}", fn)
        return fn
    return register


# ---------------------------------------------------------------------- numbers in the table
_SUFFIXES = ["", "K", "M", "B", "T"]


def get_suffix_str(number) -> str:
    """The unit a table of counts up to ``number`` is printed in (1.01B prints as 1010M)."""
    return _SUFFIXES[max(0, min(len(_SUFFIXES) - 1, (len(str(number)) - 2) // 3))]


def convert_num_with_suffix(number, suffix) -> str:
    return f"{number / 1000 ** _SUFFIXES.index(suffix):.3f}" + suffix


def convert_to_percent_str(num, denom) -> str:
    return "0%" if denom == 0 else f"{num / denom:.2%}"


def _shape_of(a):
    if isinstance(a, Tensor):
        return list(a.shape)
    if isinstance(a, (list, tuple)) and a and all(isinstance(x, Tensor) for x in a):
        return [list(x.shape) for x in a]
    return a


# ---------------------------------------------------------------------- the mode
class _CountingMode:
    """The dispatch mode: runs each op below autograd, then counts it."""

    def __init__(self, counter):
        self.counter = counter

    def __ember_dispatch__(self, op, args):
        from ..ops import registry
        out = registry.below_autograd(op, args)
        entry = self.counter._registry.get(op.name)
        if entry is not None:
            self.counter._count(entry, args, out)
        return out


class FlopCounterMode:
    """``with FlopCounterMode(display=True, depth=2) as fc: loss = model(x).sum(); loss.backward()``
    then ``fc.get_total_flops()``, ``fc.get_flop_counts()`` (module name -> {op name: FLOPs}) or
    ``fc.get_table()``. ``mods`` is accepted and ignored, as in torch (modules are found by
    global hooks)."""

    def __init__(self, mods=None, depth: int = 2, display: bool = True,
                 custom_mapping: Optional[Dict[Any, Callable]] = None):
        import warnings
        self.flop_counts: Dict[str, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.depth = depth
        self.display = display
        if mods is not None:
            warnings.warn("mods argument is not needed anymore, you can stop passing it", stacklevel=2)
        self._registry = dict(flop_registry)
        for key, fn in (custom_mapping or {}).items():
            name = getattr(key, "__name__", key) if not isinstance(key, str) else key
            op = name[5:] if name.startswith("aten.") else name
            self._registry[op] = (f"aten.{op}", fn)
        self.mod_tracker = ModuleTracker()
        self._mode = None

    def _count(self, entry, args, out):
        name, fn = entry
        if getattr(fn, "_get_raw", False):
            flops = fn(*args, out_val=out)
        else:
            flops = fn(*[_shape_of(a) for a in args], out_shape=_shape_of(out))
        for parent in set(self.mod_tracker.parents):
            self.flop_counts[parent][name] += flops

    def get_total_flops(self) -> int:
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> Dict[str, Dict[str, int]]:
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None) -> str:
        depth = self.depth if depth is None else depth
        if depth is None:
            depth = 999999
        total = self.get_total_flops()
        suffix = get_suffix_str(total)
        subsumed = False

        def rows_of(mod, level):
            nonlocal subsumed
            flops = sum(self.flop_counts[mod].values())
            subsumed |= flops >= total
            pad = " " * level
            rows = [[pad + mod, convert_num_with_suffix(flops, suffix), convert_to_percent_str(flops, total)]]
            for op, n in self.flop_counts[mod].items():
                rows.append([pad + " - " + str(op), convert_num_with_suffix(n, suffix),
                             convert_to_percent_str(n, total)])
            return rows

        rows: List[List[str]] = []
        for mod in sorted(self.flop_counts):
            if mod == "Global":
                continue
            level = mod.count(".") + 1
            if level <= depth:
                rows += rows_of(mod, level - 1)
        if "Global" in self.flop_counts and not subsumed:
            for r in rows:
                r[0] = " " + r[0]
            rows = rows_of("Global", 0) + rows
        if not rows:
            rows = [["Global", "0", "0%"]]
        return _table(["Module", "FLOP", "% Total"], rows, ("left", "right", "right"))

    def __enter__(self):
        self.flop_counts.clear()
        self.mod_tracker.__enter__()
        self._mode = _CountingMode(self)
        STATE.modes.insert(0, self._mode)      # below tracing/fake modes, as the profiler's recorder
        return self

    def __exit__(self, *exc):
        mode, self._mode = self._mode, None
        if mode in STATE.modes:
            STATE.modes.remove(mode)
        self.mod_tracker.__exit__()
        if self.display:
            print(self.get_table(self.depth))
        return False


def _table(header, rows, align) -> str:
    """A plain-text table in the layout of tabulate's "simple" format (torch prints with
    tabulate): columns two spaces apart, a dashed rule under the header."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        out = []
        for c, w, a in zip(cells, widths, align):
            out.append(str(c).ljust(w) if a == "left" else str(c).rjust(w))
        return "  ".join(out).rstrip()
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])
