"""``scan``, ``associative_scan`` and ``map``: loops over a tensor dimension (torch's HOPs of the
same names, ``torch._higher_order_ops.{scan, associative_scan, map}``).

Why plain Python: ember's graphs are straight-line code, so a loop over a dimension whose length
is known while tracing is captured by running the body once per slice (``ember.compile`` inlines
these functions -- see ``ember/dynamo/variables/control_flow.py``). The same code runs eagerly,
so compiled and eager results (values and gradients: every step is an ordinary ember op with
its autograd) agree by construction. The body's restrictions are torch's: it gets tensors (or
pytrees of tensors) and returns them; carries keep their shape and dtype.

Departure from torch, permissive: bodies returning views of their inputs are accepted (torch
rejects aliasing; here each output is stacked into a fresh tensor).
"""
from __future__ import annotations

import ember

from ..utils._pytree import tree_flatten, tree_unflatten

__all__ = ["scan", "associative_scan", "map"]


#: The most steps ``ember.compile`` unrolls a scan/associative_scan(generic)/map into one graph.
#: Each step is a copy of the body, so compile time grows with the length; a longer loop is a
#: graph break (logged, the HOP runs eagerly). ``ember.export`` needs one graph and unrolls any
#: length.
MAX_UNROLLED_STEPS = 256


def _unroll_or_break(name, steps):
    """Under ``ember.compile`` (not export), break the graph rather than unroll ``steps`` > the limit;
    under export, refuse a symbolic ``steps`` naming the HOP (unrolling would specialise it)."""
    from ..compiler import is_compiling, is_exporting
    from ..dynamo.exc import graph_break
    if is_exporting() and isinstance(steps, ember.SymInt):
        graph_break(f"ember._higher_order_ops.{name}: cannot export a {name} over a dynamic dimension (its size is a "
                    f"Dim): ember unrolls the loop, one copy of the body per step; make that dimension static")
    if steps > MAX_UNROLLED_STEPS and is_compiling() and not is_exporting():
        graph_break(f"ember._higher_order_ops.{name}: {steps} steps exceed MAX_UNROLLED_STEPS="
                    f"{MAX_UNROLLED_STEPS} (each step is a copy of the body in the graph); the {name} runs eagerly")


def _call_checked(name, fn, inputs, args):
    """``fn(*args)``, raising as torch does when it mutated one of ``inputs`` (tensor leaves) in
    place: a slice of ``xs`` is a view, so the mutation would reach the caller's tensor. Checked
    eagerly by version counters; under ember.compile ``control_flow._inline_hop`` checks the
    trace's example values the same way (and runs such a call eagerly, so it raises here)."""
    from ..compiler import is_compiling
    if is_compiling():
        return fn(*args)
    before = [t._version for t in inputs]
    out = fn(*args)
    hit = [i for i, (t, v) in enumerate(zip(inputs, before)) if t._version != v]
    if hit:
        raise RuntimeError(f"ember._higher_order_ops.{name}: the function mutated its input(s) {hit} in place; "
                           f"higher order ops do not support input mutation (as torch's). Return new tensors "
                           f"instead (e.g. x + 1 rather than x.add_(1)).")
    return out


def _is_tensor(x):
    from ..tensor import Tensor
    return isinstance(x, Tensor)


def _canonical_dim(ndim, dim):
    """``dim`` wrapped into ``[0, ndim)``; torch's IndexError when out of range."""
    lo, hi = (-ndim, ndim - 1) if ndim > 0 else (-1, 0)
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim + ndim if dim < 0 else dim


def _same_meta(a, b):
    """Why tensors ``a`` and ``b`` differ in shape or dtype ('' when they agree)."""
    diffs = []
    if tuple(a.shape) != tuple(b.shape):
        diffs.append(f"'shape: {tuple(a.shape)} vs {tuple(b.shape)}'")
    if a.dtype != b.dtype:
        diffs.append(f"'dtype: {a.dtype} vs {b.dtype}'")
    return ", ".join(diffs)


def _structure(tree):
    """A comparable description of a pytree's containers (TreeSpecs do not compare inside a
    compiled frame): nested tuples of container type names and dict keys, ``None`` per leaf."""
    if isinstance(tree, list):
        return ("list", tuple(_structure(t) for t in tree))
    if isinstance(tree, tuple):     # a namedtuple by its field names
        return (getattr(tree, "_fields", "tuple"), tuple(_structure(t) for t in tree))
    if isinstance(tree, dict):
        return ("dict", tuple((k, _structure(v)) for k, v in tree.items()))
    return None


def _check_leaves(what, leaves):
    for x in leaves:
        if not _is_tensor(x):
            raise RuntimeError(f"All {what} leaves must be a Tensor but got {x}")


def scan(combine_fn, init, xs, *, dim: int = 0, reverse: bool = False):
    """Inclusive scan of ``xs`` along ``dim`` with a carry (``torch._higher_order_ops.scan``).

    ``combine_fn(carry, x_slice) -> (next_carry, y_slice)`` runs once per slice of ``xs`` along
    ``dim`` (last to first when ``reverse``); ``next_carry`` must match ``init``'s tensors in
    shape and dtype. Returns ``(final_carry, ys)``: ``final_carry`` structured like ``init``,
    ``ys`` the ``y`` slices stacked along ``dim`` (in ``xs`` order, also when ``reverse``).
    ``init``/``xs`` may be pytrees (tuples/lists/dicts) of tensors."""
    leaves_init, spec_init = tree_flatten(init)
    leaves_xs, spec_xs = tree_flatten(xs)
    if len(leaves_xs) == 0:            # torch's shortcut: nothing to scan
        return init, []
    if not callable(combine_fn):
        raise RuntimeError(f"Combine_fn must be a callable, but got {combine_fn}")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise RuntimeError("Dim must be an int, but got " + str(type(dim)))
    if not isinstance(reverse, bool):
        raise RuntimeError("Reverse must be a bool, but got " + str(type(reverse)))
    _check_leaves("xs", leaves_xs)
    dim = _canonical_dim(leaves_xs[0].ndim, dim)
    if len(leaves_init) == 0:
        raise RuntimeError("scan() operator requires init leaves.")
    _check_leaves("init", leaves_init)
    if any(x.ndim <= dim for x in leaves_xs) or any(x.shape[dim] == 0 for x in leaves_xs):
        raise RuntimeError("All xs leaves must at least have 'dim' number of dimensions and scan dimension > 0")
    n = leaves_xs[0].shape[dim]
    if any(x.shape[dim] != n for x in leaves_xs):
        raise RuntimeError(f"scan: all xs leaves must have the same size along dim {dim}, got sizes "
                           f"{[x.shape[dim] for x in leaves_xs]}")
    _unroll_or_break("scan", n)
    carry = list(leaves_init)
    ys = []
    y_spec = None
    steps = range(n - 1, -1, -1) if reverse else range(n)
    for i in steps:
        slices = [x.select(dim, i) for x in leaves_xs]
        out = _call_checked("scan", combine_fn, carry + slices,
                            (tree_unflatten(carry, spec_init), tree_unflatten(slices, spec_xs)))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise RuntimeError(f"scan: combine_fn must return a tuple (next_carry, y), got "
                               f"{type(out).__name__}{'' if not isinstance(out, (tuple, list)) else f' of length {len(out)}'}")
        next_carry, _ = tree_flatten(out[0])
        if len(next_carry) != len(carry):
            raise RuntimeError(f"scan: combine_fn returned {len(next_carry)} carry leaves, expected "
                               f"{len(carry)} (one per init leaf)")
        _check_leaves("carry", next_carry)
        for j, (a, b) in enumerate(zip(leaves_init, next_carry)):
            why = _same_meta(a, b)
            if why:
                raise RuntimeError(f"Expected init and carry to have same metadata but found:\npair[{j}] differ "
                                   f"in {why}")
        y_leaves, spec = tree_flatten(out[1])
        _check_leaves("y", y_leaves)
        if y_spec is None:
            y_spec, y_first, y_struct = spec, y_leaves, _structure(out[1])
        elif _structure(out[1]) != y_struct:
            raise RuntimeError(f"scan: combine_fn returned y of a different structure at step {i}: "
                               f"{_structure(out[1])} vs {y_struct}")
        else:
            for j, (a, b) in enumerate(zip(y_first, y_leaves)):
                why = _same_meta(a, b)
                if why:
                    raise RuntimeError(f"scan: combine_fn's y leaf {j} changed between steps (slices are stacked): "
                                       f"they differ in {why}")
        carry = next_carry
        ys.append(y_leaves)
    if reverse:
        ys.reverse()
    stacked = []
    for j in range(len(y_first)):
        at = dim if dim <= y_first[j].ndim else 0
        stacked.append(ember.stack([y[j] for y in ys], at))
    return tree_unflatten(carry, spec_init), tree_unflatten(stacked, y_spec)


def associative_scan(combine_fn, xs, dim: int, reverse: bool = False, combine_mode: str = "pointwise"):
    """Inclusive scan of ``xs`` along ``dim`` with an associative ``combine_fn``
    (``torch._higher_order_ops.associative_scan``): output ``i`` is
    ``combine_fn(... combine_fn(xs[0], xs[1]) ..., xs[i])`` (from the end when ``reverse``).

    ``combine_mode="generic"`` calls ``combine_fn`` on single slices, one step per element (any
    body: matmuls, reductions). ``"pointwise"`` (the body is elementwise; CUDA tensors only, as
    in torch) calls it on whole shifted blocks, ``log2(n)`` times (Hillis-Steele): fewer, larger
    ops -- a short graph when compiled. ``xs`` may be a pytree of tensors of equal size along
    ``dim``."""
    leaves, spec = tree_flatten(xs)
    if not callable(combine_fn):
        raise ValueError(f"Combine_fn must be a callable, but got {combine_fn}")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise ValueError("Dim must be an int, but got " + str(type(dim)))
    if not isinstance(reverse, bool):
        raise RuntimeError("Reverse must be a bool, but got " + str(type(reverse)))
    if combine_mode not in ("pointwise", "generic"):
        raise ValueError(f"Combine_mode must either 'pointwise' or 'generic', but got {combine_mode}")
    if combine_mode == "pointwise" and not all(_is_tensor(x) and x.device.type in ("cuda", "xpu") for x in leaves):
        # torch's rule, kept: the blocked algorithm trusts the body to be elementwise, which a CPU
        # user's code (written for torch, where this raises) has never been checked for
        raise ValueError("For combine_mode='pointwise', all input tensors need to be on CUDA or XPU")
    if len(leaves) == 0:
        raise ValueError("Expected at least 1 xs leaf")
    if any(not _is_tensor(x) for x in leaves):
        raise ValueError("xs leaves must be a Tensor")
    if any(x.is_sparse for x in leaves):
        raise ValueError("xs leaves must dense Tensors, consider using `to_dense()`")
    dim = _canonical_dim(leaves[0].ndim, dim)
    if any(x.ndim <= dim for x in leaves) or any(x.shape[dim] == 0 for x in leaves):
        raise ValueError("All xs leaves must at least have 'dim' number of dimensions and scan dimension > 0")
    n = leaves[0].shape[dim]
    if any(x.shape[dim] != n for x in leaves):
        raise ValueError(f"associative_scan: all xs leaves must have the same size along dim {dim}, got sizes "
                         f"{[x.shape[dim] for x in leaves]}")
    if reverse:
        leaves = [x.flip([dim]) for x in leaves]
    if combine_mode == "generic":
        _unroll_or_break("associative_scan", n)
        out = _sequential_scan(combine_fn, leaves, spec, dim, n)
    else:
        out = _blocked_scan(combine_fn, leaves, spec, dim, n)
    if reverse:
        out = [x.flip([dim]) for x in out]
    return tree_unflatten(out, spec)


def _combined(combine_fn, a, b, spec, like):
    """``combine_fn`` on two lists of leaves, its result flattened and checked against ``like``."""
    res, _ = tree_flatten(_call_checked("associative_scan", combine_fn, list(a) + list(b),
                                        (tree_unflatten(a, spec), tree_unflatten(b, spec))))
    if len(res) != len(like):
        raise RuntimeError(f"associative_scan: combine_fn must return the same structure as its inputs "
                           f"({len(like)} tensor leaves), got {len(res)} leaves")
    for j, (r, x) in enumerate(zip(res, like)):
        if not _is_tensor(r):
            raise RuntimeError(f"associative_scan: combine_fn returned a {type(r).__name__} for leaf {j}; "
                               f"expected a tensor")
        why = _same_meta(x, r)
        if why:
            raise RuntimeError(f"associative_scan: combine_fn output leaf {j} must match its input in shape and "
                               f"dtype, but they differ in {why}")
    return res


def _sequential_scan(combine_fn, leaves, spec, dim, n):
    acc = [x.select(dim, 0) for x in leaves]
    outs = [acc]
    for i in range(1, n):
        acc = _combined(combine_fn, acc, [x.select(dim, i) for x in leaves], spec, acc)
        outs.append(acc)
    return [ember.stack([o[j] for o in outs], dim) for j in range(len(leaves))]


def _blocked_scan(combine_fn, leaves, spec, dim, n):
    """Hillis-Steele: after the step with shift ``s`` element ``i`` holds the combination of
    ``xs[max(0, i-2s+1) .. i]``; each step combines every element with the one ``s`` before."""
    cur = list(leaves)
    shift = 1
    while shift < n:
        earlier = [x.narrow(dim, 0, n - shift) for x in cur]
        later = [x.narrow(dim, shift, n - shift) for x in cur]
        merged = _combined(combine_fn, earlier, later, spec, later)
        cur = [ember.cat([x.narrow(dim, 0, shift), m], dim) for x, m in zip(cur, merged)]
        shift *= 2
    return cur


def map(f, xs, *args):
    """``stack([f(xs[i], *args) for i in range(len)])`` over the leading dimension of ``xs``
    (``torch._higher_order_ops.map`` / ``functorch.experimental.control_flow.map``). ``xs`` may be
    a pytree of tensors sharing their leading size; ``f``'s outputs (a pytree of tensors) are
    stacked leaf by leaf."""
    flat_xs, xs_spec = tree_flatten(xs)
    if not all(_is_tensor(t) for t in flat_xs):
        raise RuntimeError(f"Mapped xs can only consist of tensors. Got xs {flat_xs}.")
    if len(flat_xs) == 0:
        raise RuntimeError("map: xs must hold at least one tensor to map over, got none")
    if any(t.ndim == 0 for t in flat_xs):
        raise RuntimeError(f"map: mapped xs must have a leading dimension, got shapes "
                           f"{[tuple(t.shape) for t in flat_xs]}")
    shapes = [t.shape for t in flat_xs]
    n = shapes[0][0]
    if n == 0:
        raise RuntimeError("Leading dimensions of mapped xs cannot be 0.")
    if any(s[0] != n for s in shapes):
        raise RuntimeError(f"Leading dimensions of mapped xs must be consistent. Got shapes {shapes}.")
    _unroll_or_break("map", n)
    outs = []
    out_spec = None
    for i in range(n):
        slices = [t[i] for t in flat_xs]
        out = _call_checked("map", f, slices, (tree_unflatten(slices, xs_spec),) + args)
        res, spec = tree_flatten(out)
        if not all(_is_tensor(r) for r in res):
            raise RuntimeError(f"map: f must return a tensor or a pytree of tensors, got {res}")
        if out_spec is None:
            out_spec, out_struct = spec, _structure(out)
        elif _structure(out) != out_struct:
            raise RuntimeError(f"map: f returned outputs of different structures: {_structure(out)} vs "
                               f"{out_struct}")
        outs.append(res)
    return tree_unflatten([ember.stack([o[j] for o in outs], 0) for j in range(len(outs[0]))], out_spec)
