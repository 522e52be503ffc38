"""``ember.func``: function transforms over modules (``functional_call``)."""
from .nn.utils.stateless import functional_call

__all__ = ["functional_call"]
