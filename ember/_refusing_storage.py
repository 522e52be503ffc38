"""The ``_data`` of ember's tensor classes that have no dense storage (sparse, nested, masked,
quantized): it answers metadata its class sets and refuses every other use.

Why one class. A dense kernel that receives such a tensor reads ``x._data`` and computes on
it; these tensors have no single dense array (or must not be read as one: a MaskedTensor's
masked-out elements), so the read itself must fail with an error naming the op, never return
garbage. Attribute reads, numpy conversion (``__array__``), ufuncs and array functions, and
every Python operator all end in the subclass's ``_fail(what)``, which raises the error its
tensor kind owes the user (torch's message where torch has one).
"""
from __future__ import annotations


class RefusingStorage:
    """Base of the refusing storages; a subclass defines ``__slots__`` for its metadata, an
    ``__init__`` and ``_fail(what)``, which raises."""

    __slots__ = ()

    def _fail(self, what):
        raise NotImplementedError(what)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            # protocol probes (__array_interface__, __deepcopy__, ...): "not there"; the
            # protocols numpy then falls back to (__array__, __array_ufunc__) raise below
            raise AttributeError(name)
        self._fail(f"reading '.{name}' of its data")

    def __array__(self, *args, **kwargs):
        self._fail("converting it to a numpy array")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self._fail(f"numpy's {ufunc.__name__}")

    def __array_function__(self, func, types, args, kwargs):
        self._fail(f"numpy's {func.__name__}")


def _raiser(name):
    def method(self, *args, **kwargs):
        self._fail(f"'{name}' on its data")
    method.__name__ = name
    return method


for _n in ("__getitem__", "__setitem__", "__iter__", "__len__", "__bool__", "__float__", "__int__",
           "__index__", "__complex__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
           "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__",
           "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__pos__", "__abs__",
           "__invert__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lt__",
           "__le__", "__gt__", "__ge__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
           "__lshift__", "__rshift__"):
    setattr(RefusingStorage, _n, _raiser(_n))
del _n
