"""``ember.nn.qat``: torch's older spelling of ``ember.ao.nn.qat`` (the same classes)."""
from ember.ao.nn.qat import Linear, Conv2d  # noqa: F401
