"""Which nodes a backend can run (``torch.fx.passes.operator_support``).

Why objects and not plain predicates: partitioners and splitters take one
"is this node supported" oracle, but backends describe support in pieces (a
table of targets with allowed input dtypes, "nothing in float64", "not these
node names"); :func:`chain` / :func:`any_chain` combine such pieces into one.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Mapping, Optional, Sequence, Set, Tuple

from ..node import Node
from .shape_prop import TensorMetadata
from .tools_common import CALLABLE_NODE_OPS, get_node_target

__all__ = [
    "OperatorSupportBase",
    "OperatorSupport",
    "create_op_support",
    "chain",
    "OpSupports",
    "any_chain",
]

TargetTypeName = str
SupportedArgumentDTypes = Optional[Tuple[Sequence[Sequence[Any]], Mapping[str, Sequence[Any]]]]
SupportDict = Mapping[TargetTypeName, SupportedArgumentDTypes]
IsNodeSupported = Callable[[Mapping[str, Any], Node], bool]


class OperatorSupportBase(abc.ABC):
    """Interface: ``is_node_supported(submodules, node)`` for one backend."""

    @abc.abstractmethod
    def is_node_supported(self, submodules: Mapping[str, Any], node: Node) -> bool:
        raise NotImplementedError()


def _get_arg_dtype(arg: Node) -> Any:
    if not isinstance(arg, Node):
        raise AssertionError(f"Expected ember.fx.Node, got {type(arg)}")
    tensor_meta = arg.meta.get("tensor_meta")
    if isinstance(tensor_meta, TensorMetadata):
        return tensor_meta.dtype
    return arg.meta["type"]


class OperatorSupport(OperatorSupportBase):
    """Support from a table ``{target type name: dtypes or None}``.

    A name maps to ``None`` (any dtypes) or to ``(arg_dtypes, kwarg_dtypes)``:
    ``arg_dtypes[i]`` lists the dtypes allowed for positional argument ``i``
    (``None`` skips the check), ``kwarg_dtypes[name]`` those for a keyword
    argument. Dtypes are read from ``meta['tensor_meta']`` (run ShapeProp).
    Nodes that call nothing (placeholders, get_attr, output) are supported.
    """

    def __init__(self, support_dict: Optional[SupportDict] = None) -> None:
        self._support_dict = support_dict or {}

    def is_node_supported(self, submodules: Mapping[str, Any], node: Node) -> bool:
        if node.op not in CALLABLE_NODE_OPS:
            return True
        target = get_node_target(submodules, node)
        if target not in self._support_dict:
            return False
        spec = self._support_dict[target]
        if spec is None:
            return True
        args_dtypes, kwargs_dtypes = spec
        for i, dtypes in enumerate(args_dtypes):
            if len(node.args) <= i:
                break
            if dtypes is None or not isinstance(node.args[i], Node):
                continue
            if _get_arg_dtype(node.args[i]) not in dtypes:
                return False
        for k, dtypes in kwargs_dtypes.items():
            arg = node.kwargs.get(k)
            if not isinstance(arg, Node):
                continue
            if _get_arg_dtype(arg) not in dtypes:
                return False
        return True


class _FunctionalOperatorSupport(OperatorSupportBase):
    def __init__(self, fn: IsNodeSupported) -> None:
        self._fn = fn

    def is_node_supported(self, submodules: Mapping[str, Any], node: Node) -> bool:
        return self._fn(submodules, node)


def create_op_support(is_node_supported: IsNodeSupported) -> OperatorSupportBase:
    """Wrap a ``(submodules, node) -> bool`` function as an OperatorSupportBase."""
    if not callable(is_node_supported):
        raise TypeError(
            f"create_op_support: is_node_supported must be callable, got {type(is_node_supported).__name__}"
        )
    return _FunctionalOperatorSupport(is_node_supported)


def chain(*op_support: OperatorSupportBase) -> OperatorSupportBase:
    """Supported only if every ``op_support`` says so."""
    return create_op_support(lambda submods, node: all(x.is_node_supported(submods, node) for x in op_support))


def any_chain(*op_support: OperatorSupportBase) -> OperatorSupportBase:
    """Supported if any ``op_support`` says so."""
    return create_op_support(lambda submods, node: any(x.is_node_supported(submods, node) for x in op_support))


class OpSupports:
    """Ready-made pieces to combine with :func:`chain`."""

    @classmethod
    def decline_if_input_dtype(cls, dtype: Any) -> OperatorSupportBase:
        """Unsupported when any input node has ``dtype``."""

        def _decline(submodules: Mapping[str, Any], node: Node) -> bool:
            return all(_get_arg_dtype(arg) != dtype for arg in node.all_input_nodes)

        return create_op_support(_decline)

    @classmethod
    def decline_if_node_in_names(cls, disallow_set: Set[str]) -> OperatorSupportBase:
        """Unsupported when the node's name is in ``disallow_set``."""
        return create_op_support(lambda submodules, node: node.name not in disallow_set)
