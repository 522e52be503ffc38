from __future__ import annotations

import math

import ember

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a, b, n):
    """n-th moment of Kumaraswamy(a, b): b B(1 + n/a, b)."""
    arg1 = 1 + n / a
    log_value = ember.lgamma(arg1) + ember.lgamma(b) - ember.lgamma(arg1 + b)
    return b * ember.exp(log_value)


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(a, b) on (0, 1), CDF ``1 - (1 - x^a)^b``: ``(1 - U^(1/b))^(1/a)`` for
    ``U ~ Uniform(0, 1)`` (a Beta look-alike with a closed-form inverse CDF)."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(ember.full_like(self.concentration0, 0), ember.full_like(self.concentration0, 1),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        """``((a - 1) / (a b - 1)) ** (1 / a)`` for a, b >= 1, NaN otherwise (evaluated in log
        space). (torch 2.x returns NaN for every a, b > 1: its log-space formula takes the log
        of a negative number.)"""
        a, b = self.concentration1, self.concentration0
        valid = (a >= 1) & (b >= 1) & ~((a == 1) & (b == 1))
        sa = ember.where(valid, a, 2.0)
        sb = ember.where(valid, b, 2.0)
        log_mode = (ember.log(sa - 1) - ember.log(sa * sb - 1)) / sa
        return ember.where(valid, log_mode.exp(), math.nan)

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - ember.pow(self.mean, 2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        H0 = ember.digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * H0 - ember.log(self.concentration1) - ember.log(self.concentration0)
