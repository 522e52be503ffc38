"""``ember.ops.higher_order``: torch's ``torch.ops.higher_order`` namespace (graph-node HOPs).

``cond``: data-dependent control flow as one graph node (``ember/_higher_order_ops/cond_op.py``)."""
from .._higher_order_ops.cond_op import cond_op as cond

__all__ = ["cond"]
