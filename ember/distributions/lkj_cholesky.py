from __future__ import annotations

import math

import ember

from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """LKJ distribution over Cholesky factors of ``dim x dim`` correlation matrices, density
    proportional to ``det(L L^T)^(concentration - 1)`` (Lewandowski, Kurowicka & Joe, 2009).
    Sampled with the onion method: row ``i`` is ``sqrt(y_i)`` times a uniform direction, with
    ``y_i`` Beta-distributed, the diagonal completing each row to unit norm."""
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = (dim, dim)
        # Beta parameters of the squared norms of the strictly lower part of each row
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = ember.arange(self.dim - 1, dtype=self.concentration.dtype)
        offset = ember.cat([offset.new_zeros((1,)), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = tuple(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with ember.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = ember.randn(tuple(self._extended_shape(sample_shape)), dtype=y.dtype).tril(-1)
            norm = u_normal.norm(dim=-1, keepdim=True)
            # the first row has no strictly-lower entries (0 / 0): it is all zeros
            u_hypersphere = u_normal / ember.where(norm > 0, norm, 1.0)
            w = ember.sqrt(y) * u_hypersphere
            eps = ember.finfo(w.dtype).tiny
            diag_elems = ember.clamp(1 - ember.sum(w ** 2, dim=-1), min=eps).sqrt()
            return w + ember.diag_embed(diag_elems)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = ember.arange(2, self.dim + 1, dtype=self.concentration.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = ember.sum(order * diag_elems.log(), dim=-1)
        # normaliser (LKJ 2009, p. 1999); multigammaln's pi term is (D-1)(D-2)/4 log(pi), the
        # paper's D(D-1)/4 log(pi): the difference (D-1)/2 log(pi) is added back
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = ember.lgamma(alpha) * dm1
        numerator = ember.special.multigammaln(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        normalize_term = pi_constant + numerator - denominator
        return unnormalized_log_pdf - normalize_term
