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


class BackwardHook:
    """The machinery behind a module's full backward hooks (torch.utils.hooks.BackwardHook),
    for code that drives it by hand: ``setup_input_hook(args)`` wraps the forward's tensor
    inputs and ``setup_output_hook(outputs)`` its outputs in identity autograd nodes; in
    backward, ``user_pre_hooks`` run as ``hook(module, grad_output)`` and ``user_hooks`` as
    ``hook(module, grad_input, grad_output)``, each may return replacements. It is the same
    mechanism ``Module.register_full_backward_hook`` uses."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        from ..nn.modules.module import _BackwardHookState
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self._state = _BackwardHookState(module, list(user_hooks), list(user_pre_hooks), 0)

    def setup_input_hook(self, args):
        from ..nn.modules.module import Module, _tensor_positions
        self._state.n_inputs = len(_tensor_positions(args))
        return Module._wrap_inputs(self.module, self._state, tuple(args))

    def setup_output_hook(self, args):
        from ..nn.modules.module import Module
        return Module._wrap_outputs(self.module, self._state, args)


__all__ += ["BackwardHook"]
