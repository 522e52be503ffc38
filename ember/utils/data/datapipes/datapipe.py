"""The DataPipe base classes: ``IterDataPipe`` (a stream), ``MapDataPipe`` (indexable), ``DataChunk``.

A datapipe class registered with ``@functional_datapipe("name")`` becomes a method of every
datapipe of its kind: ``dp.name(*args)`` is ``Cls(dp, *args)``. The registry is one dict per
base class (``IterDataPipe.functions`` / ``MapDataPipe.functions``), looked up by
``__getattr__``, so registering later makes the method appear on existing datapipes too.

Pickling: a datapipe pickles its ``__dict__``; the graph traversal (``ember.utils.data.graph``)
installs a ``getstate_hook`` / ``reduce_ex_hook`` the same way PyTorch's does. DataLoader wraps
datapipes in ``_IterDataPipeSerializationWrapper`` which falls back to ``dill`` (when
installed) for lambdas, as PyTorch does.
"""
from __future__ import annotations

import functools
import pickle

from ..dataset import Dataset, IterableDataset
from . import _iterator_guard

__all__ = ["DataChunk", "DFIterDataPipe", "IterDataPipe", "MapDataPipe"]

try:
    import dill as _dill
except ImportError:        # dill is optional, as in PyTorch
    _dill = None

HAS_DILL = _dill is not None

# The functional names whose results must not be traced as dataframes (kept for API parity).
UNTRACABLE_DATAFRAME_PIPES = ["batch", "groupby", "_dataframes_as_tuples", "trace_as_dataframe"]


class DataChunk(list):
    """A batch produced by ``batch``/``groupby``: a list that also remembers its items."""

    def __init__(self, items):
        items = list(items)
        super().__init__(items)
        self.items = items

    def as_str(self, indent: str = "") -> str:
        return indent + "[" + ", ".join(str(i) for i in iter(self)) + "]"

    def __iter__(self):
        yield from super().__iter__()

    def raw_iterator(self):
        yield from self.items


class _DataPipeMeta(type):
    """Metaclass of MapDataPipe (and base of IterDataPipe's): nothing to add, it exists so that
    ``isinstance(cls, _DataPipeMeta)`` tells datapipe classes apart (``functional_datapipe``,
    ``argument_validation``)."""


class _IterDataPipeMeta(_DataPipeMeta):
    """Wraps each ``__iter__``/``reset`` an IterDataPipe class defines (see ``_iterator_guard``)."""

    def __new__(mcs, name, bases, namespace, **kwargs):
        if "reset" in namespace:
            _iterator_guard.wrap_reset(namespace)
        if "__iter__" in namespace:
            _iterator_guard.guard_iter(namespace)
        return super().__new__(mcs, name, bases, namespace, **kwargs)


def _functional_lookup(dp, functions, attribute_name):
    if attribute_name in functions:
        f = functions[attribute_name]
        method = functools.partial(f, dp)
        functools.update_wrapper(wrapper=method, wrapped=f, assigned=("__doc__",))
        return method
    raise AttributeError(f"'{dp.__class__.__name__}' object has no attribute '{attribute_name}")


class _HookedPickling:
    """The class-level pickling hooks both datapipe kinds share (used by graph traversal)."""

    def __getstate__(self):
        state = self.__dict__
        hook = type(self)._hooks_owner().getstate_hook
        return hook(state) if hook is not None else state

    def __reduce_ex__(self, *args, **kwargs):
        hook = type(self)._hooks_owner().reduce_ex_hook
        if hook is not None:
            try:
                return hook(self)
            except NotImplementedError:
                pass
        return super().__reduce_ex__(*args, **kwargs)

    @classmethod
    def set_getstate_hook(cls, hook_fn) -> None:
        owner = cls._hooks_owner()
        if owner.getstate_hook is not None and hook_fn is not None:
            raise RuntimeError("Attempt to override existing getstate_hook")
        owner.getstate_hook = hook_fn

    @classmethod
    def set_reduce_ex_hook(cls, hook_fn) -> None:
        owner = cls._hooks_owner()
        if owner.reduce_ex_hook is not None and hook_fn is not None:
            raise RuntimeError("Attempt to override existing reduce_ex_hook")
        owner.reduce_ex_hook = hook_fn

    def __repr__(self) -> str:
        if self.repr_hook is not None:
            return self.repr_hook(self)
        return str(self.__class__.__qualname__)

    def __str__(self) -> str:
        if self.str_hook is not None:
            return self.str_hook(self)
        return str(self.__class__.__qualname__)

    def __dir__(self):
        return list(super().__dir__()) + list(self.functions.keys())


class IterDataPipe(_HookedPickling, IterableDataset, metaclass=_IterDataPipeMeta):
    """An iterable-style datapipe. Subclasses define ``__iter__`` (and ``reset()`` to clear buffers,
    called whenever a new iterator starts). Only one iterator per datapipe is valid at a time: a
    new one invalidates the previous (use ``.fork()`` to read a stream twice)."""

    functions: dict = {}
    reduce_ex_hook = None
    getstate_hook = None
    str_hook = None
    repr_hook = None
    _valid_iterator_id = None
    _number_of_samples_yielded = 0

    @classmethod
    def _hooks_owner(cls):
        return IterDataPipe

    def __iter__(self):
        return self

    def __getattr__(self, attribute_name):
        return _functional_lookup(self, IterDataPipe.functions, attribute_name)

    @classmethod
    def register_function(cls, function_name, function) -> None:
        cls.functions[function_name] = function

    @classmethod
    def register_datapipe_as_function(cls, function_name, cls_to_register, enable_df_api_tracing=False) -> None:
        if function_name in cls.functions:
            raise Exception(f"Unable to add DataPipe function name {function_name} as it is already taken")  # noqa: TRY002

        def class_function(source_dp, *args, **kwargs):
            result = cls_to_register(source_dp, *args, **kwargs)
            if isinstance(result, IterDataPipe) and (enable_df_api_tracing or isinstance(source_dp, DFIterDataPipe)):
                if function_name not in UNTRACABLE_DATAFRAME_PIPES:
                    raise NotImplementedError(
                        "ember.utils.data.datapipes: DataFrame API tracing (DFIterDataPipe, "
                        "enable_df_api_tracing) is not supported")
            return result

        functools.update_wrapper(wrapper=class_function, wrapped=cls_to_register, assigned=("__doc__",))
        cls.functions[function_name] = class_function

    def reset(self) -> None:
        """Return to the initial state (clear buffers); called when a new iterator starts."""


class DFIterDataPipe(IterDataPipe):
    """Marks a datapipe of DataFrames (PyTorch's dataframe tracing API is not provided)."""

    def _is_dfpipe(self) -> bool:
        return True


class MapDataPipe(_HookedPickling, Dataset, metaclass=_DataPipeMeta):
    """A map-style datapipe: ``__getitem__`` (and usually ``__len__``)."""

    functions: dict = {}
    reduce_ex_hook = None
    getstate_hook = None
    str_hook = None
    repr_hook = None

    @classmethod
    def _hooks_owner(cls):
        return MapDataPipe

    def __getattr__(self, attribute_name):
        return _functional_lookup(self, MapDataPipe.functions, attribute_name)

    @classmethod
    def register_function(cls, function_name, function) -> None:
        cls.functions[function_name] = function

    @classmethod
    def register_datapipe_as_function(cls, function_name, cls_to_register) -> None:
        if function_name in cls.functions:
            raise Exception(f"Unable to add DataPipe function name {function_name} as it is already taken")  # noqa: TRY002

        def class_function(source_dp, *args, **kwargs):
            return cls_to_register(source_dp, *args, **kwargs)

        functools.update_wrapper(wrapper=class_function, wrapped=cls_to_register, assigned=("__doc__",))
        cls.functions[function_name] = class_function


class _DataPipeSerializationWrapper:
    """What DataLoader hands to its workers: pickles the datapipe with pickle, or with dill when
    pickle cannot (lambdas) and dill is installed."""

    def __init__(self, datapipe):
        self._datapipe = datapipe

    def __getstate__(self):
        try:
            return pickle.dumps(self._datapipe), False
        except Exception:
            if HAS_DILL:
                return _dill.dumps(self._datapipe), True
            raise

    def __setstate__(self, state):
        value, use_dill = state
        self._datapipe = _dill.loads(value) if use_dill else pickle.loads(value)

    def __len__(self) -> int:
        try:
            return len(self._datapipe)
        except Exception as e:
            raise TypeError(f"{type(self).__name__} instance doesn't have valid length") from e


class _IterDataPipeSerializationWrapper(_DataPipeSerializationWrapper, IterDataPipe):
    def __init__(self, datapipe):
        super().__init__(datapipe)
        self._datapipe_iter = None

    def __iter__(self):
        self._datapipe_iter = iter(self._datapipe)
        return self

    def __next__(self):
        if self._datapipe_iter is None:
            raise AssertionError("Iterator has not been initialized; call __iter__() before __next__()")
        return next(self._datapipe_iter)


class _MapDataPipeSerializationWrapper(_DataPipeSerializationWrapper, MapDataPipe):
    def __getitem__(self, idx):
        return self._datapipe[idx]
