"""``ember.nn.utils.prune``: magnitude / random / custom pruning of a module's tensors.

Pruning re-parametrises ``module.<name>`` the way PyTorch's ``torch.nn.utils.prune``
does, so that code and checkpoints written for torch keep working:

* the original parameter moves to ``module.<name>_orig`` (still an ``nn.Parameter``,
  still the thing the optimiser updates);
* a 0/1 mask of the same shape is registered as the buffer ``module.<name>_mask``
  (so ``state_dict`` holds ``<name>_orig`` and ``<name>_mask``, not ``<name>``);
* ``module.<name>`` becomes a plain tensor ``mask * <name>_orig`` that a forward
  pre-hook (the pruning method object itself) recomputes before every call, so
  gradients reach ``<name>_orig`` only through the surviving entries.

Pruning the same tensor again stacks methods in a :class:`PruningContainer`: the new
method only sees the units that are still alive (unstructured: the entries whose
mask is 1; structured: the channels not yet all-zero), so ``amount=0.5`` twice
keeps a quarter. :func:`remove` bakes the current mask into the parameter and
drops the re-parametrisation.

The behaviour (validation, error types and messages, mask dtypes, which random
draws are made) follows torch 2.13; the deliberate differences are listed in the
docstrings of :meth:`BasePruningMethod.apply`, :class:`PruningContainer` and
:func:`global_unstructured` (all of them are cases where torch leaves a module
half-pruned or raises an unrelated error).
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


def _ember():
    # ember imports ember.nn lazily; importing the top level here at call time keeps
    # ``import ember.nn.utils.prune`` free of import cycles.
    import ember
    return ember


class BasePruningMethod(ABC):
    """Base class of a pruning technique.

    A subclass says *which* units to zero (:meth:`compute_mask`) and its
    ``PRUNING_TYPE`` (``"unstructured"``, ``"structured"`` with a ``dim``
    attribute, or ``"global"``), which tells :class:`PruningContainer` what the
    method may still look at when the tensor was pruned before. An instance is
    what gets registered as the module's forward pre-hook: calling it
    recomputes ``module.<name>`` from ``<name>_orig`` and ``<name>_mask``.
    """

    # Set by :meth:`apply` (or by hand, as ``global_unstructured`` does): the name of
    # the tensor this method prunes. None until then.
    _tensor_name = None

    def __call__(self, module, inputs):
        """Forward pre-hook: refresh ``module.<name>`` = mask * original before forward runs,
        so the module always computes with the latest (optimiser-updated) original."""
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """Return the mask for ``t`` (the importance scores, same shape as the tensor):
        ``default_mask`` (ones on a fresh tensor) with this method's pruned units zeroed."""

    def _require_name(self, what):
        if self._tensor_name is None:
            raise AttributeError(f"{type(self).__name__} has not been applied to a tensor yet (no '_tensor_name'): "
                                 f"use {type(self).__name__}.apply(module, name, ...) before {what}")

    def apply_mask(self, module):
        """``module.<name>_mask * module.<name>_orig`` (the mask cast to the original's dtype):
        the pruned tensor, differentiable with respect to the original."""
        self._require_name("apply_mask()")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with a new ``cls(*args, **kwargs)``; return the method
        registered as the hook (the new method, or the container it joined).

        ``importance_scores`` (same shape as the tensor) ranks the entries instead of
        the tensor itself. On the first pruning of ``name`` the parameter moves to
        ``<name>_orig``; after that the mask computed so far is the starting point.

        Unlike torch 2.13, a failure (bad ``importance_scores`` shape, an ``amount``
        larger than what is left, a bad ``dim``) leaves the module exactly as it was:
        torch drops the existing pruning hook before it validates, so an error while
        re-pruning leaves ``<name>`` frozen at its last value.
        """
        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(f"importance_scores should have the same shape as parameter {name} of "
                                     f"{module}, got {importance_scores.shape} vs {orig.shape}")
        else:
            importance_scores = orig

        # an earlier pruning of the same tensor: at most one hook per tensor name
        old_key, old = None, None
        for key, hook in module._forward_pre_hooks.items():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                if old is not None:
                    raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                                         f"{module}. Use a PruningContainer.")
                old_key, old = key, hook

        method = cls(*args, **kwargs)
        method._tensor_name = name
        added_to = None              # the container `method` was appended to (to undo on failure)
        if old is not None:
            if isinstance(old, PruningContainer):
                old.add_pruning_method(method)
                added_to, method = old, old
            else:
                container = PruningContainer(old)
                container.add_pruning_method(method)
                method = container

        ember = _ember()
        first = not isinstance(method, PruningContainer)
        if first:
            default_mask = ember.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(memory_format=ember.contiguous_format)
        # the mask first: until it exists nothing on the module has changed
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
        except BaseException:
            if added_to is not None:
                added_to._pruning_methods = added_to._pruning_methods[:-1]
            raise
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        if old_key is not None:
            del module._forward_pre_hooks[old_key]
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` with this method's mask applied (``t`` itself is not changed and no module is involved)."""
        if importance_scores is not None:
            if importance_scores.shape != t.shape:
                raise AssertionError(f"importance_scores should have the same shape as tensor t, got "
                                     f"{importance_scores.shape} vs {t.shape}")
        else:
            importance_scores = t
        if default_mask is None:
            default_mask = _ember().ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: ``module.<name>`` becomes the ``<name>_orig`` parameter
        (same Parameter object, so optimisers holding it keep working) with the masked values;
        ``<name>_orig`` and ``<name>_mask`` are dropped. Pruned entries stay zero."""
        self._require_name("remove()")
        name = self._tensor_name
        pruned = self.apply_mask(module)
        if name in module.__dict__:
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = pruned.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """The successive pruning methods applied to one tensor, in order.

    ``compute_mask`` runs only the most recent method, on the part of the tensor the
    earlier masks left alive, and writes the result back into the full mask.
    Built from one method (which fixes the tensor name), several methods, or none
    (then set ``_tensor_name`` before adding any). With several methods torch 2.13
    raises an AttributeError; ember takes the tensor name from the first one.
    """

    def __init__(self, *args):
        self._pruning_methods = ()
        if args and isinstance(args[0], BasePruningMethod):
            self._tensor_name = args[0]._tensor_name
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append ``method``; it must prune the same tensor as the container."""
        if method is not None and not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                             f"to PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods = self._pruning_methods + (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """The mask after the latest method, computed on what ``default_mask`` still keeps:
        unstructured -- the entries equal to 1; structured -- the slices along the method's
        ``dim`` that are not all zero; global -- everything."""
        method = self._pruning_methods[-1]
        new_mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            sel = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                                     "`dim` defined.")
            _validate_structured_pruning(t)
            ndim = t.dim()
            dim = method.dim + ndim if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {ndim}")
            alive = default_mask.sum(dim=[d for d in range(ndim) if d != dim]) != 0
            sel = tuple(alive if d == dim else slice(None) for d in range(ndim))
        elif kind == "global":
            sel = tuple(slice(None) for _ in range(t.dim()))
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial = method.compute_mask(t[sel], default_mask=default_mask[sel])
        new_mask[sel] = partial.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing: installs the re-parametrisation with an all-ones mask (useful to
    get ``<name>_orig`` / ``<name>_mask`` in place, e.g. before loading a pruned checkpoint)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class _TopKUnstructured(BasePruningMethod):
    """Unstructured pruning that zeroes the ``amount`` entries ranked first by ``_ranking``."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def _ranking(self, t):
        """(scores, largest): the entries pruned are the k largest (or smallest) scores."""
        raise NotImplementedError(f"{type(self).__name__} must define _ranking")

    def compute_mask(self, t, default_mask):
        ember = _ember()
        size = t.nelement()
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        mask = default_mask.clone(memory_format=ember.contiguous_format)
        if k != 0:
            scores, largest = self._ranking(t)
            idx = ember.topk(scores.reshape(-1), k=k, largest=largest).indices
            mask.view(-1)[idx] = 0
        return mask


class RandomUnstructured(_TopKUnstructured):
    """Zeroes ``amount`` entries (an int count, or a fraction in [0, 1] rounded to a count)
    chosen uniformly at random from ember's default generator."""

    def _ranking(self, t):
        # the k largest of uniform draws are a uniformly random k-subset
        return _ember().rand_like(t), True

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_TopKUnstructured):
    """Zeroes the ``amount`` entries of smallest absolute value (of the tensor, or of
    ``importance_scores`` when given)."""

    def _ranking(self, t):
        return _ember().abs(t), False

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(t, dim, keep):
    """A mask shaped like ``t`` that is ``keep[i]`` on every entry of slice ``i`` along ``dim``."""
    shape = [1] * t.dim()
    shape[dim] = t.shape[dim]
    return keep.to(dtype=t.dtype).reshape(shape) * _ember().ones_like(t)


class RandomStructured(BasePruningMethod):
    """Zeroes ``amount`` whole slices along ``dim`` (e.g. output channels for ``dim=0``),
    chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        ember = _ember()
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        n = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, n)
        _validate_pruning_amount(k, n)
        if k == 0:
            return default_mask
        # keep the slices whose draw lies above the k-th smallest draw
        draws = ember.rand(n)
        threshold = ember.kthvalue(draws, k=k).values
        mask = _channel_mask(t, self.dim, draws > threshold)
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Zeroes the ``amount`` slices along ``dim`` with the smallest L``n`` norm
    (``n`` as ``ember.norm``'s ``p``: an int, ``float('inf')``, ``'fro'``, ...)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        ember = _ember()
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        norms = _compute_norm(t, self.n, self.dim)
        kept = ember.topk(norms, k=size - k, largest=True).indices
        if k == 0:
            return default_mask
        keep = ember.zeros(size, dtype=ember.bool, device=t.device)
        keep[kept] = True
        mask = _channel_mask(t, self.dim, keep)
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given ``mask`` is 0 (on top of any earlier mask)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match self.mask shape "
                                 f"{self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# ----------------------------------------------------------------------------- functional API
def identity(module, name):
    """Install the pruning re-parametrisation on ``module.<name>`` with an all-ones mask."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune ``amount`` random entries of ``module.<name>``; returns ``module``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` with the smallest magnitude; returns ``module``."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune ``amount`` random slices of ``module.<name>`` along ``dim``; returns ``module``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the ``amount`` slices along ``dim`` with the smallest L``n`` norm; returns ``module``."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune several tensors as one: ``pruning_method(**kwargs)`` (an unstructured method class)
    ranks the entries of all ``(module, name)`` pairs together, so ``amount`` is a share of
    the total and a layer with small weights can lose more than another. Each tensor then
    gets a :class:`CustomFromMask` with its part of the joint mask.

    ``importance_scores`` maps ``(module, name)`` to scores for that tensor. ``parameters``
    may be any iterable (torch 2.13 reads it several times, so a generator there silently
    prunes nothing).
    """
    ember = _ember()
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    from .convert_parameters import parameters_to_vector
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n)) for (m, n) in parameters])
    default_mask = parameters_to_vector([getattr(m, n + "_mask") if hasattr(m, n + "_mask")
                                         else ember.ones_like(getattr(m, n)) for (m, n) in parameters])

    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container = PruningContainer()
    container._tensor_name = method._tensor_name = "temp"
    container.add_pruning_method(method)
    final = container.compute_mask(scores, default_mask)

    start = 0
    for m, n in parameters:
        p = getattr(m, n)
        count = p.numel()
        custom_from_mask(m, n, mask=final[start:start + count].view_as(p))
        start += count


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` where ``mask`` is 0; returns ``module``."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent and drop ``<name>_orig`` / ``<name>_mask``
    and the hook; returns ``module``. ValueError when ``name`` was not pruned."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module):
    """True when ``module`` or any submodule carries a pruning hook."""
    for _, sub in module.named_modules():
        for hook in sub._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False


# ----------------------------------------------------------------------------- validation
def _validate_pruning_amount_init(amount):
    """At construction: ``amount`` is a non-negative int, or a real number in [0, 1]."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if isinstance(amount, numbers.Integral):
        bad = amount < 0
    else:
        bad = not 0.0 <= float(amount) <= 1.0
    if bad:
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _validate_pruning_amount(amount, tensor_size):
    """Once the tensor is known: an int amount cannot exceed the number of units there are."""
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={tensor_size}")


def _validate_structured_pruning(t):
    shape = t.shape
    if len(shape) <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {shape} with {len(shape)} dims")


def _compute_nparams_toprune(amount, tensor_size):
    """The number of units to prune: an int amount as is, a fraction rounded half to even (Python's round)."""
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _validate_pruning_dim(t, dim):
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _compute_norm(t, n, dim):
    """The L``n`` norm of every slice of ``t`` along ``dim`` (a vector of length ``t.shape[dim]``)."""
    ndim = t.dim()
    d = dim + ndim if dim < 0 else dim
    return _ember().norm(t, p=n, dim=[i for i in range(ndim) if i != d])
