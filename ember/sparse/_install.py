"""Where sparse tensors meet the rest of ember.

* ``SparseTensor`` gets its methods and Python operators (``s + s``,
  ``s * 2``, ``s @ d``; a dense left operand reaches them too, because Python
  asks a subclass's reflected operator first: ``d + s`` is ``s.__radd__(d)``).
* ``ember.Tensor`` (dense) gets the sparse conversions and accessors
  (``to_sparse``, ``to_sparse_csr``, ``to_dense``, ``sparse_mask``, ...).
* A few top-level functions (``ember.mm``, ``ember.matmul``, ``ember.add``,
  ...) become wrappers that route calls with a sparse argument here and
  everything else to the dispatcher's binding unchanged (same name, same
  ``_ember_op``, so the compiler stack sees the op it always saw).
* The factories honour ``layout=``: ``zeros`` / ``empty`` (and ``zeros_like``
  / ``empty_like``, also of a sparse tensor) make an empty sparse tensor, the
  others raise for a sparse layout instead of silently making a dense one.

Any other op given a sparse tensor reaches a dense kernel, whose read of the
tensor's storage raises (see _storage.py).
"""
from __future__ import annotations

from .. import _layout as L
from ..tensor import Tensor
from . import _convert as C
from . import _ops as O
from ._tensor import SparseTensor

# ---------------------------------------------------------------------- SparseTensor methods
_ZERO_PRESERVING = ("abs", "neg", "negative", "sin", "tan", "tanh", "sinh", "asin", "arcsin", "atan",
                    "arctan", "asinh", "arcsinh", "atanh", "arctanh", "sqrt", "expm1", "log1p", "relu",
                    "sign", "sgn", "square", "trunc", "fix", "floor", "ceil", "round", "frac",
                    "deg2rad", "rad2deg", "signbit", "isnan", "isinf", "nan_to_num", "conj_physical",
                    "erf", "erfinv")


def _unary(name):
    def method(self, *args, **kwargs):
        if name not in _LINEAR and self._st.layout is O.COO:
            self = O.coalesce(self)    # f(a) + f(b) != f(a + b): duplicates must add up first
        return O.map_values(self, lambda v: getattr(v, name)(*args, **kwargs))
    method.__name__ = name
    method.__doc__ = f"``{name}`` of the values (it maps 0 to 0, so the result keeps the structure)."
    return method


_LINEAR = ("neg", "negative", "conj_physical")


def _inplace_from(fn_name, fn):
    """An in-place variant: the result's structure and values replace ``self``'s."""
    def method(self, *args, **kwargs):
        if self._requires_grad:
            raise NotImplementedError(f"ember.sparse: in-place {fn_name}_ on a sparse tensor that requires "
                                      f"grad is not supported; use the out-of-place {fn_name}")
        res = fn(self, *args, **kwargs)
        if not isinstance(res, SparseTensor) or res.layout is not self.layout:
            raise RuntimeError(f"{fn_name}_: the result is not a {self.layout} tensor")
        if res.dtype is not self.dtype:
            res = res.to(self.dtype)
        self._st, self._vals, self._data = res._st, res._vals, res._data
        self._bump_version()
        return self
    method.__name__ = fn_name + "_"
    return method


def _install_sparse_methods():
    S = SparseTensor
    for name in _ZERO_PRESERVING:
        setattr(S, name, _unary(name))
        setattr(S, name + "_", _inplace_from(name, _unary(name)))
    S.__neg__ = _unary("neg")
    S.__abs__ = _unary("abs")

    def add(self, other, *, alpha=1):
        return O.add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return O.sub(self, other, alpha=alpha)

    S.add, S.sub, S.mul, S.div = add, sub, (lambda self, other: O.mul(self, other)), \
        (lambda self, other, *, rounding_mode=None: O.div(self, other, rounding_mode=rounding_mode))
    S.add_, S.sub_, S.mul_, S.div_ = (_inplace_from("add", add), _inplace_from("sub", sub),
                                      _inplace_from("mul", S.mul), _inplace_from("div", S.div))
    S.__add__ = lambda self, other: O.add(self, other)
    S.__radd__ = lambda self, other: O.add(other, self)
    S.__iadd__ = S.add_
    S.__sub__ = lambda self, other: O.sub(self, other)
    S.__rsub__ = lambda self, other: O.sub(other, self)
    S.__isub__ = S.sub_
    S.__mul__ = S.__rmul__ = lambda self, other: O.mul(self, other)
    S.__imul__ = S.mul_
    S.__truediv__ = S.div
    S.__itruediv__ = S.div_
    S.pow = S.__pow__ = lambda self, exponent: O.pow(self, exponent)
    S.multiply, S.subtract, S.divide, S.true_divide = S.mul, S.sub, S.div, S.div
    S.mm = lambda self, mat2: O.mm(self, mat2)
    S.matmul = S.__matmul__ = lambda self, other: O.matmul(self, other)
    S.__rmatmul__ = lambda self, other: O.matmul(other, self)
    S.smm = lambda self, mat2: O.smm(self, mat2)
    S.hspmm = lambda self, mat2: O.hspmm(self, mat2)
    S.sum = lambda self, dim=None, keepdim=False, *, dtype=None: O.sum(self, dim, keepdim, dtype)
    S.softmax = lambda self, dim, dtype=None: O.softmax(self, dim, dtype)
    S.log_softmax = lambda self, dim, dtype=None: O.log_softmax(self, dim, dtype)
    S.t = O.t
    S.transpose = O.transpose
    S.coalesce = O.coalesce
    S.to_dense = O.to_dense
    S.sparse_mask = O.sparse_mask
    S.to_sparse = C.to_sparse
    S.to_sparse_coo = C.to_coo
    S.to_sparse_csr = lambda self, dense_dim=None: C.to_sparse(self, layout=L.sparse_csr, dense_dim=dense_dim)
    S.to_sparse_csc = lambda self, dense_dim=None: C.to_sparse(self, layout=L.sparse_csc, dense_dim=dense_dim)
    S.to_sparse_bsr = S.to_sparse_bsc = lambda self, *a, **k: C._blocked(L.sparse_bsr)
    S.zero_ = _zero_


def _zero_(self):
    """Remove every specified element (PyTorch's ``zero_`` of a sparse tensor: nnz becomes 0)."""
    from ._tensor import Structure
    import numpy as np
    st = self._st
    if st.layout is O.COO:
        new = Structure(O.COO, st.shape, st.sdim, indices=np.zeros((st.sdim, 0), np.int64), coalesced=True)
    else:
        outer = st.shape[0] if st.layout is O.CSR else st.shape[1]
        new = Structure(st.layout, st.shape, 2, compressed=np.zeros(outer + 1, np.int64),
                        plain=np.zeros(0, np.int64))
    from .. import zeros
    res = O.from_values(new, zeros((0,) + st.dense_shape, dtype=self.dtype))
    self._st, self._vals, self._data = res._st, res._vals, res._data
    self._bump_version()
    return self


# ---------------------------------------------------------------------- dense Tensor methods
def _strided_only(name, kind="coordinate"):
    word = {"coordinate": "sparse coordinate tensor layout",
            "csr": "sparse row compressed tensor layout",
            "csc": "sparse column compressed tensor layout",
            "any": "sparse tensor layout"}[kind]

    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected {word} but got Strided")
    method.__name__ = name
    return method


def _install_dense_methods():
    T = Tensor
    T.is_sparse_csr = False
    T.to_dense = O.to_dense
    T.to_sparse = C.to_sparse
    T.to_sparse_coo = lambda self: C.dense_to_coo(self)
    T.to_sparse_csr = lambda self, dense_dim=None: C.to_sparse(self, layout=L.sparse_csr, dense_dim=dense_dim)
    T.to_sparse_csc = lambda self, dense_dim=None: C.to_sparse(self, layout=L.sparse_csc, dense_dim=dense_dim)
    T.to_sparse_bsr = T.to_sparse_bsc = lambda self, *a, **k: C._blocked(L.sparse_bsr)
    T.sparse_mask = O.sparse_mask
    T.sparse_dim = lambda self: 0
    T.dense_dim = lambda self: self.ndim
    for name in ("coalesce", "is_coalesced", "indices", "_indices"):
        setattr(T, name, _strided_only(name))
    for name in ("values", "_values"):
        setattr(T, name, _strided_only(name, "any"))
    for name in ("crow_indices", "col_indices"):
        setattr(T, name, _strided_only(name, "csr"))
    for name in ("ccol_indices", "row_indices"):
        setattr(T, name, _strided_only(name, "csc"))

    def _nnz(self):
        raise NotImplementedError("Could not run 'aten::_nnz' with arguments from the 'CPU' backend "
                                  "(a strided tensor has no nnz).")
    T._nnz = _nnz


# ---------------------------------------------------------------------- top-level functions
def _sparse_in(args, kwargs):
    for a in args:
        if a.__class__ is SparseTensor:
            return True
    if kwargs:
        for a in kwargs.values():
            if a.__class__ is SparseTensor:
                return True
    return False


def _route(orig, impl):
    """``orig`` (a dispatcher binding) that sends calls with a sparse argument to ``impl``."""
    def fn(*args, **kwargs):
        if _sparse_in(args, kwargs):
            return impl(*args, **kwargs)
        return orig(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = orig.__name__
    fn.__module__ = orig.__module__
    fn.__doc__ = orig.__doc__
    fn.__wrapped__ = orig
    op = getattr(orig, "_ember_op", None)
    if op is not None:
        fn._ember_op = op
    return fn


def _sum_impl(input, dim=None, keepdim=False, *, dtype=None, out=None):
    return O.sum(input, dim, keepdim, dtype)


def _addmm_impl(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    return O.addmm(input, mat1, mat2, beta=beta, alpha=alpha)


def _add_impl(input, other, *, alpha=1, out=None):
    return O.add(input, other, alpha=alpha)


def _sub_impl(input, other, *, alpha=1, out=None):
    return O.sub(input, other, alpha=alpha)


_ROUTES = {
    "mm": lambda input, mat2, *, out=None: O.mm(input, mat2),
    "matmul": lambda input, other, *, out=None: O.matmul(input, other),
    "addmm": _addmm_impl,
    "add": _add_impl,
    "sub": _sub_impl,
    "mul": lambda input, other, *, out=None: O.mul(input, other),
    "div": lambda input, other, *, rounding_mode=None, out=None: O.div(input, other, rounding_mode=rounding_mode),
    "neg": lambda input, *, out=None: O.map_values(input, lambda v: v.neg()),
    "abs": lambda input, *, out=None: input.abs(),
    "sum": _sum_impl,
    "t": lambda input: O.t(input),
    "transpose": lambda input, dim0, dim1: O.transpose(input, dim0, dim1),
    "softmax": lambda input, dim, dtype=None, **k: O.softmax(input, dim, dtype),
    "log_softmax": lambda input, dim, dtype=None, **k: O.log_softmax(input, dim, dtype),
}


# ---------------------------------------------------------------------- layout= of the factories
def empty_sparse(shape, layout, dtype=None, requires_grad=False):
    """A sparse tensor of ``shape`` with no specified elements (``zeros(..., layout=sparse_*)``)."""
    import numpy as np
    from .. import zeros
    from ._tensor import Structure, from_values
    shape = tuple(int(n) for n in shape)
    if layout is L.sparse_coo:
        st = Structure(O.COO, shape, len(shape), indices=np.zeros((len(shape), 0), np.int64), coalesced=True)
    elif layout in (L.sparse_csr, L.sparse_csc):
        if len(shape) != 2:
            raise NotImplementedError(f"ember.sparse: {layout} tensors are 2-d only, got shape {list(shape)}")
        outer = shape[0] if layout is L.sparse_csr else shape[1]
        st = Structure(layout, shape, 2, compressed=np.zeros(outer + 1, np.int64), plain=np.zeros(0, np.int64))
    else:
        C._blocked(layout)
    out = from_values(st, zeros((0,) + st.dense_shape, dtype=dtype))
    if requires_grad:
        out.requires_grad_(True)
    return out


def _size_of(args):
    if len(args) == 1 and not isinstance(args[0], int):
        return tuple(args[0])
    return tuple(args)


def _factory(orig, sparse_ok):
    """``orig`` (zeros, ones, randn, ...) that honours ``layout=``: zeros/empty make an empty
    sparse tensor; the others raise for a sparse layout (PyTorch's errors), never a dense one."""
    name = orig.__name__

    def fn(*args, **kwargs):
        lay = kwargs.get("layout")
        if lay is None or lay == "strided":
            return orig(*args, **kwargs)
        lay = L.as_layout(lay)
        if not sparse_ok:
            raise RuntimeError(f"{name}(...) is not implemented for sparse layout {lay}")
        if name.endswith("_like"):
            return empty_sparse(args[0].shape, lay, kwargs.get("dtype") or args[0].dtype,
                                kwargs.get("requires_grad", False))
        return empty_sparse(_size_of(args), lay, kwargs.get("dtype"), kwargs.get("requires_grad", False))
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = orig.__module__
    fn.__doc__ = orig.__doc__
    fn.__wrapped__ = orig
    return fn


def _like_sparse(input, *args, dtype=None, device=None, requires_grad=False, layout=None, memory_format=None):
    """zeros_like / empty_like of a sparse tensor: an empty one of its layout (PyTorch's)."""
    return empty_sparse(input.shape, L.as_layout(layout) or input.layout, dtype or input.dtype, requires_grad)


def install(ember_module):
    """Run once by ``ember/__init__``: methods, then the routed top-level functions."""
    _install_sparse_methods()
    _install_dense_methods()
    g = ember_module.__dict__
    for name, impl in _ROUTES.items():
        orig = g.get(name)
        if orig is None or getattr(orig, "__wrapped__", None) is not None:
            continue
        g[name] = _route(orig, impl)
    for name, ok in (("zeros", True), ("empty", True), ("zeros_like", True), ("empty_like", True),
                     ("ones", False), ("full", False), ("rand", False), ("randn", False), ("randint", False),
                     ("ones_like", False), ("full_like", False), ("rand_like", False), ("randn_like", False),
                     ("arange", False), ("linspace", False), ("eye", False), ("randperm", False)):
        orig = g.get(name)
        if orig is None or getattr(orig, "__wrapped__", None) is not None:
            continue
        g[name] = _factory(orig, ok)
        if name in ("zeros_like", "empty_like"):
            g[name] = _route(g[name], _like_sparse)
    g["smm"] = O.smm
    g["hspmm"] = O.hspmm
    g["spmm"] = O.mm
    g["sparse_coo_tensor"] = C.sparse_coo_tensor
    g["sparse_csr_tensor"] = C.sparse_csr_tensor
    g["sparse_csc_tensor"] = C.sparse_csc_tensor
    g["sparse_bsr_tensor"] = C.sparse_bsr_tensor
    g["sparse_bsc_tensor"] = C.sparse_bsc_tensor
    g["sparse_compressed_tensor"] = C.sparse_compressed_tensor
