"""C extensions of ember: ``_eval_frame``, the PEP 523 frame hook used by ember.dynamo, and
``_guards``, the tensor check of its guard functions (optional: Python checks stand in).

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


def _load_guards():
    """``ember._C._guards`` (the C tensor check of dynamo's guards, guards.c), ready to use, or
    None where it is not built (a checkout built before it existed) or where its reading of numpy
    arrays' shape and strides disagrees with numpy's: ember.dynamo then checks tensors with
    Python expressions (slower, same answers)."""
    try:
        from . import _guards
    except ImportError:
        return None
    import numpy as np
    _guards.set_ndarray_type(np.ndarray)
    samples = (np.empty((2, 3, 5), np.float32)[:, ::2], np.empty((), np.float64), np.empty((0, 4), np.int8).T,
               np.empty((3, 1, 4), np.int64)[::-1, :, 1:3], np.empty(7, np.complex64))
    if any(_guards.array_layout(a) != (a.shape, a.strides) for a in samples):
        return None
    return _guards


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
