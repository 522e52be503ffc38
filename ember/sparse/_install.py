"""Where sparse tensors meet the rest of ember.

* ``SparseTensor`` gets its methods and Python operators (``s + s``,
  ``s * 2``, ``s @ d``; a dense left operand reaches them too, because Python
  asks a subclass's reflected operator first: ``d + s`` is ``s.__radd__(d)``).
* ``ember.Tensor`` (dense) gets the sparse conversions and accessors
  (``to_sparse``, ``to_sparse_csr``, ``to_dense``, ``sparse_mask``, ...).
* ``ember.mm`` / ``ember.matmul`` / ``ember.addmm`` send a sparse argument
  here (the routing is put inside the same function objects: ``_swap_code``).
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
        from .._state import STATE
        if self._requires_grad and STATE.grad_enabled:
            raise NotImplementedError(f"ember.sparse: in-place {fn_name}_ on a sparse tensor that requires "
                                      f"grad is not supported outside no_grad(); use the out-of-place {fn_name}")
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
    S.to_sparse_coo = lambda self: C.to_sparse(self)
    _install_conversions(S)
    S.zero_ = _zero_


def _install_conversions(cls):
    """``to_sparse_csr/csc(dense_dim=None)`` and ``to_sparse_bsr/bsc(blocksize, dense_dim=None)``."""
    def to_sparse_csr(self, dense_dim=None):
        return C.to_compressed(self, L.sparse_csr, None, dense_dim)

    def to_sparse_csc(self, dense_dim=None):
        return C.to_compressed(self, L.sparse_csc, None, dense_dim)

    def to_sparse_bsr(self, blocksize, dense_dim=None):
        if blocksize is None:
            raise TypeError("to_sparse_bsr(): argument 'blocksize' (position 1) must be tuple of ints, not NoneType")
        return C.to_compressed(self, L.sparse_bsr, blocksize, dense_dim)

    def to_sparse_bsc(self, blocksize, dense_dim=None):
        if blocksize is None:
            raise TypeError("to_sparse_bsc(): argument 'blocksize' (position 1) must be tuple of ints, not NoneType")
        return C.to_compressed(self, L.sparse_bsc, blocksize, dense_dim)

    cls.to_sparse_csr, cls.to_sparse_csc = to_sparse_csr, to_sparse_csc
    cls.to_sparse_bsr, cls.to_sparse_bsc = to_sparse_bsr, to_sparse_bsc


def _zero_(self):
    """Remove every specified element (PyTorch's ``zero_`` of a sparse tensor: nnz becomes 0)."""
    from ._tensor import Structure
    import numpy as np
    st = self._st
    if st.layout is O.COO:
        new = Structure(O.COO, st.shape, st.sdim, indices=np.zeros((st.sdim, 0), np.int64), coalesced=True)
    elif not st.is_plain_2d:
        nb = st.nbatch
        new = Structure(st.layout, st.shape, st.sdim, compressed=np.zeros_like(st.compressed),
                        plain=np.zeros(st.shape[:nb] + (0,), np.int64), nbatch=nb, blocksize=st.blocksize)
    else:
        outer = st.shape[0] if st.layout is O.CSR else st.shape[1]
        new = Structure(st.layout, st.shape, 2, compressed=np.zeros(outer + 1, np.int64),
                        plain=np.zeros(0, np.int64))
    from .. import zeros
    res = O.from_values(new, zeros(new.values_shape(), dtype=self.dtype))
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
    T.to_sparse_coo = lambda self: C.to_sparse(self)
    _install_conversions(T)
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
# ``ember.mm`` must stay the very function object the dispatcher generated (fx prints
# ``ember.mm`` for a node whose target *is* ember.mm, make_fx records ``op.binding``, dynamo and
# the graph caches key on it). So the routing is put *into* that function: its code is replaced
# by "if an argument is sparse: the sparse implementation, else: a copy of the old code", with
# the same signature (its defaults stay on the function object). The copy and the
# implementation are found through the function's globals under names no other code uses.
import inspect
import types

_SP = "{}.__class__ is _EmberSparseTensor"


def _real_params(fn):
    """The parameters of ``fn``'s own code (not of a function it wraps: a ``functools.wraps``
    wrapper reports the wrapped signature, but its code takes ``*args, **kwargs``)."""
    return list(inspect.signature(fn, follow_wrapped=False).parameters.values())


def _expr_for(params, name, position=None):
    """Source reading argument ``name`` (or, for a ``*args`` wrapper, ``args[position]``)
    inside code with ``params``; None when the code cannot see it."""
    for p in params:
        if p.name == name and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return name
    for p in params:
        if p.kind is p.VAR_POSITIONAL and position is not None:
            return f"({p.name}[{position}] if len({p.name}) > {position} else None)"
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            return f"{p.name}.get({name!r})"
    return None


def _swap_code(fn, cond, impl, tag):
    """Make ``fn`` run ``impl(...)`` when the source expression ``cond`` (over its parameters)
    is true, and its previous code otherwise."""
    name = fn.__name__
    inner = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    inner.__kwdefaults__ = fn.__kwdefaults__
    params, call, star = [], [], False
    for p in _real_params(fn):
        if p.kind is p.VAR_POSITIONAL:
            params.append("*" + p.name)
            call.append("*" + p.name)
            star = True
        elif p.kind is p.VAR_KEYWORD:
            params.append("**" + p.name)
            call.append("**" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            if not star:
                params.append("*")
                star = True
            params.append(p.name + ("=None" if p.default is not p.empty else ""))
            call.append(f"{p.name}={p.name}")
        else:
            params.append(p.name + ("=None" if p.default is not p.empty else ""))
            call.append(p.name)
    key = f"_ember_sparse_{tag}_{name}"
    free = fn.__code__.co_freevars
    # a closure's new code must have the same free variables: define it inside a function that
    # binds them, and read them once (a no-op) so the compiler keeps them
    src = "def _outer():\n" + "".join(f"    {v} = None\n" for v in free)
    src += (f"    def {name}({', '.join(params)}):\n"
            + (f"        ({', '.join(free)},)\n" if free else "")
            + f"        if {cond}:\n"
            f"            return {key}_impl({', '.join(call)})\n"
            f"        return {key}_inner({', '.join(call)})\n"
            f"    return {name}\n")
    ns = {}
    from ..ops import _binding_cache      # (a warm import execs the cached code: see ember/__init__)
    exec(_binding_cache.code(src, f"<ember.sparse routing of {name}>"), ns)
    code = ns["_outer"]().__code__
    if code.co_freevars != free:
        raise RuntimeError(f"ember.sparse: cannot route {name} (free variables {free} vs {code.co_freevars})")
    fn.__globals__[key + "_impl"] = impl
    fn.__globals__[key + "_inner"] = inner
    fn.__globals__["_EmberSparseTensor"] = SparseTensor
    fn.__code__ = code
    fn._ember_sparse_inner = inner




# ---------------------------------------------------------------------- layout= of the factories
def empty_sparse(shape, layout, dtype=None, requires_grad=False):
    """A sparse tensor of ``shape`` with no specified elements (``zeros(..., layout=sparse_*)``)."""
    import numpy as np
    from .. import zeros
    from ._tensor import Structure, from_values
    shape = tuple(int(n) for n in shape)
    if layout is L.sparse_coo:
        st = Structure(O.COO, shape, len(shape), indices=np.zeros((len(shape), 0), np.int64), coalesced=True)
    elif layout in (L.sparse_csr, L.sparse_csc) and len(shape) == 2:
        outer = shape[0] if layout is L.sparse_csr else shape[1]
        st = Structure(layout, shape, 2, compressed=np.zeros(outer + 1, np.int64), plain=np.zeros(0, np.int64))
    elif layout in (L.sparse_csr, L.sparse_csc):
        from ._compressed import empty
        out = empty(shape, layout, dtype)
        return out.requires_grad_(True) if requires_grad else out
    else:     # (PyTorch's message for zeros(..., layout=sparse_bsr); a blocksize cannot be passed)
        raise RuntimeError(f"zeros_sparse_compressed expected sparse compressed (non-block) tensor layout but got "
                           f"{'SparseBsr' if layout is L.sparse_bsr else 'SparseBsc'}")
    out = from_values(st, zeros((0,) + st.dense_shape, dtype=dtype))
    if requires_grad:
        out.requires_grad_(True)
    return out


def _size_of(args):
    if len(args) == 1 and not isinstance(args[0], int):
        return tuple(args[0])
    return tuple(args)


def _factory_impl(name, sparse_ok):
    """The sparse side of factory ``name`` (zeros, ones, randn, ...) given a sparse ``layout=``
    (or, for the ``_like`` ones, a sparse input): zeros/empty make an empty sparse tensor; the
    others raise, never returning a dense one."""
    def impl(*args, **kwargs):
        lay = L.as_layout(kwargs.get("layout"))
        if name.endswith("_like") and isinstance(args[0], SparseTensor) and lay is None:
            lay = args[0].layout
        if not sparse_ok:
            raise RuntimeError(f"{name}(...) is not implemented for sparse layout {lay}")
        if name.endswith("_like"):
            src = args[0]
            if isinstance(src, SparseTensor) and src.layout is lay and lay is not L.sparse_coo \
                    and not src._st.is_plain_2d:
                # batched / blocked / hybrid: an empty tensor of the same batch dims and blocksize
                from ._compressed import empty
                out = empty(src.shape, lay, kwargs.get("dtype") or src.dtype, src._st.blocksize,
                            dense_dim=src.dense_dim())
                return out.requires_grad_(True) if kwargs.get("requires_grad", False) else out
            return empty_sparse(src.shape, lay, kwargs.get("dtype") or src.dtype,
                                kwargs.get("requires_grad", False))
        return empty_sparse(_size_of(args), lay, kwargs.get("dtype"), kwargs.get("requires_grad", False))
    return impl


def install(ember_module):
    """Run once by ``ember/__init__``: methods, then the routing inside the top-level functions."""
    _install_sparse_methods()
    _install_dense_methods()
    g = ember_module.__dict__
    # ember.mm / matmul / addmm: routed by the dispatcher (SparseTensor.__ember_route__)
    for name, ok in (("zeros", True), ("empty", True), ("zeros_like", True), ("empty_like", True),
                     ("ones", False), ("full", False), ("rand", False), ("randn", False), ("randint", False),
                     ("ones_like", False), ("full_like", False), ("rand_like", False), ("randn_like", False),
                     ("arange", False), ("linspace", False), ("eye", False), ("randperm", False)):
        fn = g.get(name)
        if fn is None or hasattr(fn, "_ember_sparse_inner") or getattr(fn, "_ember_routes_layout", False) \
                or "layout" not in inspect.signature(fn).parameters:
            continue
        params = _real_params(fn)
        lay = _expr_for(params, "layout")
        if lay is None:
            continue
        cond = f'{lay} is not None and {lay} != "strided"'
        if name.endswith("_like"):
            first = _expr_for(params, next(iter(inspect.signature(fn).parameters)), 0)
            if first is None:
                continue
            cond = f"{_SP.format(first)} or ({cond})"
        _swap_code(fn, cond, _factory_impl(name, ok), "factory")
    g["smm"] = O.smm
    g["hspmm"] = O.hspmm
    g["spmm"] = O.mm
    g["sparse_coo_tensor"] = C.sparse_coo_tensor
    g["sparse_csr_tensor"] = C.sparse_csr_tensor
    g["sparse_csc_tensor"] = C.sparse_csc_tensor
    g["sparse_bsr_tensor"] = C.sparse_bsr_tensor
    g["sparse_bsc_tensor"] = C.sparse_bsc_tensor
    g["sparse_compressed_tensor"] = C.sparse_compressed_tensor
