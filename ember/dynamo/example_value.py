"""Example values: what the translator knows about a tensor while tracing.

This is the one place that decides how example values are computed, so that
switching from real tensors to ember fake tensors (``ember.fx.fake_tensor``)
is a one-place change (``config.use_fake_tensors``).

Fake mode (the default) runs ops on fake tensors (meta functions only).
Real mode (``config.use_fake_tensors = False``):
graph inputs get a private copy with the same shape, strides, dtype, device
and requires_grad (so in-place ops while tracing never touch user data), and
ops run for real. The random-number state is saved before tracing and
restored after it (``preserve_rng``), so tracing never shifts the user's
random stream. A dispatch mode watches every op that runs: an op whose
output shape depends on data (registry tag ``data_dependent``) makes the
frame unsupported, because decisions taken on such a shape would be baked
into the graph unguarded."""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from .. import _torch_function as _tf
from .._state import STATE
from ..ops import registry as _reg
from ..tensor import Tensor, _make
from . import config
from .exc import Unsupported


class _Watch:
    """Dispatch mode that refuses data-dependent ops during example-value computation."""

    def __ember_dispatch__(self, op, args):
        if "data_dependent" in op.tags:
            raise Unsupported(f"data-dependent operator '{op.name}' (output shape depends on tensor data)")
        return _reg.below_autograd(op, args)


# A callable run on each new trace's ShapeEnv in this context (thread / task): ember.export sets
# it to name sizes by its ``Dim`` declarations instead of dynamo's defaults.
SHAPE_ENV_SETUP: contextvars.ContextVar = contextvars.ContextVar("ember_shape_env_setup", default=None)


class ExampleValues:
    def __init__(self):
        self.fake_mode = None
        if config.use_fake_tensors:
            from ..fx.experimental.symbolic_shapes import ShapeEnv
            from ..fx.fake_tensor import FakeTensorMode
            # every trace has a ShapeEnv; it only gets symbols for inputs made dynamic
            self.fake_mode = FakeTensorMode(shape_env=ShapeEnv())
            setup = SHAPE_ENV_SETUP.get()
            if setup is not None:
                setup(self.fake_mode.shape_env)

    @property
    def shape_env(self):
        return self.fake_mode.shape_env if self.fake_mode is not None else None

    def from_input(self, t: Tensor, source=None, dynamic_dims=None, dynamic_strides=False) -> Tensor:
        """The example value of a real graph input ``t``.

        ``dynamic_dims`` (fake mode only): those sizes become ShapeEnv symbols whose source is
        ``source`` (a guard expression), so the guards can read them off the next call's
        inputs; ``dynamic_strides``: a ``t`` that is not C-contiguous gets symbolic strides
        too (``FakeTensorMode.from_tensor``)."""
        if t.__class__ in _tf.DISPATCH_CLASSES:      # a wrapper subclass: rebuilt from its inner tensors' examples
            from .variables.subclass_inputs import example_of
            return example_of(t, self.from_input)
        if self.fake_mode is not None:
            if dynamic_dims or dynamic_strides:
                return self.fake_mode.from_tensor(t, symbolic=True, dynamic_dims=dynamic_dims or (),
                                                  source=source, dynamic_strides=dynamic_strides)
            return self.fake_mode.from_tensor(t)
        d = t._data
        xp = t.device.xp if hasattr(t.device, "xp") else np
        strides = d.strides
        if d.size == 0 or all(s >= 0 for s in strides):
            extent = 1 + sum((n - 1) * s // d.itemsize for n, s in zip(d.shape, strides)) if d.size else 0
            buf = xp.empty(max(extent, 1), dtype=d.dtype)
            arr = xp.lib.stride_tricks.as_strided(buf, shape=d.shape, strides=strides)
            if d.size:
                arr[...] = d
        else:
            arr = d.copy()
        e = _make(arr, t.device)
        if t.requires_grad:
            e.requires_grad_(True)
        return e

    @contextlib.contextmanager
    def running(self):
        """Context for running ops on example values."""
        if self.fake_mode is not None:
            with self.fake_mode:
                yield
            return
        w = _Watch()
        STATE.modes.append(w)
        try:
            yield
        finally:
            modes = STATE.modes
            for i in range(len(modes) - 1, -1, -1):
                if modes[i] is w:
                    del modes[i]
                    break

    def run(self, fn, args, kwargs):
        # (the fake mode itself when there is one: one context manager per traced op, not two)
        with self.fake_mode if self.fake_mode is not None else self.running():
            try:
                res = fn(*args, **kwargs)
                _refuse_meta(res)
                return res
            except Unsupported:
                raise
            except Exception as e:  # the op fails on these inputs: let eager raise it for real
                if type(e).__name__ in ("DataDependentOutputError", "UnsupportedFakeOperator"):
                    raise Unsupported(str(e)) from e
                raise Unsupported(f"op {getattr(fn, '__name__', fn)} raised {type(e).__name__}: {e}") from e


def _refuse_meta(res):
    """A tensor on the meta device in the graph: compiled kernels would have to make it without
    data, so the code runs eagerly (as meta inputs do, variables/builder.py)."""
    items = res if isinstance(res, (tuple, list)) else (res,)
    for r in items:
        if isinstance(r, Tensor) and r.device.type == "meta":
            raise Unsupported("an op making a tensor on the meta device is not compiled by ember.compile; "
                              "the code using it runs eagerly")


@contextlib.contextmanager
def preserve_rng():
    """Tracing runs random ops on example values; the user's random stream must not move."""
    from .. import random as _random
    state = _random.get_rng_state()
    try:
        yield
    finally:
        _random.set_rng_state(state)
