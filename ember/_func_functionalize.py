"""``ember.func.functionalize`` and ``replace_all_batch_norm_modules_`` (``torch.func``).

functionalize(func) must compute what ``func`` computes while the function body mutates no
tensor the caller passed in, then apply those input mutations back, so the outputs never
alias the inputs and the caller still sees every in-place change. ember runs eagerly, so the
straightforward way is exact: the body runs on clones of the tensor inputs (clones are
differentiable, so gradients still reach the caller's tensors), and each input whose clone was
written to (its version counter moved, through the clone or any view of it) receives the
clone's final value with ``copy_``. ember's aot pipeline functionalizes traced graphs, which
is a different job (graphs, not calls); it is not needed here.
"""
from __future__ import annotations

import functools

_REMOVE_ERROR = ("functionalize(f, remove='mutations'): received invalid argument for remove={remove}. Valid "
                 "options are:\n     remove='mutations': all inplace and out= operators will be removed from the "
                 "program, and replaced with their out-of-place equivalents.\n     remove='mutations_and_views': "
                 "In addition to the above, all aliasing operators {{view}} will be replaced with their "
                 "non-aliasing counterparts, {{view}}_copy.\n")


def functionalize(func, *, remove="mutations"):
    """A function computing ``func``'s outputs, with its mutations of tensor inputs applied back
    to the caller's tensors after the call and no output aliasing an input (see the module).
    ``remove="mutations_and_views"`` gives the same results (views are private clones already)."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(_REMOVE_ERROR.format(remove=remove))
    from .tensor import Tensor
    from .utils._pytree import tree_flatten, tree_unflatten

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        flat, spec = tree_flatten((args, kwargs))
        pairs = [(x, x.clone()) if isinstance(x, Tensor) else (x, None) for x in flat]
        inner = [c if c is not None else x for x, c in pairs]
        inner_args, inner_kwargs = tree_unflatten(inner, spec)
        out = func(*inner_args, **inner_kwargs)
        for orig, clone in pairs:
            if clone is not None and clone._version != 0:
                orig.copy_(clone)
        return out
    return wrapped


def _batch_norm_without_running_stats(module):
    from .nn.modules.batchnorm import _BatchNorm
    if isinstance(module, _BatchNorm) and module.track_running_stats:
        module.running_mean = None
        module.running_var = None
        module.num_batches_tracked = None
        module.track_running_stats = False


def replace_all_batch_norm_modules_(root):
    """``root`` with every BatchNorm module (itself included) switched, in place, to batch
    statistics only: running_mean / running_var / num_batches_tracked None and
    track_running_stats False -- what vmap-ed training over a batch of models needs."""
    for module in root.modules():
        _batch_norm_without_running_stats(module)
    return root
