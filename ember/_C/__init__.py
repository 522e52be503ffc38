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
