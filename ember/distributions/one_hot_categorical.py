from __future__ import annotations

from .categorical import OneHotCategorical

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose ``rsample`` is the straight-through estimator: the forward value
    is the one-hot sample, the gradient that of ``probs`` (Bengio et al., 2013)."""
    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs  # cached via lazy_property
        return samples + (probs - probs.detach())
