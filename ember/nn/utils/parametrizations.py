"""Ready-made parametrizations (port of ``torch.nn.utils.parametrizations``):
``weight_norm``, ``spectral_norm`` and ``orthogonal``, registered with
:func:`ember.nn.utils.parametrize.register_parametrization`.

Everything is composed of ember tensor ops, so autograd flows to the original
parameters. ember has no ``matrix_exp`` / ``householder_product`` / ``geqrf`` op;
the orthogonal maps use the private compositions below instead.
"""
from __future__ import annotations

import math
from enum import Enum, auto

import numpy as np

from ... import linalg as _linalg
from ...autograd.grad_mode import no_grad
from ...tensor import Tensor
from .. import functional as F
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _ember():
    import ember
    return ember


# ---------------------------------------------------------------------- weight-norm math
def _norm_except_dim(v, pow=2, dim=0):
    """``torch.norm_except_dim``: the ``pow``-norm over every dim but ``dim`` (kept as size-1
    dims); ``dim=-1`` means the norm of the whole tensor (a 0-d tensor), as in torch."""
    if dim == -1:
        return v.norm(pow)
    nd = v.dim()
    if dim < 0:
        dim += nd
    if not 0 <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    if dim != 0:
        v = v.transpose(0, dim)
    size0 = v.shape[0]
    out = v.reshape(size0, -1).norm(pow, dim=1)
    shape = [1] * nd
    shape[dim] = size0
    return out.reshape(shape)


def _weight_norm(v, g, dim=0):
    """``torch._weight_norm``: ``v * (g / norm_except_dim(v, 2, dim))``."""
    return v * (g / _norm_except_dim(v, 2, dim))


# ---------------------------------------------------------------------- orthogonal helpers
def _matrix_exp(A):
    """exp(A) of a (batch of) square matrices by scaling and squaring of a Taylor polynomial,
    built from differentiable matmuls (so gradients flow; they are the exact derivative of an
    approximation accurate to the dtype's precision)."""
    ember = _ember()
    n = A.shape[-1]
    with no_grad():
        arr = np.asarray(A.detach().abs()._data, dtype=np.float64)
        norm1 = float(arr.sum(axis=-2).max()) if arr.size else 0.0   # max column sum (1-norm)
    s = max(0, int(math.ceil(math.log2(norm1 / 0.5)))) if norm1 > 0.5 else 0
    if s:
        A = A / float(2 ** s)
    degree = 18 if A.dtype == ember.float64 else 10
    Id = ember.eye(n, dtype=A.dtype, device=A.device)
    P = Id
    for j in range(degree, 0, -1):   # Horner: I + A/1 (I + A/2 (I + ...))
        P = Id + (A @ P) / float(j)
    for _ in range(s):
        P = P @ P
    return P


def _householder_product(A, tau):
    """``torch.linalg.householder_product`` (real): the first ``k`` columns of
    ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T``, ``v_i`` the i-th column of ``A`` below the
    diagonal with an implicit 1 on it."""
    ember = _ember()
    n, k = A.shape[-2], A.shape[-1]
    eye = ember.eye(n, k, dtype=A.dtype, device=A.device)
    V = A.tril(-1) + eye
    Q = eye.expand(*A.shape[:-2], n, k)
    for i in range(k - 1, -1, -1):
        v = V[..., :, i:i + 1]                                 # (..., n, 1)
        t = tau[..., i:i + 1].unsqueeze(-1)                    # (..., 1, 1)
        Q = Q - (t * v) @ (v.mT @ Q)
    return Q


def _geqrf(A):
    """``torch.geqrf`` (LAPACK ``?geqrf`` through numpy's ``qr(mode='raw')``); no autograd."""
    ember = _ember()
    arr = np.asarray(A.detach()._data)
    h, tau = np.linalg.qr(arr, mode="raw")
    return (ember.tensor(np.ascontiguousarray(np.swapaxes(h, -1, -2)), dtype=A.dtype, device=A.device),
            ember.tensor(np.ascontiguousarray(tau), dtype=A.dtype, device=A.device))


def _is_orthogonal(Q, eps=None):
    ember = _ember()
    n, k = Q.size(-2), Q.size(-1)
    Id = ember.eye(k, dtype=Q.dtype, device=Q.device)
    eps = 10.0 * n * ember.finfo(Q.dtype).eps
    return ember.allclose(Q.mH @ Q, Id, atol=eps)


def _make_orthogonal(A):
    """The Q of A's QR decomposition whose R has a non-negative diagonal (what torch computes
    with ``geqrf`` + ``householder_product`` + a sign fix)."""
    Q, R = _linalg.qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex():
            raise ValueError("ember.nn.utils.parametrizations.orthogonal does not support complex tensors "
                             "(ember's orthogonal maps are real-only).")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        ember = _ember()
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map == _OrthMaps.matrix_exp or self.orthogonal_map == _OrthMaps.cayley:
            X = X.tril()
            if n != k:
                X = ember.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = _matrix_exp(A)
            else:
                Id = ember.eye(n, dtype=A.dtype, device=A.device)
                Q = _linalg.solve(ember.add(Id, A, alpha=-0.5), ember.add(Id, A, alpha=0.5))
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)

        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        ember = _ember()
        with no_grad():
            if Q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {Q.shape}.")
            Q_init = Q
            n, k = Q.size(-2), Q.size(-1)
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n

            if not hasattr(self, "base"):
                if self.orthogonal_map == _OrthMaps.cayley or self.orthogonal_map == _OrthMaps.matrix_exp:
                    raise NotImplementedError("It is not possible to assign to the matrix exponential "
                                              "or the Cayley parametrizations when use_trivialization=False.")
                A, tau = _geqrf(Q)
                a, t = A.numpy().copy(), tau.numpy()
                idx = np.arange(min(a.shape[-2], a.shape[-1]))
                sign = np.sign(a[..., idx, idx])
                sign[t == 0.0] *= -1
                a[..., idx, idx] = sign
                A = ember.tensor(a, dtype=Q.dtype, device=Q.device)
                return A.mT if transpose else A
            if n == k:
                if not _is_orthogonal(Q):
                    Q = _make_orthogonal(Q)
                else:
                    Q = Q.clone()
            else:
                N = ember.randn(*(tuple(Q.size()[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = ember.cat([Q, N], dim=-1)
                Q = _make_orthogonal(Q)
            self.base = Q
            neg_Id = _neg_eye_like(Q_init)
            return neg_Id


def _neg_eye_like(X):
    """Zeros of X's shape with -1 on the main diagonal (rectangular or batched)."""
    ember = _ember()
    n, k = X.size(-2), X.size(-1)
    e = ember.eye(n, k, dtype=X.dtype, device=X.device)
    return (-e).expand(tuple(X.shape)).clone()


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Parametrize ``module.<name>`` (a matrix or batch of matrices) to be orthogonal / unitary.

    ``orthogonal_map``: ``"matrix_exp"`` (default for square), ``"cayley"`` or ``"householder"``
    (default otherwise); all three are supported for real tensors (complex tensors are not).
    ``use_trivialization=True`` (default) keeps a ``base`` buffer, as torch does.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = ("matrix_exp" if weight.size(-2) == weight.size(-1) or weight.is_complex()
                          else "householder")
    orth_enum = getattr(_OrthMaps, orthogonal_map, None) if isinstance(orthogonal_map, str) else None
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ---------------------------------------------------------------------- weight_norm
class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        weight_g = _norm_except_dim(weight, 2, self.dim)
        weight_v = weight
        return weight_g, weight_v


def _register_load_pre_hook(module, hook):
    """Register a ``hook(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)``
    load-state-dict pre-hook (torch's private ``_register_load_state_dict_pre_hook`` form)."""
    reg = getattr(module, "_register_load_state_dict_pre_hook", None)
    if reg is not None:
        return reg(hook)
    return module.register_load_state_dict_pre_hook(hook)


def weight_norm(module, name="weight", dim=0):
    """Weight normalization as a parametrization: ``module.<name> = g * v / ||v||`` with the norm
    over every dim but ``dim`` (``dim=None``: the whole tensor). ``g`` is
    ``parametrizations.<name>.original0`` and ``v`` is ``original1``. State dicts saved with the
    legacy ``<name>_g`` / ``<name>_v`` keys load into it."""
    _wn = _WeightNorm(dim)
    parametrize.register_parametrization(module, name, _wn, unsafe=True)

    def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                 error_msgs):
        g_key = f"{prefix}{name}_g"
        v_key = f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            original0 = state_dict.pop(g_key)
            original1 = state_dict.pop(v_key)
            state_dict[f"{prefix}parametrizations.{name}.original0"] = original0
            state_dict[f"{prefix}parametrizations.{name}.original1"] = original1

    _register_load_pre_hook(module, _weight_norm_compat_hook)
    return module


# ---------------------------------------------------------------------- spectral_norm
class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.size()
            with no_grad():
                u = weight_mat.new_empty(h).normal_(0, 1)
                v = weight_mat.new_empty(w).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if weight.ndim <= 1:
            raise AssertionError(f"Expected weight to have more than 1 dimension, got {weight.ndim}")
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        """Update the ``_u`` / ``_v`` buffers in place (no autograd), as torch does."""
        ember = _ember()
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(ember.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(ember.mv(weight_mat.mH, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        ember = _ember()
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = ember.vdot(u, ember.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def _default_spectral_dim(module):
    from ..modules import conv as _conv
    types = tuple(getattr(_conv, n) for n in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
                  if hasattr(_conv, n))
    return 1 if types and isinstance(module, types) else 0


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Spectral normalization as a parametrization: ``module.<name> = W / sigma(W)``, ``sigma``
    estimated by power iteration whose vectors live in the ``_u`` / ``_v`` buffers of
    ``parametrizations.<name>[0]`` (updated on each access in training mode only)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = _default_spectral_dim(module)
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
