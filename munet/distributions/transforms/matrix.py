"""Transforms onto matrix spaces: lower Cholesky factors, positive-definite and correlation Cholesky matrices."""

import math

import munet

from .. import constraints
from ..utils import finfo_eps, tril_matrix_to_vec, vec_to_tril_matrix
from .transform import _ParameterFreeTransform

__all__ = ["CorrCholeskyTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform"]


class LowerCholeskyTransform(_ParameterFreeTransform):
    """An unconstrained square matrix to a lower-triangular one with positive diagonal (``exp`` of the diagonal)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(_ParameterFreeTransform):
    """An unconstrained square matrix to ``L @ L.mT`` with ``L = LowerCholeskyTransform()(x)``."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(munet.linalg.cholesky(y))


class CorrCholeskyTransform(_ParameterFreeTransform):
    """A vector of ``D (D - 1) / 2`` reals to the Cholesky factor of a ``D x D`` correlation matrix.

    Each entry goes through ``tanh`` into ``(-1, 1)`` and the rows are filled by stick breaking so
    that every row has unit norm (PyTorch's construction, bijective).
    """

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        eps = finfo_eps(x.dtype)
        x = munet.tanh(x).clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        z1m_cumprod_sqrt = (1 - r**2).sqrt().cumprod(-1)
        r = r + munet.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * munet.nn.functional.pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1.0)

    def _inverse(self, y):
        y_cumsum = 1 - munet.cumsum(y * y, dim=-1)
        y_cumsum_shifted = munet.nn.functional.pad(y_cumsum[..., :-1], [1, 0], value=1.0)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(y_cumsum_shifted, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        y1m_cumsum = 1 - (y * y).cumsum(dim=-1)
        stick_breaking_logdet = 0.5 * tril_matrix_to_vec(y1m_cumsum, diag=-2).log().sum(-1)
        tanh_logdet = -2 * (x + munet.nn.functional.softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("CorrCholeskyTransform: too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError(f"CorrCholeskyTransform: {n} is not the size of a flattened strictly lower triangle")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("CorrCholeskyTransform: too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError(f"CorrCholeskyTransform: input is not square: {tuple(shape)}")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)
