"""ember.utils.hooks: where PyTorch code imports ``RemovableHandle`` from (the class lives
beside the module hooks that return it)."""
from ..nn.modules.module import RemovableHandle

__all__ = ["RemovableHandle"]


import warnings as _warnings  # noqa: E402


def unserializable_hook(f):
    """Mark ``f`` as a tensor hook that is not expected to survive serialisation (silences
    ``warn_if_has_hooks`` for it)."""
    f.__torch_unserializable__ = True
    return f


def _tensor_hooks(tensor):
    """The hooks registered on ``tensor`` with ``register_hook`` (a leaf keeps them itself,
    a non-leaf on its grad_fn, per output)."""
    fn = tensor.grad_fn
    if fn is None:
        return dict(tensor._hooks or {})
    store = fn._tensor_pre_hooks or {}
    return dict(store.get(tensor._output_nr, {}))


def warn_if_has_hooks(tensor) -> None:
    """Warn for each backward hook on ``tensor`` not marked ``unserializable_hook``: pickling a
    tensor drops its hooks."""
    for hook in _tensor_hooks(tensor).values():
        if not hasattr(hook, "__torch_unserializable__"):
            _warnings.warn(f"backward hook {hook!r} on tensor will not be serialized.  If this is expected, you can "
                           "decorate the function with @torch.utils.hooks.unserializable_hook to suppress this "
                           "warning", stacklevel=2)


__all__ += ["unserializable_hook", "warn_if_has_hooks"]
