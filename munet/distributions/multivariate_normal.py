"""The multivariate normal ``MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None)``."""

import math

import munet

from . import constraints
from .distribution import Distribution
from .utils import lazy_property


def batch_mahalanobis(b_l, b_x):
    """``x^T (L L^T)^-1 x`` for lower-triangular ``L``, broadcast over batch dims."""
    solved = munet.linalg.solve_triangular(b_l, b_x.unsqueeze(-1), upper=False).squeeze(-1)
    return solved.pow(2).sum(-1)


def precision_to_scale_tril(prec):
    flipped = munet.flip(prec, (-2, -1))
    l_flip = munet.linalg.cholesky(flipped)
    l_inv = munet.flip(l_flip, (-2, -1)).mT
    eye = munet.eye(prec.shape[-1], dtype=prec.dtype, device=prec.device)
    return munet.linalg.solve_triangular(l_inv, eye.expand(l_inv.shape), upper=False)


class MultivariateNormal(Distribution):
    """Gaussian over vectors; give exactly one of ``covariance_matrix``, ``precision_matrix``, ``scale_tril``."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("MultivariateNormal: loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError(
                "MultivariateNormal: exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."
            )
        matrix = given[0]
        if matrix.dim() < 2:
            raise ValueError(
                "MultivariateNormal: the matrix argument must be at least two-dimensional, with optional leading batch dimensions"
            )
        batch_shape = munet.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        n = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(tuple(batch_shape) + (n, n))
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(tuple(batch_shape) + (n, n))
        else:
            self.precision_matrix = precision_matrix.expand(tuple(batch_shape) + (n, n))
        self.loc = loc.expand(tuple(batch_shape) + (n,))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = munet.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(
            MultivariateNormal, batch_shape, ("loc", "covariance_matrix", "precision_matrix", "scale_tril"), _instance
        )
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    @lazy_property
    def scale_tril(self):
        n = self._event_shape[0]
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + (n, n))

    @lazy_property
    def covariance_matrix(self):
        tril = self._unbroadcasted_scale_tril
        n = self._event_shape[0]
        return (tril @ tril.mT).expand(tuple(self._batch_shape) + (n, n))

    @lazy_property
    def precision_matrix(self):
        return munet.cholesky_inverse(self._unbroadcasted_scale_tril).expand(
            tuple(self._batch_shape) + tuple(self._event_shape) * 2
        )

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = munet.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        tril = self._unbroadcasted_scale_tril
        shape = munet.broadcast_shapes(diff.shape[:-1], tril.shape[:-2])
        n = self._event_shape[0]
        m = batch_mahalanobis(tril.expand(tuple(shape) + (n, n)), diff.expand(tuple(shape) + (n,)))
        half_log_det = munet.diagonal(tril, dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (n * math.log(2 * math.pi) + m) - half_log_det

    def entropy(self):
        n = self._event_shape[0]
        half_log_det = munet.diagonal(self._unbroadcasted_scale_tril, dim1=-2, dim2=-1).log().sum(-1)
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + half_log_det
        return h.expand(self._batch_shape) if len(self._batch_shape) else h
