"""``loss_parallel``: cross-entropy on logits sharded over the class dim without gathering them.

Inside the context, ``log_softmax`` over a class dim that is sharded computes the max and the
sum of exponentials with all-reduces, and ``nll_loss`` picks each target's log-probability on
the rank that holds that class (a masked lookup whose results add up). The rules live with the
other nn ops (``_ops/_nn.py``); this module only holds the switch they read. Meshes must be 1-D;
logits sharded elsewhere than the class dim take the ordinary (gathering) path."""
from __future__ import annotations

import contextlib

_STATE = {"on": False}


def enabled():
    return _STATE["on"]


@contextlib.contextmanager
def loss_parallel():
    """Within it, cross_entropy accepts a DTensor input Shard on the class dim (torch's loss_parallel)."""
    prev = _STATE["on"]
    _STATE["on"] = True
    try:
        yield
    finally:
        _STATE["on"] = prev
