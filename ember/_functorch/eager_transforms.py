"""``torch._functorch.eager_transforms``: the function transforms, as ``ember.func`` has them."""
from ..func import (functionalize, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp)

__all__ = ["functionalize", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "linearize", "vjp"]
