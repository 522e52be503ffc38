"""Grad-mode switches: no_grad, enable_grad, set_grad_enabled, inference_mode.

Each works as a context manager and as a decorator, like PyTorch's.
``inference_mode`` disables recording exactly like ``no_grad``; ember has no
separate inference-tensor kind (tensors made inside it are ordinary tensors).
"""
from __future__ import annotations

import functools
import inspect

from .._state import STATE


class _GradModeContext:
    _target = None  # value grad mode takes inside

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self._target
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        if inspect.isclass(fn):
            raise TypeError(f"{type(self).__name__} cannot decorate a class")
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen_wrapper(*args, **kwargs):
                gen = fn(*args, **kwargs)
                with type(self)._fresh(self):
                    resp = gen.send(None)
                while True:
                    try:
                        sent = yield resp
                    except GeneratorExit:
                        gen.close()
                        raise
                    with type(self)._fresh(self):
                        resp = gen.send(sent)
            return gen_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)._fresh(self):
                return fn(*args, **kwargs)
        if type(self) in (no_grad, enable_grad):
            # dynamo traces a call as the function in a grad-mode block (not as one operator)
            wrapper._ember_grad_mode_target = type(self)._target
        return wrapper

    @classmethod
    def _fresh(cls, proto):
        return cls()

    def clone(self):
        return type(self)()


class no_grad(_GradModeContext):
    _target = False

    def __init__(self, *args):
        if args and callable(args[0]):
            raise TypeError("use @no_grad() (with parentheses) as a decorator")


class enable_grad(_GradModeContext):
    _target = True


class set_grad_enabled(_GradModeContext):
    def __init__(self, mode):
        self._target = bool(mode)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self._target

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False

    @classmethod
    def _fresh(cls, proto):
        return _Scoped(proto._target)

    def clone(self):
        return set_grad_enabled(self._target)


class _Scoped(_GradModeContext):
    def __init__(self, target):
        self._target = target


class inference_mode(_GradModeContext):
    def __init__(self, mode=True):
        self.mode = mode
        self._target = not mode if mode else STATE.grad_enabled

    def __enter__(self):
        self._prev = STATE.grad_enabled
        self._prev_inf = STATE.inference
        if self.mode:
            STATE.grad_enabled = False
            STATE.inference = True
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        STATE.inference = self._prev_inf
        return False

    @classmethod
    def _fresh(cls, proto):
        return cls(proto.mode)


def is_grad_enabled():
    return STATE.grad_enabled


def is_inference_mode_enabled():
    return STATE.inference


# torch.autograd.grad_mode's other switches (they live in _switches.py)
from ._switches import (_force_original_view_tracking, _unsafe_preserve_version_counter,  # noqa: E402,F401
                        enforce_grad_layout_policy, set_multithreading_enabled)
