"""What a mocked module hands out. This file is copied into every archive that mocks a
module (as ``_mock.py``) and imported from there, so it must stay self-contained: no
imports of ember, no relative imports.

Any attribute of a mocked module is a ``MockedObject``; using it in almost any way (calling
it, doing arithmetic, iterating, comparing, pickling it back) raises NotImplementedError
naming the object, so that code that really needs a mocked dependency fails loudly instead
of computing with a stand-in.
"""

_USED_IN = (
    "__call__", "__getattr__", "__setattr__", "__delattr__", "__getitem__", "__setitem__", "__delitem__",
    "__len__", "__iter__", "__reversed__", "__contains__", "__bool__", "__int__", "__float__", "__complex__",
    "__index__", "__round__", "__trunc__", "__floor__", "__ceil__", "__hash__", "__dir__", "__sizeof__",
    "__bytes__", "__enter__", "__exit__", "__copy__", "__deepcopy__", "__reduce__", "__getstate__",
    "__instancecheck__", "__subclasscheck__",
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__pos__", "__neg__", "__abs__", "__invert__",
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__divmod__", "__pow__",
    "__lshift__", "__rshift__", "__and__", "__or__", "__xor__",
    "__rmul__", "__rdivmod__", "__rrshift__", "__rand__",
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
    "__ilshift__", "__irshift__", "__iand__", "__ior__", "__ixor__",
)


class MockedObject:
    """A stand-in for an attribute of a mocked module (see the module docstring)."""

    def __new__(cls, *args, **kwargs):
        # only the mocked module's __getattr__ may create one; unpickling one is an error
        if not kwargs.get("_suppress_err"):
            raise NotImplementedError(
                f"Object '{cls._name}' was mocked out during packaging but it is being used in '__new__'. "
                "If this error is happening during 'load_pickle', please ensure that your pickled object "
                "doesn't contain any mocked objects.")
        return super().__new__(cls)

    def __init__(self, name, _suppress_err):
        self.__dict__["_name"] = name

    def __repr__(self):
        return f"MockedObject({self._name})"


MockedObject._name = "MockedObject"


def _refusing(method_name):
    def refuse(self, *args, **kwargs):
        raise NotImplementedError(
            f"Object '{self._name}' was mocked out during packaging but it is being used in {method_name}")
    refuse.__name__ = method_name
    return refuse


for _method in _USED_IN:
    setattr(MockedObject, _method, _refusing(_method))
del _method
