"""C extensions of ember: ``_eval_frame``, the PEP 523 frame hook used by ember.dynamo.

It is compiled by ``pip install -e .`` (setup.py); a source checkout that was
never installed has no compiled module, and ember.dynamo then says so."""


def _load_eval_frame():
    try:
        from . import _eval_frame
    except ImportError as e:
        raise ImportError(
            "ember._C._eval_frame (the frame hook behind ember.compile) is not built for this Python: "
            "run `pip install -e .` in the ember checkout (needs a C compiler)") from e
    return _eval_frame


# torch._C's names for the __torch_function__ protocol's switches (ember/_torch_function.py)
from .._torch_function import (DisableTorchFunction, DisableTorchFunctionSubclass,  # noqa: E402,F401
                               _disabled_torch_function_impl, is_torch_function_enabled as _is_torch_function_enabled)


def _is_torch_function_mode_enabled():
    from ..overrides import _is_torch_function_mode_enabled as enabled
    return enabled()


class _AutoDispatchBelowAutograd:
    """torch._C._AutoDispatchBelowAutograd: ops called inside record no autograd (an ``Autograd``
    kernel of ``ember.library`` redispatches to the backend kernel with it). In ember that is
    grad mode off for the block."""

    def __enter__(self):
        from .._state import STATE
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = False
        return self

    def __exit__(self, *exc):
        from .._state import STATE
        STATE.grad_enabled = self._prev
        return False
