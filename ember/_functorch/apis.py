"""``torch._functorch.apis``: the function transforms, as ``ember.func`` has them."""
from ..func import grad, grad_and_value, vmap

__all__ = ["grad", "grad_and_value", "vmap"]
