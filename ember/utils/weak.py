"""``ember.utils.weak``: weak references keyed by identity (torch.utils.weak). A tensor's ``==`` is
elementwise and its hash is its identity, so ``weakref.WeakKeyDictionary`` -- which compares keys
with ``==`` -- cannot hold tensors; these compare referents with ``is`` instead."""
from __future__ import annotations

import weakref
from collections.abc import MutableMapping

__all__ = ["WeakIdRef", "WeakIdKeyDictionary", "WeakTensorKeyDictionary", "TensorWeakRef"]


class WeakIdRef(weakref.ref):
    """A weak reference hashed by its referent's ``id`` (kept after the referent dies, so the
    entry can still be found and removed) and equal to another when both point to the same live
    object."""

    __slots__ = ("_id",)

    def __new__(cls, key, callback=None):
        return weakref.ref.__new__(cls, key, callback)

    def __init__(self, key, callback=None):
        super().__init__(key, callback)
        self._id = id(key)

    def __call__(self):
        return super().__call__()

    def __hash__(self):
        return self._id

    def __eq__(self, other):
        a, b = self(), other() if isinstance(other, weakref.ref) else None
        if a is not None and b is not None:
            return a is b
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)


class WeakIdKeyDictionary(MutableMapping):
    """A mapping whose keys are held weakly and matched by identity; an entry goes away when its
    key is collected."""

    def __init__(self, dict=None, ref_type=WeakIdRef):   # noqa: A002 - torch's parameter name
        self.data = {}
        self.ref_type = ref_type
        self_ref = weakref.ref(self)

        def remove(k):
            owner = self_ref()
            if owner is not None:
                owner.data.pop(k, None)
        self._remove = remove
        if dict is not None:
            self.update(dict)

    def __getitem__(self, key):
        return self.data[self.ref_type(key)]

    def __setitem__(self, key, value):
        self.data[self.ref_type(key, self._remove)] = value

    def __delitem__(self, key):
        del self.data[self.ref_type(key)]

    def __contains__(self, key):
        try:
            r = self.ref_type(key)
        except TypeError:
            return False
        return r in self.data

    def __iter__(self):
        for ref in list(self.data):
            obj = ref()
            if obj is not None:
                yield obj

    def __len__(self):
        return sum(1 for ref in list(self.data) if ref() is not None)

    def get(self, key, default=None):
        return self.data.get(self.ref_type(key), default)

    def copy(self):
        new = WeakIdKeyDictionary(ref_type=self.ref_type)
        for k, v in self.items():
            new[k] = v
        return new

    __copy__ = copy

    def __repr__(self):
        return f"<{type(self).__name__} at {id(self):#x}>"


WeakTensorKeyDictionary = WeakIdKeyDictionary


class TensorWeakRef:
    """A weak reference to a tensor (``ref()`` gives it back, or None once collected)."""

    __slots__ = ("ref",)

    def __init__(self, tensor):
        from ..tensor import Tensor
        if not isinstance(tensor, Tensor):
            raise AssertionError(f"TensorWeakRef expects a Tensor, got {type(tensor).__name__}")
        self.ref = weakref.ref(tensor)

    def __call__(self):
        return self.ref()
