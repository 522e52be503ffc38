"""``immutable_list`` / ``immutable_dict``: the containers inside node arguments.

Why immutable: a :class:`~ember.fx.Node` derives its use/def edges
(``users``, ``all_input_nodes``) from its ``args``/``kwargs`` when they are
*assigned*. A list inside ``node.args`` mutated in place would change what the
node reads without telling the graph, so the containers refuse every in-place
operation (``TypeError``, as in torch.fx) and say what to do instead: build a
new container and assign ``node.args``/``node.kwargs``.

They are hashable (by content, so equal argument lists hash equally -- common
subexpression elimination keys on them), pickle/copy as their own type, and
are registered as pytree containers so ``ember.utils._pytree`` walks into them
like into ``list``/``dict``.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

__all__ = ["immutable_list", "immutable_dict"]

_help_mutation = """
If you are attempting to modify the kwargs or args of an ember.fx.Node object,
instead create a new copy of it and assign the copy to the node:

    new_args = ...  # copy and mutate args
    node.args = new_args
""".strip()


def _no_mutation(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"{type(self).__name__!r} object does not support mutation. {_help_mutation}")


class immutable_list(list):
    """A ``list`` whose in-place operations raise ``TypeError``."""

    __delitem__ = __iadd__ = __imul__ = __setitem__ = _no_mutation
    append = clear = extend = insert = pop = remove = reverse = sort = _no_mutation

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self):
        return (type(self), (tuple(self),))

    def __deepcopy__(self, memo):
        return type(self)(copy.deepcopy(list(self), memo))


class immutable_dict(dict):
    """A ``dict`` whose in-place operations raise ``TypeError``."""

    __delitem__ = __ior__ = __setitem__ = _no_mutation
    clear = pop = popitem = setdefault = update = _no_mutation

    def __hash__(self) -> int:  # type: ignore[override]
        # order-independent, like dict equality
        return hash(frozenset(self.items()))

    def __reduce__(self):
        return (type(self), (tuple(self.items()),))

    def __deepcopy__(self, memo):
        return type(self)(copy.deepcopy(dict(self), memo))


def _register_pytree() -> None:
    from ember.utils import _pytree as pytree

    if immutable_list in pytree.SUPPORTED_NODES:
        return
    pytree.register_pytree_node(
        immutable_list,
        lambda x: (list(x), None),
        lambda values, ctx: immutable_list(values),
        serialized_type_name="ember.fx.immutable_collections.immutable_list",
        flatten_with_keys_fn=lambda x: ([(pytree.SequenceKey(i), v) for i, v in enumerate(x)], None),
    )
    pytree.register_pytree_node(
        immutable_dict,
        lambda d: (list(d.values()), list(d.keys())),
        lambda values, keys: immutable_dict(zip(keys, values)),
        serialized_type_name="ember.fx.immutable_collections.immutable_dict",
        flatten_with_keys_fn=lambda d: ([(pytree.MappingKey(k), v) for k, v in d.items()], list(d.keys())),
    )


_register_pytree()
