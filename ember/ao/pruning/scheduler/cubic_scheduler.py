"""``CubicSL``: the cubic schedule of Zhu & Gupta (arXiv:1710.01878), from ``init_sl`` at step
``init_t`` to the target level over ``total_t`` prunings ``delta_t`` steps apart:
``s_t = s_f + (s_0 - s_f) * (1 - (t - t_0) / (delta_t * total_t)) ** 3``, clamped between the two."""
from __future__ import annotations

import warnings

from .base_scheduler import BaseScheduler

__all__ = ["CubicSL"]


def _clamp(x, lo, hi):
    return max(lo, min(hi, x))


class CubicSL(BaseScheduler):
    def __init__(self, sparsifier, init_sl=0.0, init_t=0, delta_t=10, total_t=100, initially_zero=False,
                 last_epoch=-1, verbose=False):
        self.sparsifier = sparsifier
        self.init_sl = self._make_sure_a_list(init_sl)
        self.init_t = self._make_sure_a_list(init_t)
        self.delta_t = self._make_sure_a_list(delta_t)
        self.total_t = self._make_sure_a_list(total_t)
        self.initially_zero = self._make_sure_a_list(initially_zero)
        super().__init__(sparsifier, last_epoch, verbose)

    @staticmethod
    def sparsity_compute_fn(s_0, s_f, t, t_0, dt, n, initially_zero=False):
        """The level at step ``t`` (0 before ``t_0`` when ``initially_zero``)."""
        if initially_zero and t < t_0:
            return 0
        s_t = s_f + (s_0 - s_f) * (1.0 - (t - t_0) / (dt * n)) ** 3
        return _clamp(s_t, s_0, s_f)

    def get_sl(self):
        if not self._get_sl_called_within_step:
            warnings.warn("To get the last sparsity level computed by the scheduler, please use `get_last_sl()`.",
                          stacklevel=2)
        return [self.sparsity_compute_fn(s_0=s0, s_f=sf, t=self.last_epoch, t_0=t0, dt=dt, n=n, initially_zero=z)
                for s0, sf, t0, dt, n, z in zip(self.init_sl, self.base_sl, self.init_t, self.delta_t, self.total_t,
                                                self.initially_zero)]
