"""``ember.export.register_dataclass``: dataclasses as inputs and outputs of exported programs.

A dataclass registered here is a pytree node (its fields are the children: tensors become
graph inputs/outputs, other values are specialised), and it gets a *serialized type name*:
``ember.export.save`` writes that name in place of the class in the input/output specs, and
``load`` looks it up again, so a saved program does not depend on where the class lives --
only on the class being registered (under the same name) in the loading process."""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Dict, Optional

__all__ = ["register_dataclass"]

_NAME_OF: Dict[type, str] = {}      # class -> serialized type name
_CLASS_OF: Dict[str, type] = {}     # serialized type name -> class


def register_dataclass(cls: type, *, serialized_type_name: Optional[str] = None) -> None:
    """Register dataclass ``cls`` as a pytree node for export (``torch.export.register_dataclass``)."""
    from ..utils import _pytree as pytree
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        raise ValueError(f"field_names must be specified with a list of all fields used to initialize {cls}, "
                         f"as it is not a dataclass.")
    if serialized_type_name is not None and not isinstance(serialized_type_name, str):
        raise TypeError(f"register_dataclass: serialized_type_name must be a str, got "
                        f"{type(serialized_type_name).__name__}")
    if cls in pytree.SUPPORTED_NODES:
        warnings.warn(f"{cls} is already registered as pytree node. Overwriting the previous registration.",
                      UserWarning, stacklevel=2)
        del pytree.SUPPORTED_NODES[cls]
        pytree._CUSTOM_KINDS = tuple(k for k in pytree._CUSTOM_KINDS if k is not cls)
    pytree.register_dataclass(cls, serialized_type_name=serialized_type_name)
    old = _NAME_OF.pop(cls, None)
    if old is not None:
        _CLASS_OF.pop(old, None)
    if serialized_type_name is not None:
        other = _CLASS_OF.get(serialized_type_name)
        if other is not None and other is not cls:
            raise ValueError(f"register_dataclass: serialized_type_name {serialized_type_name!r} is already used "
                             f"by {other}")
        _NAME_OF[cls] = serialized_type_name
        _CLASS_OF[serialized_type_name] = cls


def _builtin(t) -> bool:
    import collections
    from ..utils import _pytree as pytree
    return t in pytree._BUILTIN_KINDS or t is collections.namedtuple


def spec_to_record(spec) -> Any:
    """A picklable form of TreeSpec ``spec``: registered dataclasses by serialized name."""
    if spec.type is None:
        return ("leaf",)
    children = [spec_to_record(c) for c in spec.children_specs]
    if _builtin(spec.type):
        return ("node", spec.type, spec.context, children)
    name = _NAME_OF.get(spec.type)
    if name is None:
        raise NotImplementedError(f"No registered serialization name for {spec.type} found. Please update your "
                                  f"_register_pytree_node call with a `serialized_type_name` kwarg.")
    return ("named", name, spec.context, children)


def spec_from_record(rec) -> Any:
    from ..utils._pytree import LeafSpec, TreeSpec
    if rec[0] == "leaf":
        return LeafSpec()
    children = [spec_from_record(c) for c in rec[3]]
    if rec[0] == "node":
        return TreeSpec(rec[1], rec[2], children)
    cls = _CLASS_OF.get(rec[1])
    if cls is None:
        raise NotImplementedError(f"ember.export.load: the program's inputs or outputs use the pytree type "
                                  f"serialized as {rec[1]!r}, which is not registered in this process; call "
                                  f"ember.export.register_dataclass(<the class>, serialized_type_name={rec[1]!r}) "
                                  f"first")
    return TreeSpec(cls, rec[2], children)
