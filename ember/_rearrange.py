"""``ember.func.rearrange``: einops-style ``rearrange(tensor, "b (h w) c -> b h w c", h=4)``.

PyTorch's ``torch.func.rearrange`` (functorch's native einops) parses the pattern, binds each
tensor dimension to the axes written for it (a parenthesised group splits the dimension; one
axis of a group may be left for the others' lengths to imply) and reorders/merges them as the
right side says. ember follows its rules and its messages -- including its quirks, which
code written against PyTorch sees: an anonymous ``1`` or ``()`` on the *left* is bound to
whatever size that dimension has and is summed away (not required to be 1), and a pattern
with no axes at all returns the input itself. One deliberate difference: PyTorch ignores a
given length that contradicts a one-dimensional input's size (``rearrange(t6, "c -> c",
c=2)`` returns ``t6``); ember raises its usual "Dimension sizes to do not match" error.

The work is one ``reshape`` to the bound axes, one ``permute`` to the right side's order,
a ``sum`` over left-side anonymous axes when there are any, and one ``reshape`` merging the
right side's groups -- views wherever reshape can give one, as PyTorch's.
"""
from __future__ import annotations

import keyword
import warnings

__all__ = ["rearrange", "DimensionBindError"]

_ELLIPSIS = "\u2026"   # "..." is rewritten to this single character before parsing (as PyTorch's parser)


class DimensionBindError(Exception):
    """A tensor dimension's size cannot be split into the axes the pattern gives it
    (functorch.dim.DimensionBindError)."""


class _Anonymous:
    """A numeric axis (``2``...): rearrange refuses those; each is a distinct identifier."""

    def __init__(self, text):
        self.value = int(text)
        if self.value < 1:
            raise ValueError(f"Anonymous axis should have positive length, not {self.value}")

    def __repr__(self):
        return f"{self.value}-axis"


class _Side:
    """One side of a pattern: ``groups`` holds, per position, a list of axis names (a bare
    name is a one-name list; an empty list is an anonymous 1 or ``()``) or the ellipsis."""

    def __init__(self, text: str):
        self.has_ellipsis = False
        self.ellipsis_in_group = None
        self.identifiers = set()
        self.has_numbered_axes = False
        self.groups = []
        if "." in text:
            if "..." not in text:
                raise ValueError("Expression may contain dots only inside ellipsis (...)")
            if text.count("...") != 1 or text.count(".") != 3:
                raise ValueError("Expression may contain dots only inside ellipsis (...); only one ellipsis for tensor ")
            text = text.replace("...", _ELLIPSIS)
            self.has_ellipsis = True
        group = None
        token = ""
        for ch in text:
            if ch in "() ":
                if token:
                    self._add(token, group)
                token = ""
                if ch == "(":
                    if group is not None:
                        raise ValueError("Axis composition is one-level (brackets inside brackets not allowed)")
                    group = []
                elif ch == ")":
                    if group is None:
                        raise ValueError("Brackets are not balanced")
                    self.groups.append(group)
                    group = None
            elif ch.isalnum() or ch in ("_", _ELLIPSIS):
                token += ch
            else:
                raise ValueError(f"Unknown character '{ch}'")
        if group is not None:
            raise ValueError(f"Imbalanced parentheses in expression: '{text}'")
        if token:
            self._add(token, group)

    def _add(self, name, group):
        if name in self.identifiers:
            raise ValueError(f"Indexing expression contains duplicate dimension '{name}'")
        if name == _ELLIPSIS:
            self.identifiers.add(name)
            self.ellipsis_in_group = group is not None
            (self.groups if group is None else group).append(name)
            return
        numeric = name.isdecimal()
        if numeric and int(name) == 1:
            if group is None:
                self.groups.append([])        # an anonymous axis of length 1 (inside a group: nothing)
            return
        if not numeric:
            reason = _axis_name_problem(name)
            if reason:
                raise ValueError(f"Invalid axis identifier: {name}\n{reason}")
        axis = _Anonymous(name) if numeric else name
        self.identifiers.add(axis)
        self.has_numbered_axes |= numeric
        if group is None:
            self.groups.append([axis])
        else:
            group.append(axis)


def _axis_name_problem(name):
    if not name.isidentifier():
        return "not a valid python identifier"
    if name[0] == "_" or name[-1] == "_":
        return "axis name should should not start or end with underscore"
    if keyword.iskeyword(name):
        warnings.warn(f"It is discouraged to use axes names that are keywords: {name}", RuntimeWarning)
    if name == "axis":
        warnings.warn("It is discouraged to use 'axis' as an axis name and will raise an error in future",
                      FutureWarning)
    return ""


def _parse(pattern, axes_lengths):
    parts = pattern.split("->")
    if len(parts) != 2:
        raise ValueError("Pattern must contain a single '->' separator")
    if _ELLIPSIS in axes_lengths:
        raise ValueError(f"'{_ELLIPSIS}' is not an allowed axis identifier")
    left, right = _Side(parts[0]), _Side(parts[1])
    if right.has_ellipsis and not left.has_ellipsis:
        raise ValueError(f"Ellipsis found in right side, but not left side of a pattern {pattern}")
    if left.has_ellipsis and left.ellipsis_in_group:
        raise ValueError(f"Ellipsis is parenthesis in the left side is not allowed: {pattern}")
    for length in axes_lengths.values():
        if type(length) is not int:
            raise TypeError(f"rearrange axis lengths must be integers, got: {type(length)}")
    if left.has_numbered_axes or right.has_numbered_axes:
        raise ValueError("rearrange only supports unnamed axes of size 1")
    one_sided = set.symmetric_difference(left.identifiers, right.identifiers)
    if one_sided:
        raise ValueError(f"Identifiers only on one side of rearrange expression (should be on both): {one_sided}")
    unknown = axes_lengths.keys() - left.identifiers
    if unknown:
        raise ValueError(f"Identifiers not found in rearrange expression: {unknown}")
    return left, right


class _Axis:
    """One bound axis (printed as PyTorch's first-class dims are: d0, d1...)."""

    def __init__(self, index):
        self.name = f"d{index}"
        self.size = None

    def __repr__(self):
        return self.name


def _bind_group(size, axes):
    """Give ``axes`` (one tensor dimension split in order) their sizes: at most one may be
    unknown, implied by the others; the product must be ``size``."""
    product = 1
    for i, axis in enumerate(axes):
        if axis.size is None:
            for later in axes[i + 1:]:
                if later.size is None:
                    raise DimensionBindError(f"cannot infer the sizes of two dimensions at once {axis!r} and {later!r}")
                product *= later.size
            if size % product != 0:
                shown = tuple(a.size if a.size is not None else "?" for a in axes)
                raise DimensionBindError(f"inferred dimension does not evenly fit into larger dimension: {size} vs {shown}")
            axis.size = size // product
            product = size
            break
        product *= axis.size
    if product != size:
        raise DimensionBindError(f"Dimension sizes to do not match ({size} != {product}) when matching dimension "
                                 f"pack {tuple(axes)}")


def rearrange(tensor, pattern: str, **axes_lengths):
    """Reorder, split and merge ``tensor``'s dimensions as ``pattern`` says (einops'
    ``rearrange``, PyTorch's ``torch.func.rearrange``); a list or tuple of tensors is
    stacked first. ``axes_lengths`` give the sizes of split axes."""
    from . import stack
    from .tensor import Tensor
    if not isinstance(tensor, Tensor):
        tensor = stack(tensor)
    hash(tuple(axes_lengths.items()))        # PyTorch memoises on these: unhashable lengths fail here
    if not isinstance(pattern, str):
        raise TypeError(f"rearrange(): argument 'pattern' must be str, not {type(pattern).__name__}")
    left, right = _parse(pattern, axes_lengths)
    ndim = tensor.dim()
    n_anonymous = sum(1 for g in left.groups if isinstance(g, list) and not g)
    if left.has_ellipsis:
        n_ellipsis = ndim - (len(left.groups) - 1)
        n_named = len(left.identifiers) - 1
        if n_anonymous + n_named > ndim:
            raise ValueError(f"Number of dimensions in pattern ({n_anonymous + n_named}) must be less than or equal "
                             f"to the number of dimensions in the tensor ({ndim})")
    else:
        n_ellipsis, n_named = 0, len(left.identifiers)
        if len(left.groups) != ndim:
            raise ValueError(f"Number of dimensions in pattern ({len(left.groups)}) must be equal to the number of "
                             f"dimensions in the tensor ({ndim})")
    n_axes = n_named + n_ellipsis + n_anonymous
    if n_axes == 0:
        return tensor

    axes = [_Axis(i) for i in range(n_axes)]
    axis_of = {}            # identifier -> [its axes] (the ellipsis: all of its axes)
    anonymous = []
    left_packs = []         # per tensor dimension: (the axes it splits into, is a pack)
    it = iter(axes)
    for g in left.groups:
        if g == _ELLIPSIS:
            mine = [next(it) for _ in range(n_ellipsis)]
            axis_of[_ELLIPSIS] = mine
            left_packs += [([a], False) for a in mine]
        elif g:
            pack = []
            for name in g:
                axis = next(it)
                axis_of[name] = [axis]
                pack.append(axis)
            left_packs.append((pack, True))
        else:
            axis = next(it)
            anonymous.append(axis)
            left_packs.append(([axis], True))
    right_positions = []    # per output dimension: the axes merged into it
    for g in right.groups:
        if g == _ELLIPSIS:
            right_positions += [[a] for a in axis_of[_ELLIPSIS]]
        else:
            right_positions.append([a for name in g for a in axis_of[name]])
    for name, length in axes_lengths.items():
        axis_of[name][0].size = length
    if len(left_packs) == 1 and left_packs[0][1]:
        # a one-dimensional input split by a group: PyTorch indexes with the group's tuple
        # itself (``t[(d0, d1)]`` is ``t[d0, d1]``), which refuses these two cases
        pack = left_packs[0][0]
        if len(pack) > 1:
            raise ValueError(f"at least {len(pack)} indices were supplied but the tensor only has 1 dimensions")
    for size, (pack, is_pack) in zip(tensor.shape, left_packs):
        if is_pack:
            _bind_group(size, pack)
        else:
            pack[0].size = size
    n_empty = sum(1 for pos in right_positions if not pos)
    if anonymous and n_empty:
        # PyTorch's first-class-dims ``order`` cannot add a size-1 dimension while an
        # anonymous axis is still to be summed away: it fails with this assertion
        levels = len(right_positions) + len(anonymous)
        raise AssertionError(f"Tensor has {levels} dimensions but {levels - n_empty} levels provided")
    index = {id(a): i for i, a in enumerate(axes)}
    order = [index[id(a)] for pos in right_positions for a in pos]
    split = tensor.reshape([a.size for a in axes])
    moved = split.permute(order + [index[id(a)] for a in anonymous])
    if anonymous:
        moved = moved.sum(tuple(range(len(order), n_axes)))
    final = []
    for pos in right_positions:
        n = 1
        for a in pos:
            n *= a.size
        final.append(n)
    return moved.reshape(final)
