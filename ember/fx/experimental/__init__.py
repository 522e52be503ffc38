"""Experimental fx tooling: :func:`~ember.fx.experimental.proxy_tensor.make_fx`
traces any callable through ember's dispatcher into an op-level graph."""

from .proxy_tensor import make_fx

__all__ = ["make_fx"]
