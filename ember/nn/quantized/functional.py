"""``ember.nn.quantized.functional``: torch's older spelling of ``ember.ao.nn.quantized.functional``."""
from ember.ao.nn.quantized.functional import *  # noqa: F401,F403
from ember.ao.nn.quantized.functional import __getattr__  # noqa: F401
