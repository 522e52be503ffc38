"""``torch._subclasses``: fake tensors (``fake_tensor``) on ember's own (``ember.fx.fake_tensor``)."""
from . import fake_tensor
from .fake_tensor import (DynamicOutputShapeException, FakeTensor, FakeTensorMode, UnsupportedFakeTensorException)

__all__ = ["fake_tensor", "FakeTensor", "FakeTensorMode", "DynamicOutputShapeException",
           "UnsupportedFakeTensorException"]
