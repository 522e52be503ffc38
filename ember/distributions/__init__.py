"""ember.distributions: a core subset of ``torch.distributions`` with the same API and numbers.

Parameters are ember tensors (Python numbers are accepted where torch accepts them);
``log_prob``/``entropy``/``mean``/``variance``/``kl_divergence`` are differentiable w.r.t.
parameters, and ``rsample`` is reparameterized. Samples come from ember's default generator,
so ``ember.manual_seed`` makes them reproducible (the values differ from torch's).
"""
from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = [
    "Bernoulli", "Categorical", "Distribution", "Exponential", "Gamma", "Independent", "Laplace",
    "MultivariateNormal", "Normal", "OneHotCategorical", "Uniform", "constraints", "kl_divergence",
    "register_kl",
]
