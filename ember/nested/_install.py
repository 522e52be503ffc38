"""Where nested tensors meet the rest of ember.

* ``NestedTensor`` gets its methods and Python operators (``nt + 1``,
  ``d * nt`` -- Python asks the subclass's reflected operator first).
* ``ember.Tensor`` gets ``is_nested = False`` and ``to_padded_tensor`` (which,
  as torch's, refuses a dense tensor).
* Ops called with a nested argument (``ember.sigmoid(nt)``, ``F.linear(nt, w)``,
  ``nt.mul_(2)``, ...) are routed by the dispatcher to ``NestedTensor.__ember_route__``
  (see ``_route``); only ``F.dropout`` and ``F.scaled_dot_product_attention``, which run
  Python on their input before any op, get the routing put inside their function objects,
  as ember.sparse does (``_swap_code``), so fx / dynamo still see the functions they know.

Any other op given a nested tensor reaches a dense kernel, whose read of the
tensor's storage raises naming the op (see ``NestedStorage``).
"""
from __future__ import annotations

import operator

from ..tensor import Tensor
from . import _create as C
from . import _ops as O
from ._tensor import NestedTensor

_UNARY = ("relu", "sigmoid", "tanh", "exp", "neg", "negative", "abs", "sin", "cos", "log", "sqrt", "rsqrt",
          "square", "exp2", "expm1", "log1p", "reciprocal", "sign", "floor", "ceil", "round", "trunc", "erf",
          "clamp", "clip", "pow", "logical_not", "isnan", "isinf", "nan_to_num", "float_power")


_OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
              "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
              "ge": operator.ge}


def _binary_fn(name):
    """``name`` on two operands of which either may be a number (``3 / t`` needs the operator)."""
    if name in _OPERATORS:
        return _OPERATORS[name]

    def fn(x, y):
        from .. import ops
        return getattr(ops.api, name)(x, y)
    return fn


def _binop(name, reflected=False):
    fn = _binary_fn(name)

    def method(self, other):
        return O.binary(name, fn, other, self) if reflected else O.binary(name, fn, self, other)
    method.__name__ = name
    return method


def _install_nested_methods():
    N = NestedTensor
    for name in _UNARY:
        setattr(N, name, O.unary(name))
    N.__neg__ = O.unary("neg")
    N.__abs__ = O.unary("abs")
    N.__pow__ = O.unary("pow")
    for name in ("add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                 "atan2", "remainder", "fmod"):
        setattr(N, name, _binop(name))
    N.__add__, N.__radd__ = _binop("add"), _binop("add", True)
    N.__sub__, N.__rsub__ = _binop("sub"), _binop("sub", True)
    N.__mul__, N.__rmul__ = _binop("mul"), _binop("mul", True)
    N.__truediv__, N.__rtruediv__ = _binop("div"), _binop("div", True)
    N.__eq__, N.__ne__ = _binop("eq"), _binop("ne")
    N.__lt__, N.__le__, N.__gt__, N.__ge__ = _binop("lt"), _binop("le"), _binop("gt"), _binop("ge")
    N.__hash__ = Tensor.__hash__
    N.multiply, N.subtract, N.divide, N.true_divide = N.mul, N.sub, N.div, N.div
    N.sigmoid = O.unary("sigmoid")
    N.softmax = lambda self, dim, dtype=None: O.softmax(self, dim, dtype)
    N.log_softmax = lambda self, dim, dtype=None: O.softmax(self, dim, dtype, log=True)
    N.sum = lambda self, dim=None, keepdim=False, *, dtype=None: O.reduce(self, "sum", dim, keepdim, dtype)
    N.mean = lambda self, dim=None, keepdim=False, *, dtype=None: O.reduce(self, "mean", dim, keepdim, dtype)
    N.transpose = O.transpose
    N.contiguous = O.contiguous
    N.reshape = lambda self, *shape: O.reshape(self, *shape)
    N.view = lambda self, *shape: O.reshape(self, *shape, view=True)
    N.matmul = N.__matmul__ = O.matmul
    N.__rmatmul__ = lambda self, other: O.matmul(other, self)
    N.bmm = O.bmm
    N.clone = lambda self, *, memory_format=None: O.contiguous(self) if self._perm is not None \
        else O.map_values(self, lambda v: v.clone())
    N.detach = lambda self: O.map_values(self, lambda v: v.detach())
    N.to_padded_tensor = C.to_padded_tensor
    N.to = _to
    N.double = lambda self, memory_format=None: O.to(self, _dt("float64"))
    N.float = lambda self, memory_format=None: O.to(self, _dt("float32"))
    N.half = lambda self, memory_format=None: O.to(self, _dt("float16"))
    N.type_as = lambda self, other: O.to(self, other.dtype)
    N.cpu = lambda self, memory_format=None: O.to(self, device="cpu")


def _dt(name):
    from .. import types
    return getattr(types, name)


def _to(self, *args, **kwargs):
    from ..tensor import to_target
    dtype, device = to_target(args, kwargs)
    return O.to(self, dtype, device)


def _dense_to_padded(self, padding, output_size=None):
    return C.to_padded_tensor(self, padding, output_size)


def _install_dense_methods():
    Tensor.is_nested = False
    Tensor.to_padded_tensor = _dense_to_padded


def _first_nested(*names):
    return " or ".join("{}.__class__ is _EmberNestedTensor".format(n) for n in names)


def _route(fn, cond, impl):
    """Put "if ``cond``: ``impl(...)``" into ``fn``'s own code (ember.sparse's mechanism)."""
    from ..sparse._install import _swap_code
    if getattr(fn, "_ember_nested_routed", False):
        return
    had = fn.__dict__.get("_ember_sparse_inner", None)
    fn.__globals__["_EmberNestedTensor"] = NestedTensor
    _swap_code(fn, cond, impl, "nested")
    if had is not None:
        fn._ember_sparse_inner = had
    else:
        del fn._ember_sparse_inner
    fn._ember_nested_routed = True


def install(ember_module):
    """Run once by ``ember/__init__``: the methods now; the routing of ``nn.functional``'s
    functions when that module loads (``import ember`` does not import ``ember.nn``: routing
    them here pulled ~65 modules into every import)."""
    import sys
    _install_nested_methods()
    _install_dense_methods()
    F = sys.modules.get("ember.nn.functional")
    if F is not None:
        route_functional(F)


def route_functional(F):
    """Route nested first arguments of F.linear/softmax/... (called at the end of
    ``ember/nn/functional.py``, or by :func:`install` when it is already loaded)."""
    from ..ops import _binding_cache
    with _binding_cache.group("nested_routing"):
        _route_functional(F)


def _route_functional(F):
    # Every other nn.functional function (linear, layer_norm, softmax, relu, gelu, silu, ...)
    # reaches an ember op before running any Python that would misread a nested tensor, and
    # that op's dispatcher routes it (NestedTensor.__ember_route__, see _route): no swap there.
    # These two run Python on their input first, so the nested branch must come before it:
    # F.dropout builds a dense Bernoulli mask from ``input.shape`` (a jagged size holds the
    # symbolic ragged size, and a strided one has none); F.scaled_dot_product_attention reads
    # sizes and builds the scaled scores / masks in Python before its first op.
    routes = [
        (F.dropout, "input", O.dropout),
        (F.scaled_dot_product_attention, "query", O.scaled_dot_product_attention),
    ]
    for fn, arg, impl in routes:
        if fn is not None:
            _route(fn, _first_nested(arg), impl)
