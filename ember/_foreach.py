"""torch's ``_foreach_*`` list functions (``torch._foreach_add_(params, grads, alpha=-lr)``, ...),
written with ember's per-tensor ops: the out-of-place ones are differentiable through ordinary
autograd, and dynamo traces every one of them as plain Python (one op per list element).

Matching torch 2.13: out-of-place functions return a tuple of new tensors; in-place ones mutate
each tensor of ``self`` and return ``self`` itself. List checks and their messages are torch's
("Tensor list must have at least one tensor.", "Tensor lists must have the same number of tensors,
got 2 and 3", ...); per-element errors (shapes, dtypes, bool negation) come from the per-tensor op.

The simple unary and binary families are generated from the tables at the bottom."""
import numbers

from .tensor import Tensor

__all__ = []    # filled by _export


def _type_name(x):
    return type(x).__name__


def _tensors(fname, arg, pos, name):
    """``arg`` as a non-empty list/tuple of Tensors (torch's argument-parser messages)."""
    if not isinstance(arg, (list, tuple)):
        raise TypeError(f"{fname}(): argument '{name}' (position {pos + 1}) must be tuple of Tensors, "
                        f"not {_type_name(arg)}")
    for i, t in enumerate(arg):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument {pos}, but got {_type_name(t)}")
    if not arg:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return arg


def _same_length(self, other):
    if len(self) != len(other):
        raise RuntimeError(f"Tensor lists must have the same number of tensors, got {len(self)} and {len(other)}")


def _is_scalar(x):
    return isinstance(x, (numbers.Number, bool)) and not isinstance(x, Tensor)


def _scalar_list(self, scalars, pos):
    """``scalars`` (list of numbers, or a 1-d tensor of them) as one Python number per tensor of ``self``."""
    if isinstance(scalars, Tensor):
        if scalars.dim() != 1 or scalars.numel() != len(self):
            raise RuntimeError(f"Expected length of scalars to match input of length {len(self)} "
                               f"but got {scalars.numel()} instead.")
        scalars = scalars.tolist()
    if not all(_is_scalar(s) for s in scalars):
        _bad_scalar_list(scalars, pos)
    if len(scalars) != len(self):
        raise RuntimeError("Tensor list must have same number of elements as scalar list.")
    return list(scalars)


def _bad_scalar_list(scalars, pos):
    """torch's error for a list that is no list of numbers: its parser then reads the list as a
    tensor list, so the message names the first element that is no Tensor (element 0 of
    ``[1.0, "x"]``, a float), not the element that spoiled the scalar list."""
    i, s = next((i, s) for i, s in enumerate(scalars) if not isinstance(s, Tensor))
    raise TypeError(f"expected Tensor as element {i} in argument {pos}, but got {_type_name(s)}")


def _scalar_tensor(t):
    if t.dim() != 0:
        raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {t.dim()} dimensions and "
                           f"{t.numel()} elements.")
    return t


def _invalid(fname, *args, **kwargs):
    got = ", ".join([_type_name(a) for a in args] + [f"{k}={_type_name(v)}" for k, v in kwargs.items()])
    return TypeError(f"{fname}() received an invalid combination of arguments - got ({got})")


def _operands(fname, self, other, kw=None):
    """Per-element second operands: a tensor list (length-checked), a scalar list, one scalar, or one
    0-d tensor (repeated). Returns (operands, kind) with kind in "list", "scalars", "scalar", "tensor"."""
    if isinstance(other, Tensor):
        return [_scalar_tensor(other)] * len(self), "tensor"
    if isinstance(other, (list, tuple)):
        if other and isinstance(other[0], Tensor):
            _tensors(fname, other, 1, "other")
            _same_length(self, other)
            return list(other), "list"
        return _scalar_list(self, other, 1), "scalars"
    if _is_scalar(other):
        return [other] * len(self), "scalar"
    raise _invalid(fname, self, other, **(kw or {}))


def _make_unary(name, fn, inplace):
    fname = f"_foreach_{name}{'_' if inplace else ''}"

    def f(self):
        _tensors(fname, self, 0, "self")
        if inplace:
            for t in self:
                fn(t)
            return self
        return tuple(fn(t) for t in self)
    f.__name__ = f.__qualname__ = fname
    f.__doc__ = f"``{fname}(self)``: ``{name}`` of every tensor of ``self``" + (" in place." if inplace else ".")
    return f


def _make_binary(name, fn, inplace, alpha_ok):
    """``fn(t, o, alpha)`` applies the op to one element (``alpha`` is None when not given)."""
    fname = f"_foreach_{name}{'_' if inplace else ''}"

    def f(self, other, *, alpha=None):
        _tensors(fname, self, 0, "self")
        kw = {} if alpha is None else {"alpha": alpha}
        others, kind = _operands(fname, self, other, kw)
        if alpha is not None and (not alpha_ok or kind in ("scalar", "scalars")):
            raise _invalid(fname, self, other, **kw)    # torch has alpha= only with tensor operands
        if inplace:
            for t, o in zip(self, others):
                fn(t, o, alpha)
            return self
        return tuple(fn(t, o, alpha) for t, o in zip(self, others))
    f.__name__ = f.__qualname__ = fname
    f.__doc__ = (f"``{fname}(self, other{', *, alpha' if alpha_ok else ''})``: ``{name}`` of every tensor "
                 f"of ``self`` with a scalar, a list of scalars, a 0-d tensor or a list of tensors"
                 + (" in place." if inplace else "."))
    return f


def _alpha(alpha):
    return {} if alpha is None else {"alpha": alpha}


def _ember():
    import ember
    return ember


def _tables():
    E = _ember()
    # maximum/minimum with a number are clamp_min/clamp_max (torch.maximum takes tensors only)
    mx = lambda t, o, a: E.maximum(t, o) if isinstance(o, Tensor) else E.clamp_min(t, o)  # noqa: E731
    mn = lambda t, o, a: E.minimum(t, o) if isinstance(o, Tensor) else E.clamp_max(t, o)  # noqa: E731
    binary = {   # name: (out-of-place, in-place, accepts alpha)
        "add": (lambda t, o, a: E.add(t, o, **_alpha(a)), lambda t, o, a: t.add_(o, **_alpha(a)), True),
        "sub": (lambda t, o, a: E.sub(t, o, **_alpha(a)), lambda t, o, a: t.sub_(o, **_alpha(a)), True),
        "mul": (lambda t, o, a: E.mul(t, o), lambda t, o, a: t.mul_(o), False),
        "div": (lambda t, o, a: E.div(t, o), lambda t, o, a: t.div_(o), False),
        "maximum": (mx, lambda t, o, a: t.clamp_min_(o), False),
        "minimum": (mn, lambda t, o, a: t.clamp_max_(o), False),
        "clamp_min": (mx, lambda t, o, a: t.clamp_min_(o), False),
        "clamp_max": (mn, lambda t, o, a: t.clamp_max_(o), False),
    }
    # name: (out-of-place, in-place), looked up per call (ember may rebind its ops after import);
    # torch has only the in-place zero_
    unary = {name: (lambda t, n=name: getattr(E, n)(t), lambda t, n=name: getattr(t, n + "_")())
             for name in ("sqrt", "neg", "abs", "exp", "sign", "reciprocal")}
    unary["zero"] = (None, lambda t: t.zero_())
    return binary, unary


def _export(g):
    binary, unary = _tables()
    for name, (out, inp, alpha_ok) in binary.items():
        g[f"_foreach_{name}"] = _make_binary(name, out, False, alpha_ok)
        g[f"_foreach_{name}_"] = _make_binary(name, inp, True, alpha_ok)
    for name, (out, inp) in unary.items():
        if out is not None:
            g[f"_foreach_{name}"] = _make_unary(name, out, False)
        g[f"_foreach_{name}_"] = _make_unary(name, inp, True)
    __all__.extend(sorted(n for n in g if n.startswith("_foreach_")))


_UNSET = object()


def _pointwise3_values(fname, self, tensor1, tensor2, args, value, scalars):
    """One number per tensor of ``self`` from torch's three overloads: ``(..., Number value=1)``,
    ``(..., ScalarList scalars)`` and ``(..., Tensor scalars)``. A fourth positional argument is
    ``value`` when a number, else ``scalars``: a tensor there (0-d too) must be 1-d. ``value=``
    by keyword takes only a number (or a 0-d tensor), ``scalars=`` only a list or a tensor."""
    named = {k: v for k, v in (("value", value), ("scalars", scalars)) if v is not _UNSET}
    if len(args) + len(named) > 1:
        raise _invalid(fname, self, tensor1, tensor2, *args, **named)
    if args:
        arg, kind = args[0], ("value" if _is_scalar(args[0]) else "scalars")
    elif named:
        (kind, arg), = named.items()
    else:
        return [1] * len(self)
    if kind == "value":
        if _is_scalar(arg):
            return [arg] * len(self)
        if isinstance(arg, Tensor) and arg.dim() == 0:
            return [arg.item()] * len(self)
    elif isinstance(arg, Tensor):
        if arg.dim() != 1:
            raise RuntimeError(f"Expected packed scalar Tensor to be of dimension 1. Got {arg.dim()} instead.")
        return _scalar_list(self, arg, 3)
    elif isinstance(arg, (list, tuple)) and all(_is_scalar(v) for v in arg):
        return _scalar_list(self, arg, 3)
    raise _invalid(fname, self, tensor1, tensor2, *args, **named)


def _pointwise3(fname, self, tensor1, tensor2, args, value, scalars, op):
    _tensors(fname, self, 0, "self")
    _tensors(fname, tensor1, 1, "tensor1")
    _tensors(fname, tensor2, 2, "tensor2")
    _same_length(self, tensor1)
    _same_length(self, tensor2)
    values = _pointwise3_values(fname, self, tensor1, tensor2, args, value, scalars)
    return [op(t, a, b, v) for t, a, b, v in zip(self, tensor1, tensor2, values)]


def _make_pointwise3(name, sign):
    """``_foreach_addcmul``/``_foreach_addcdiv`` and their in-place forms: ``self[i] + value[i] *
    tensor1[i] (*, /) tensor2[i]``; the multiplier is a number (positional or ``value=``), or a list
    of numbers or a 1-d tensor (positional or ``scalars=``), as torch's overloads take it."""
    def out_of_place(self, tensor1, tensor2, *args, value=_UNSET, scalars=_UNSET):
        op = getattr(_ember(), name)
        return tuple(_pointwise3(f"_foreach_{name}", self, tensor1, tensor2, args, value, scalars,
                                 lambda t, a, b, v: op(t, a, b, value=v)))

    def in_place(self, tensor1, tensor2, *args, value=_UNSET, scalars=_UNSET):
        _pointwise3(f"_foreach_{name}_", self, tensor1, tensor2, args, value, scalars,
                    lambda t, a, b, v: getattr(t, name + "_")(a, b, value=v))
        return self

    for f, fname in ((out_of_place, f"_foreach_{name}"), (in_place, f"_foreach_{name}_")):
        f.__name__ = f.__qualname__ = fname
        f.__doc__ = f"``self[i] + value[i] * tensor1[i] {sign} tensor2[i]``" + (
            " in place: returns ``self``." if fname.endswith("_") else ".")
    return out_of_place, in_place


_foreach_addcmul, _foreach_addcmul_ = _make_pointwise3("addcmul", "*")
_foreach_addcdiv, _foreach_addcdiv_ = _make_pointwise3("addcdiv", "/")


def _lerp(fname, self, tensors1, weight, op):
    _tensors(fname, self, 0, "self")
    _tensors(fname, tensors1, 1, "tensors1")
    _same_length(self, tensors1)
    if isinstance(weight, (list, tuple)) and weight and isinstance(weight[0], Tensor):
        _tensors(fname, weight, 2, "weights")
        _same_length(self, weight)
        weights = list(weight)
    elif isinstance(weight, Tensor):
        weights = [_scalar_tensor(weight).item()] * len(self)
    elif isinstance(weight, (list, tuple)):
        weights = _scalar_list(self, weight, 2)
    elif _is_scalar(weight):
        weights = [weight] * len(self)
    else:
        raise _invalid(fname, self, tensors1, weight)
    return [op(t, e, w) for t, e, w in zip(self, tensors1, weights)]


def _foreach_lerp(self, tensors1, weight):
    """``self[i] + weight[i] * (tensors1[i] - self[i])``; ``weight`` a number, list of numbers or list of tensors."""
    E = _ember()
    return tuple(_lerp("_foreach_lerp", self, tensors1, weight, E.lerp))


def _foreach_lerp_(self, tensors1, weight):
    """In-place ``_foreach_lerp``: returns ``self``."""
    _lerp("_foreach_lerp_", self, tensors1, weight, lambda t, e, w: t.lerp_(e, w))
    return self


def _foreach_pow(self, exponent):
    """``self[i] ** exponent[i]`` (exponent a number, list of numbers, 0-d tensor or list of tensors), or
    ``self ** exponent[i]`` when ``self`` is a number and ``exponent`` the tensor list."""
    E = _ember()
    if _is_scalar(self):
        return tuple(E.pow(self, e) for e in _tensors("_foreach_pow", exponent, 1, "exponent"))
    _tensors("_foreach_pow", self, 0, "self")
    others, _ = _operands("_foreach_pow", self, exponent)
    return tuple(E.pow(t, e) for t, e in zip(self, others))


def _foreach_pow_(self, exponent):
    """In-place ``_foreach_pow``: returns ``self``."""
    _tensors("_foreach_pow_", self, 0, "self")
    others, _ = _operands("_foreach_pow_", self, exponent)
    for t, e in zip(self, others):
        t.pow_(e)
    return self


def _foreach_copy_(self, src, non_blocking=False):
    """``self[i].copy_(src[i])`` for every i (broadcasting and casting as ``Tensor.copy_``): returns ``self``."""
    _tensors("_foreach_copy_", self, 0, "self")
    _tensors("_foreach_copy_", src, 1, "src")
    _same_length(self, src)
    for t, s in zip(self, src):
        t.copy_(s, non_blocking=non_blocking)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    """``linalg.vector_norm`` of every tensor of ``self`` (0-d results), in ``dtype`` when given."""
    E = _ember()
    _tensors("_foreach_norm", self, 0, "self")
    if not _is_scalar(ord):
        raise TypeError(f"_foreach_norm(): argument 'ord' (position 2) must be Number, not {_type_name(ord)}")
    return tuple(E.linalg.vector_norm(t, ord, dtype=dtype) for t in self)


_export(globals())
