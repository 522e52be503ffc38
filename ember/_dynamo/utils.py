"""``torch._dynamo.utils.counters``: ember.dynamo's counters (frames compiled, graph breaks ...)."""
from ..dynamo import counters

__all__ = ["counters"]
