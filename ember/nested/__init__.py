"""Nested (ragged) tensors (``torch.nested``): a batch of tensors whose sizes differ.

Variable-length sequences -- a batch of sentences of different lengths -- are
held without padding: ``nested_tensor([a, b])`` of shapes ``(2, 8)`` and
``(5, 8)`` has ``dim() == 3`` and size ``(2, j1, 8)`` (jagged layout) or an
irregular dim 1 (strided layout).

Making them
    ``nested_tensor(list, dtype=, device=, requires_grad=, pin_memory=, layout=)``
    (a copy, a leaf; ``layout=ember.strided`` default or ``ember.jagged``),
    ``as_nested_tensor(list or tensor, dtype=, device=, layout=)`` (keeps
    autograd to the components), ``nested_tensor_from_jagged(values, offsets,
    lengths=None, jagged_dim=None)`` (a view of ``values``; ``jagged_dim`` picks
    which dim of ``values`` holds the ragged rows), ``narrow(tensor, dim, start,
    length, layout=)``, ``masked_select(tensor, mask)``; ``ember.save`` /
    ``ember.load`` round-trip them (pickle refuses them, as every ember tensor).

Reading them
    ``is_nested``, ``layout``, ``unbind()``, ``values()`` (in the logical dim
    order, as torch's) / ``offsets()`` / ``lengths()`` (jagged), ``size(i)``
    (regular dims; strided ``size()`` raises as torch's, jagged sizes hold the
    symbolic ragged size ``j<n>``), ``dim()``, ``numel()``, ``dtype``, ``device``,
    ``requires_grad``, ``grad``, ``repr`` (torch's), ``to_padded_tensor(padding,
    output_size=None)`` (also ``ember.nested.to_padded_tensor``; differentiable);
    indexing as torch accepts it: ``nt[i]``, ``nt[i, ...]``, ``nt[..., k]``,
    ``nt[..., a:b]`` (jagged), ``nt[..., None]`` (see ``_index``).

Computing with them
    Any ember op called with a nested argument is routed by the dispatcher
    (``NestedTensor.__ember_route__``, see ``_route``): every pointwise op
    (``ember.sigmoid(nt)``, ``ember.where(c, nt, 0)``, ``nt + d`` with numbers /
    nested / broadcastable dense operands) and its in-place variant (``nt.mul_(2)``,
    ``relu_``, ``fill_``, ``copy_``), ``softmax`` / ``log_softmax``, ``F.linear``,
    ``F.layer_norm`` (``native_layer_norm``), ``matmul`` / ``bmm``, ``cat`` along
    a non-batch dim, ``select`` / ``unsqueeze``; plus ``sum`` / ``mean`` over one
    dim, ``transpose`` of non-batch dims, ``reshape`` / ``view``, ``clone``,
    ``contiguous``, ``detach``, ``to(dtype)``, ``F.dropout`` and
    ``F.scaled_dot_product_attention`` (each sequence attends to itself; no
    ``attn_mask``, as torch). Ops over regular dims of a packed (jagged-like)
    tensor run once on the buffer; others per component.

Anything else raises ``NotImplementedError`` naming the op (or torch's own error).
Autograd reaches the components / values the tensor was made from. ``ember.compile``
runs code holding nested tensors eagerly (a graph break), never compiled.
"""
from __future__ import annotations

from ._create import (as_nested_tensor, masked_select, narrow, nested_tensor, nested_tensor_from_jagged,
                      to_padded_tensor)
from ._tensor import NestedTensor

__all__ = ["nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "narrow", "to_padded_tensor",
           "masked_select", "NestedTensor"]

# ember.compile: a call of these makes or reads a nested tensor, which a graph cannot hold, so
# dynamo breaks the graph at the call and runs it eagerly (the flag ember.compiler.disable sets)
for _fn in (nested_tensor, as_nested_tensor, nested_tensor_from_jagged, narrow, to_padded_tensor, masked_select):
    _fn._ember_dynamo_disable = True
del _fn
