"""``checkpoint(..., debug=True)``: when the recomputation does not match the forward, say how.

A ``CheckpointError`` ("a different number of tensors was saved ...") says *that* the
recomputation went otherwise than the forward, not where. With ``debug=True`` (or
``set_checkpoint_debug_enabled(True)``) both runs are logged op by op, with the user-code stack
of each op, and the error is raised again with both logs, so the first op that differs can be
found by comparing them.
"""
from __future__ import annotations

import os
import traceback
from typing import List

from ._python_dispatch import TorchDispatchMode

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_TEMPLATE = """\
An error happened while unpacking tensors; dumping logs of latest computation
because you passed `debug=True` to `ember.utils.checkpoint.checkpoint()`.

+------------------------------------------------------------------------------+
|        1. Stack traces of the operators that ran in the original forward     |
+------------------------------------------------------------------------------+

{forward_traces}
+------------------------------------------------------------------------------+
|        2. Stack traces of the operators that ran during recomputation        |
+------------------------------------------------------------------------------+

{recompute_traces}
+------------------------------------------------------------------------------+
|       3. Log of operators in the original forward and recomputation          |
+------------------------------------------------------------------------------+

Operations executed during the original forward:

{forward_ops}

Operations executed during recomputation:

{recompute_ops}

+------------------------------------------------------------------------------+
 ERROR: Detected non-determinism while running activation checkpointing

 The tensors saved during the original forward differ from those saved during
 the recomputation: different operators ran in the two. Compare the two
 operator logs above to find the first difference, and the stack traces to find
 where in your code it was called.
--------------------------------------------------------------------------------
"""


def _describe(a) -> str:
    from ..tensor import Tensor
    if isinstance(a, Tensor):
        return f"{a.dtype.__str__().replace('ember.', '')}{list(a.shape)}"
    if isinstance(a, (list, tuple)):
        inner = ", ".join(_describe(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner})"
    return repr(a)


class _OpLog(TorchDispatchMode):
    """Records each op below autograd: a one-line description and the user frames calling it."""

    def __init__(self):
        super().__init__()
        self.lines: List[str] = []
        self.stacks: List[List[str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        parts = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
        self.lines.append(f"{_describe(out)} = {func}({', '.join(parts)})")
        frames = [f"{f.filename}:{f.lineno}:{f.name}" for f in traceback.extract_stack()[:-1]
                  if not os.path.abspath(f.filename).startswith(_EMBER_DIR)]
        self.stacks.append(frames)
        return out

    def __enter__(self):
        self.lines, self.stacks = [], []      # each run (a recomputation per backward) logs afresh
        return super().__enter__()

    def traces(self, label: str) -> str:
        total = len(self.lines)
        return "".join(f"{line}   ({i + 1} of {total} in {label})\n" + "\n".join(frames) + "\n\n"
                       for i, (line, frames) in enumerate(zip(self.lines, self.stacks)))


def debug_context_and_error_cb(error_cls):
    """(context_fn, error callback) for one checkpoint call: the context_fn logs the forward and
    the recomputation; the callback re-raises a ``CheckpointError`` with both logs."""
    fwd, rec = _OpLog(), _OpLog()

    def context_fn():
        return fwd, rec

    def on_error(e):
        raise error_cls(_TEMPLATE.format(
            forward_traces=fwd.traces("original"), recompute_traces=rec.traces("recompute"),
            forward_ops="\n".join(fwd.lines), recompute_ops="\n".join(rec.lines))) from e

    return context_fn, on_error
