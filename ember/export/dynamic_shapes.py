"""``Dim`` and the ``dynamic_shapes=`` argument of ``ember.export.export`` (torch's API).

A spec says, per tensor input and dimension, whether the size is traced as a symbol:

* ``Dim("batch", min=2, max=64)``: dynamic over that range (``Dim("b")`` is ``[0, int_oo]``,
  as torch's: sizes 0 and 1 are accepted at call time); the export fails ("Constraints
  violated") if the program specialises it or narrows its range (a branch on it), and names
  the fix. The same ``Dim`` on several dims declares them equal.
* ``2 * dx``, ``dx + 1`` (derived Dims): increasing integer-linear functions of a named Dim,
  traced as that expression of its symbol (the root must also size some input dimension).
* ``Dim.AUTO``: dynamic unless the program decides otherwise (specialised silently, the range
  narrowed to what the guards admit), ``[2, int_oo]`` before that.
* ``Dim.DYNAMIC``: dynamic, and an error if specialised (a narrowed range is accepted).
* ``Dim.AUTO(min=, max=)`` / ``Dim.DYNAMIC(min=, max=)``: the hint with its range clamped.
* ``Dim.STATIC`` or ``None``: the example's size.

Specs mirror the inputs: a dict keyed by argument name (or a tuple/list in argument order),
and per tensor a dict ``{dim: spec}`` or a tuple/list with one entry per dim."""
from __future__ import annotations

import builtins
import enum
import sys
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

__all__ = ["Dim", "ValueRange", "int_oo", "Constraint"]

int_oo = sys.maxsize - 1      # torch's upper bound of an unbounded Dim
builtins_max = builtins.max   # Dim's keyword arguments shadow min/max below


class _DimHintType(enum.Enum):
    AUTO = "AUTO"
    STATIC = "STATIC"
    DYNAMIC = "DYNAMIC"


class _DimHint:
    """``Dim.AUTO`` / ``Dim.DYNAMIC`` / ``Dim.STATIC``, optionally bounded: ``Dim.AUTO(min=4,
    max=64)`` (torch's factory call; a bounded hint cannot be called again). The bounds clamp
    the range export infers; unlike a named Dim's they are not a promise the program must keep."""
    __slots__ = ("type", "min", "max", "_factory")

    def __init__(self, type_: _DimHintType, min: Optional[int] = None, max: Optional[int] = None,
                 _factory: bool = True):
        self.type = type_
        self.min = min
        self.max = max
        self._factory = _factory

    def __call__(self, min=None, max=None) -> "_DimHint":
        if not self._factory:
            raise TypeError(f"'{type(self)}' object is not callable")
        for label, v in (("min", min), ("max", max)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise TypeError(f"Dim.{self.type.name}({label}=...): expected an int or None, got {v!r}")
        if min is not None and min < 0:
            raise AssertionError(f"min must be non-negative, got {min}")
        if max is not None and max < 0:
            raise AssertionError(f"max must be non-negative, got {max}")
        if min is not None and max is not None and min > max:
            raise AssertionError(f"min must be <= max, got min={min}, max={max}")
        return _DimHint(self.type, min, max, _factory=False)

    def __eq__(self, other):
        return isinstance(other, _DimHint) and (self.type, self.min, self.max, self._factory) == \
            (other.type, other.min, other.max, other._factory)

    def __hash__(self):
        return hash((self.type, self.min, self.max, self._factory))

    def __repr__(self):
        parts = [self.type.name] + ([f"min={self.min}"] if self.min is not None else []) + \
            ([f"max={self.max}"] if self.max is not None else [])
        return f"DimHint({', '.join(parts)})"

    @property
    def is_static(self):
        return self.type is _DimHintType.STATIC

    @property
    def is_dynamic(self):
        return self.type is _DimHintType.DYNAMIC

    def bounds(self):
        """The range it allows: at least 2 (a size export keeps symbolic), at most ``max``."""
        lo = 2 if self.min is None else builtins_max(2, self.min)
        return lo, int_oo if self.max is None else self.max


class _DimMeta(type):
    AUTO = _DimHint(_DimHintType.AUTO)
    STATIC = _DimHint(_DimHintType.STATIC)
    DYNAMIC = _DimHint(_DimHintType.DYNAMIC)


class Dim(metaclass=_DimMeta):
    """A named symbolic dimension with an inclusive range ``[min, max]``."""

    def __init__(self, name: str, *, min: Optional[int] = None, max: Optional[int] = None):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Dim: name must be a Python identifier, got {name!r}")
        lo = 0 if min is None else min
        hi = int_oo if max is None else max
        if not isinstance(lo, int) or not isinstance(hi, int):
            raise TypeError(f"Dim {name!r}: min and max must be ints, got {min!r} and {max!r}")
        if hi <= lo:
            raise ValueError(f"Cannot create Dim with inconsistent min={min}, max={max}")
        if lo < 0:
            raise ValueError(f"Dim {name!r}: min must be >= 0, got {lo}")
        self.__name__ = name
        self.min = lo
        self.max = hi

    # ---- derived dims: increasing linear functions ``A * dim + B`` of a named Dim (torch's rules)
    def __add__(self, other):
        if type(other) is not int:
            raise NotImplementedError(f"Attempted to add {other} to {self.__name__}, where an integer was expected. "
                                      f"(Only increasing linear operations with integer coefficients are supported.)")
        return self._derive(1, other)

    def __radd__(self, other):
        return self + other

    def __sub__(self, other):
        if type(other) is not int:
            raise NotImplementedError(f"Attempted to subtract {other} from {self.__name__}, where an integer was "
                                      f"expected. (Only increasing linear operations with integer coefficients are "
                                      f"supported.)")
        return self._derive(1, -other)

    def __rsub__(self, other):
        raise NotImplementedError(f"Attempted to negate {self.__name__}. "
                                  f"(Only increasing linear operations with integer coefficients are supported.)")

    def __mul__(self, other):
        if type(other) is not int or other <= 0:
            raise NotImplementedError(f"Attempted to multiply {other} with {self.__name__}, where a positive integer "
                                      f"was expected. (Only increasing linear operations with integer coefficients "
                                      f"are supported.)")
        return self._derive(other, 0)

    def __rmul__(self, other):
        return self * other

    def _derive(self, a, b):
        return _DerivedDim(self, a, b)

    def __repr__(self):
        return _readable(self.__name__, self.min, self.max)


class _DerivedDim(Dim):
    """``A * root + B`` (A > 0): a dimension declared as an increasing linear function of a named
    Dim (``2 * dx``, ``dx + 1``). Its range is the root's mapped through the function; export
    traces it as that expression of the root's symbol, and ``module()`` checks the relation."""

    def __init__(self, root: Dim, a: int, b: int):
        import sympy
        self.root, self.a, self.b = root, a, b
        self.__name__ = str(a * sympy.Symbol(root.__name__) + b)

    @property
    def min(self):
        v = self.a * self.root.min + self.b
        if v < 0:
            raise AssertionError(f"Expected derived min value of {self.__name__} to be >= 0. Please specify an "
                                 f"appropriate min value for {self.root.__name__} (currently {self.root.min}).")
        return v

    @property
    def max(self):
        if self.root.max >= int_oo:
            return int_oo
        v = self.a * self.root.max + self.b
        if v > int_oo:
            raise AssertionError(f"Expected derived max value of {self.__name__} to be <= {int_oo}. Please specify "
                                 f"an appropriate max value for {self.root.__name__} (currently {self.root.max}).")
        return v

    def _derive(self, a, b):
        # compose on the same root: a * (A x + B) + b
        return _DerivedDim(self.root, a * self.a, a * self.b + b)

    def root_value(self, n: int):
        """The root's size for this dim's size ``n`` (None when no integer root gives ``n``)."""
        q, r = divmod(n - self.b, self.a)
        return q if r == 0 and q >= 0 else None

    def __repr__(self):
        return self.__name__


def _readable(name, lo, hi):
    """torch's spelling of a Dim: ``min`` left out when it is 2 (the least size export keeps
    symbolic), ``max`` when unbounded -- so ``Dim("b")`` (min 0) prints ``Dim('b', min=0)``."""
    args = [repr(name)] + ([f"min={lo}"] if lo != 2 else []) + ([f"max={hi}"] if hi != int_oo else [])
    return f"Dim({', '.join(args)})"


#: what a dynamic dimension is declared with (torch's ``Constraint`` type alias, for annotations):
#: a named ``Dim`` or one of the hints ``Dim.AUTO``/``Dim.DYNAMIC``/``Dim.STATIC``
Constraint = Union[Dim, _DimHint]


def dims(*names, min=None, max=None):
    """``dims("a", "b")``: one ``Dim`` per name with the same range (torch.export.dims)."""
    return tuple(Dim(n, min=min, max=max) for n in names)


@dataclass(frozen=True)
class ValueRange:
    """An inclusive integer range, printed like torch's ``VR[2, int_oo]``."""
    lower: int
    upper: int

    def __repr__(self):
        up = "int_oo" if self.upper >= int_oo else str(self.upper)
        return f"VR[{self.lower}, {up}]"

    def __contains__(self, v):
        return self.lower <= v <= self.upper


class DimRequest:
    """One input dimension the caller asked to be dynamic: its spec and where it is."""

    def __init__(self, spec, path: str, dim: int):
        self.spec = spec          # a Dim or a _DimHint (AUTO/DYNAMIC)
        self.path = path          # "x", "xs[0]", "d['a']" (for messages)
        self.dim = dim

    @property
    def name(self):
        return self.spec.__name__ if isinstance(self.spec, Dim) else None

    @property
    def root(self):
        """The named Dim this dimension's symbol is (a derived dim's root, else its own Dim)."""
        return self.spec.root if isinstance(self.spec, _DerivedDim) else self.spec

    @property
    def must_stay_dynamic(self):
        return isinstance(self.spec, Dim) or self.spec.is_dynamic

    def where(self):
        return f"{self.path}.size()[{self.dim}]"


def _user_error(msg):
    from .errors import UserError
    return UserError(msg)


def dims_per_tensor(bound_args: Dict[str, Any], dynamic_shapes) -> Dict[int, Dict[int, DimRequest]]:
    """id(tensor input) -> {dim: DimRequest} for every dimension ``dynamic_shapes`` makes dynamic.

    ``bound_args``: argument name -> value, in the signature's order."""
    from ..tensor import Tensor
    out: Dict[int, Dict[int, DimRequest]] = {}
    if dynamic_shapes is None:
        return out
    names = list(bound_args)
    if isinstance(dynamic_shapes, dict):
        extra = [k for k in dynamic_shapes if k not in bound_args]
        if extra:
            raise _user_error(f"When `dynamic_shapes` is specified as a dict, its top-level keys must be the arg "
                              f"names {names} of `inputs`, but here they are {list(dynamic_shapes)}. "
                              f"Alternatively, you could also ignore arg names entirely and specify "
                              f"`dynamic_shapes` as a list/tuple matching `inputs`.")
        pairs = [(k, bound_args[k], dynamic_shapes[k]) for k in names if k in dynamic_shapes]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(names):
            raise _user_error(f"When `dynamic_shapes` is specified as a list/tuple it must have one entry per "
                              f"argument {names}, but it has {len(dynamic_shapes)}")
        pairs = [(k, bound_args[k], s) for k, s in zip(names, dynamic_shapes)]
    else:
        raise _user_error(f"dynamic_shapes must be a dict, tuple or list, got {type(dynamic_shapes).__name__}")

    def is_dim(s):
        return s is None or isinstance(s, (Dim, _DimHint))

    def walk(value, spec, path):
        if spec is None:
            return
        if isinstance(value, Tensor):
            if isinstance(spec, dict):
                items = list(spec.items())
            elif isinstance(spec, (tuple, list)) and all(is_dim(s) for s in spec):
                if len(spec) != value.ndim:
                    raise _user_error(f"Expected dynamic shape spec {spec} at inputs{path_str(path)} to have "
                                      f"length {value.ndim} (one entry per dimension of the tensor)")
                items = list(enumerate(spec))
            else:
                raise _user_error(f"Unexpected dynamic shape spec {spec!r} for the tensor at "
                                  f"inputs{path_str(path)}: expected a dict {{dim: Dim}} or a tuple with one "
                                  f"Dim/None per dimension")
            for d, s in items:
                if not isinstance(d, int) or not -value.ndim <= d < value.ndim:
                    raise _user_error(f"Dynamic shape spec at inputs{path_str(path)}: dim {d!r} is out of range "
                                      f"for a {value.ndim}-d tensor")
                if s is None or (isinstance(s, _DimHint) and s.is_static):
                    continue
                if not isinstance(s, (Dim, _DimHint)):
                    raise _user_error(f"Unexpected dimension spec {s!r} at inputs{path_str(path)}[{d}]: expected "
                                      f"a Dim, Dim.AUTO, Dim.DYNAMIC, Dim.STATIC or None")
                out.setdefault(id(value), {})[d % value.ndim] = DimRequest(s, path_str(path, top=True), d % value.ndim)
            return
        if isinstance(value, (tuple, list)):
            if not isinstance(spec, (tuple, list)) or len(spec) != len(value):
                raise _user_error(f"Expected dynamic shape spec at inputs{path_str(path)} to be a {type(value).__name__} "
                                  f"of length {len(value)} matching the input, got {spec!r}")
            for i, (v, s) in enumerate(zip(value, spec)):
                walk(v, s, path + [i])
            return
        if isinstance(value, dict):
            if not isinstance(spec, dict) or set(spec) - set(value):
                raise _user_error(f"Expected dynamic shape spec at inputs{path_str(path)} to be a dict with keys "
                                  f"among {list(value)}, got {spec!r}")
            for k, s in spec.items():
                walk(value[k], s, path + [k])
            return
        # a non-tensor input: only None / a static spec is meaningful
        if not (spec is None or (isinstance(spec, _DimHint) and spec.is_static)):
            raise _user_error(f"Dynamic shape spec {spec!r} given for the non-tensor input at inputs{path_str(path)}")

    for name, value, spec in pairs:
        walk(value, spec, [name])
    return out


def path_str(path, top=False):
    """``['xs', 0, 'a']`` -> ``"xs[0]['a']"`` (``top``) or ``"['xs'][0]['a']"``."""
    head, rest = path[0], path[1:]
    s = str(head) if top else f"[{head!r}]"
    for p in rest:
        s += f"[{p!r}]"
    return s
