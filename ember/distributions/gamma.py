from __future__ import annotations

import numbers

import numpy as np

import ember

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Gamma"]


def _standard_gamma(concentration):
    """Gamma(concentration, 1) draws from ember's default generator (numpy PCG64 underneath).

    The result carries no gradient w.r.t. ``concentration`` (torch differentiates through
    ``_standard_gamma`` implicitly; ember does not, see ``Gamma.rsample``).
    """
    from ember.random import default_generator
    conc = concentration.detach().numpy().astype(np.float64)
    draws = default_generator._np.standard_gamma(conc)
    return ember.tensor(np.asarray(draws, dtype=np.float64), dtype=concentration.dtype)


class Gamma(Distribution):
    """Gamma distribution with shape ``concentration`` and inverse scale ``rate``."""
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number):
            batch_shape = ()
        else:
            batch_shape = self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        """Reparameterized w.r.t. ``rate`` only: the standard-gamma draw is treated as a
        constant, so no gradient reaches ``concentration`` (torch has one there)."""
        shape = tuple(self._extended_shape(sample_shape))
        std = _standard_gamma(self.concentration.expand(shape))
        std = std.clamp(min=ember.finfo(std.dtype).tiny)
        return std / self.rate.expand(shape)

    def log_prob(self, value):
        if not isinstance(value, ember.Tensor):
            value = ember.tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return (ember.xlogy(self.concentration, self.rate) + ember.xlogy(self.concentration - 1, value)
                - self.rate * value - ember.lgamma(self.concentration))

    def entropy(self):
        return (self.concentration - ember.log(self.rate) + ember.lgamma(self.concentration)
                + (1.0 - self.concentration) * ember.digamma(self.concentration))
