"""The observer a :class:`DerivedQuantizationSpec` becomes: it observes nothing itself and
derives its qparams from other observers (torch's ``_DerivedObserverOrFakeQuantize``)."""
from __future__ import annotations

from ..observer import ObserverBase

__all__ = ["DerivedObserverOrFakeQuantize"]


class DerivedObserverOrFakeQuantize(ObserverBase):
    def __init__(self, dtype, obs_or_fqs, derive_qparams_fn, quant_min=None, quant_max=None, qscheme=None,
                 ch_axis=None):
        super().__init__(dtype)
        self.obs_or_fqs = obs_or_fqs
        self.derive_qparams_fn = derive_qparams_fn
        self.quant_min = quant_min
        self.quant_max = quant_max
        self.qscheme = qscheme
        self.ch_axis = ch_axis
        import ember
        if qscheme in (ember.per_channel_affine, ember.per_channel_symmetric) and ch_axis is None:
            raise AssertionError("Must provide a valid ch_axis if qscheme is per channel")

    def forward(self, x):
        return x

    def calculate_qparams(self):
        return self.derive_qparams_fn(self.obs_or_fqs)
