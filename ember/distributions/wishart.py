"""The Wishart distribution (torch.distributions.Wishart): the law of ``sum_k x_k x_k^T`` for
``df`` draws ``x_k ~ N(0, Sigma)``, extended to real ``df > p - 1``.

Parameterised by ``df`` and exactly one of ``covariance_matrix`` / ``precision_matrix`` /
``scale_tril`` (``Sigma = L L^T``); everything is computed from ``L``. ``rsample`` is Bartlett's
decomposition ``(L A)(L A)^T`` with ``A`` lower triangular, ``A_ii = sqrt(chi2(df - i))``
(reparameterised through the Gamma sampler, so gradients reach ``df`` as well as ``L``) and
``A_ij ~ N(0, 1)`` below the diagonal.

Differences from PyTorch 2.13, where PyTorch is wrong: ``rsample`` resamples (and warns about)
only the singular draws -- PyTorch's first check is inverted, so it warns "Singular sample
detected." on every call and redraws the good ones; and ``mean`` / ``mode`` / ``variance`` work
for a Python-number ``df`` with batched matrices (PyTorch's ``view`` of the 0-d ``df`` raises).
"""
from __future__ import annotations

import math
import numbers
import warnings

import ember

from . import constraints
from .chi2 import Chi2
from .exp_family import ExponentialFamily
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property

__all__ = ["Wishart"]

_LOG_2 = math.log(2.0)


def _mvdigamma(x, p):
    """The multivariate digamma ``sum_{i<p} digamma(x - i/2)`` (the derivative of mvlgamma)."""
    if not bool((x > (p - 1) / 2).all()):
        raise ValueError(f"multivariate digamma of dimension {p}: every element must be greater than "
                         f"(p - 1) / 2 = {(p - 1) / 2}")
    half = ember.arange(p, dtype=x.dtype) / 2
    return ember.digamma(x.unsqueeze(-1) - half).sum(-1)


def _mvlgamma(x, p):
    return ember.mvlgamma(x, p)


class Wishart(ExponentialFamily):
    """Wishart distribution over ``p x p`` positive-definite matrices with ``df`` degrees of
    freedom (``df > p - 1``) and scale ``Sigma`` given as exactly one of ``covariance_matrix``,
    ``precision_matrix`` (``Sigma^-1``) or ``scale_tril`` (the Cholesky factor of ``Sigma``)."""
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if not isinstance(param, ember.Tensor):
            raise TypeError(f"Wishart: the matrix parameter must be an ember.Tensor, got {type(param).__name__}")
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if param.shape[-1] != param.shape[-2]:
            raise ValueError(f"Wishart: the matrix parameter must be square in its last two dimensions, "
                             f"got shape {tuple(param.shape)}")
        if isinstance(df, numbers.Number):
            batch_shape = tuple(param.shape[:-2])
            df_t = ember.tensor(float(df), dtype=param.dtype)
        elif isinstance(df, ember.Tensor):
            batch_shape = tuple(ember.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            df_t = df
        else:
            raise TypeError(f"Wishart: df must be a number or an ember.Tensor, got {type(df).__name__}")
        self.df = df_t.expand(batch_shape)
        p = param.shape[-1]
        event_shape = (p, p)
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        if scale_tril is not None:
            self.scale_tril = param.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(batch_shape + (-1, -1))
        else:
            self.precision_matrix = param.expand(batch_shape + (-1, -1))
        if bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < ndim.",
                          stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(i + 1) for i in range(len(batch_shape))]
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = ember.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(batch_shape)

    def _chi2(self, batch_shape):
        """The Bartlett diagonal's chi-squared laws, df - i for i < p (batch + (p,))."""
        p = self._event_shape[-1]
        shift = ember.arange(p, dtype=self._unbroadcasted_scale_tril.dtype)
        return Chi2(df=(self.df.unsqueeze(-1) - shift).expand(tuple(batch_shape) + (p,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(i + 1) for i in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        super(Wishart, new).__init__(batch_shape, tuple(self.event_shape), validate_args=False)
        new._dist_chi2 = new._chi2(batch_shape)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def precision_matrix(self):
        eye = ember.eye(self._event_shape[-1], dtype=self._unbroadcasted_scale_tril.dtype)
        return ember.cholesky_solve(eye, self._unbroadcasted_scale_tril).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    def _df_matrix(self, df):
        return df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix(self.df) * self.covariance_matrix

    @property
    def mode(self):
        """``(df - p - 1) Sigma``; NaN where ``df <= p + 1`` (no interior mode)."""
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = ember.where(factor <= 0, ember.full_like(factor, math.nan), factor)
        return self._df_matrix(factor) * self.covariance_matrix

    @property
    def variance(self):
        """``Var(X_ij) = df (Sigma_ij^2 + Sigma_ii Sigma_jj)``."""
        V = self.covariance_matrix
        d = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix(self.df) * (V.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=()):
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        chi = chi.clamp(min=ember.finfo(chi.dtype).eps)    # (a zero diagonal would make A singular)
        shape = tuple(sample_shape) + tuple(self._batch_shape) + (p, p)
        # PyTorch's draw: p (p - 1) / 2 normals per matrix, placed row by row below the diagonal
        i, j = ember.tril_indices(p, p, offset=-1)
        lower = ember.zeros(shape, dtype=chi.dtype)
        lower[..., i, j] = ember.randn(tuple(sample_shape) + tuple(self._batch_shape) + (p * (p - 1) // 2,),
                                       dtype=chi.dtype)
        A = ember.diag_embed(chi) + lower
        chol = self._unbroadcasted_scale_tril @ A
        return chol @ chol.mT

    def _singular(self, sample):
        bad = ~self.support.check(sample)
        if self._batch_shape:
            bad = bad.amax(self._batch_dims)
        return bad

    def rsample(self, sample_shape=(), max_try_correction=None):
        """Bartlett draws, with PyTorch's correction pass: the same numbers as its sampler for the
        same seed. (Its first test flags the draws that pass the support check -- so it redraws
        those once, and warns "Singular sample detected.": ember warns only for a singular draw --
        then redraws the ones that fail, up to ``max_try_correction`` (default 10) times; kept as
        it is for the same numbers.)"""
        import numpy as np
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = tuple(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        flag = self.support.check(sample)
        if self._batch_shape:
            flag = flag.amax(self._batch_dims)
        if bool(flag.any()):
            # (PyTorch warns "Singular sample detected." at this point whatever the draws; here
            # only when one of them is singular)
            if not bool(self.support.check(sample).all()):
                warnings.warn("Singular sample detected.", stacklevel=2)
            tail = tuple(sample.shape[len(sample_shape):])
            flat = sample.reshape((-1,) + tail).clone()
            f = np.array(flag.numpy(), dtype=bool).reshape(-1)
            for _ in range(max_try_correction):
                idx = np.nonzero(f)[0]
                new = self._bartlett_sampling((len(idx),))
                flat[ember.tensor(idx)] = new
                bad = ~self.support.check(new)
                if self._batch_shape:
                    bad = bad.amax(self._batch_dims)
                f[idx] = np.array(bad.numpy(), dtype=bool).reshape(-1)
                if not f.any():
                    break
            sample = flat.reshape(sample.shape)
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        half_log_det = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return (-nu * (p * _LOG_2 / 2 + half_log_det) - _mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * ember.linalg.slogdet(value).logabsdet
                - ember.cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1) / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + half_log_det) + _mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-ember.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p)
                + _mvlgamma(y + (p + 1) / 2, p))
