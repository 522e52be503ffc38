"""``ExponentialFamily``: densities ``p(x; t) = exp(<t(x), theta> - F(theta) + k(x))``
(torch.distributions.ExponentialFamily).

A subclass gives its natural parameters ``theta`` (``_natural_params``), the log normaliser
``F`` (``_log_normalizer``) and ``E[k(x)]`` (``_mean_carrier_measure``); the entropy then
follows from the Bregman divergence of ``F`` (``F(theta) - <theta, grad F(theta)> - E[k]``),
with the gradient by autograd -- and so does the KL between two members of one family
(``ember.distributions.kl``).
"""
from __future__ import annotations

import ember

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class of exponential-family distributions."""

    @property
    def _natural_params(self):
        raise NotImplementedError(f"{type(self).__name__} (an ExponentialFamily) does not implement _natural_params")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__} (an ExponentialFamily) does not implement _log_normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(f"{type(self).__name__} (an ExponentialFamily) does not implement _mean_carrier_measure")

    def entropy(self):
        """Entropy from the log normaliser (detached from the parameters, as torch's)."""
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with ember.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = ember.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for p, g in zip(nparams, gradients):
            result = result - (p * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
