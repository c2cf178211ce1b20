"""``LowRankMultivariateNormal(loc, cov_factor, cov_diag)``: covariance ``W W^T + diag(D)``.

log_prob and entropy use the capacitance matrix ``C = I + w^T d^-1 w`` (Woodbury and the matrix
determinant lemma), so their cost is linear in the event size for a fixed rank.
"""

import math

import munet

from . import constraints
from .distribution import Distribution
from .multivariate_normal import batch_mahalanobis
from .utils import lazy_property


class LowRankMultivariateNormal(Distribution):
    """Gaussian whose covariance is ``cov_factor @ cov_factor.mT + diag(cov_diag)``."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("LowRankMultivariateNormal: loc must be at least one-dimensional.")
        n = loc.shape[-1]
        if cov_factor.dim() < 2:
            raise ValueError(
                "LowRankMultivariateNormal: cov_factor must be at least two-dimensional, with optional leading batch dimensions"
            )
        if cov_factor.shape[-2] != n:
            raise ValueError(f"LowRankMultivariateNormal: cov_factor must be a batch of matrices with shape {n} x m")
        if tuple(cov_diag.shape[-1:]) != (n,):
            raise ValueError(f"LowRankMultivariateNormal: cov_diag must be a batch of vectors with shape {(n,)}")
        batch_shape = tuple(munet.broadcast_shapes(loc.shape[:-1], cov_factor.shape[:-2], cov_diag.shape[:-1]))
        rank = cov_factor.shape[-1]
        self.loc = loc.expand(batch_shape + (n,))
        self.cov_factor = cov_factor.expand(batch_shape + (n, rank))
        self.cov_diag = cov_diag.expand(batch_shape + (n,))
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        super().__init__(batch_shape, (n,), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(
            LowRankMultivariateNormal, batch_shape, ("loc", "cov_factor", "cov_diag"), _instance
        )
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        return new

    @lazy_property
    def _capacitance_tril(self):
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        wt_dinv = w.mT / d.unsqueeze(-2)
        gram = wt_dinv @ w
        eye = munet.eye(w.shape[-1], dtype=w.dtype, device=w.device)
        return munet.linalg.cholesky(gram + eye)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(
            tuple(self._batch_shape) + tuple(self._event_shape)
        )

    @lazy_property
    def covariance_matrix(self):
        w = self._unbroadcasted_cov_factor
        cov = w @ w.mT + munet.diag_embed(self._unbroadcasted_cov_diag)
        return cov.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def scale_tril(self):
        return munet.linalg.cholesky(self.covariance_matrix)

    @lazy_property
    def precision_matrix(self):
        return munet.linalg.inv(self.covariance_matrix)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rank = self._unbroadcasted_cov_factor.shape[-1]
        eps_w = munet.randn(tuple(shape[:-1]) + (rank,), dtype=self.loc.dtype, device=self.loc.device)
        eps_d = munet.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        low_rank = (self._unbroadcasted_cov_factor @ eps_w.unsqueeze(-1)).squeeze(-1)
        return self.loc + low_rank + self._unbroadcasted_cov_diag.sqrt() * eps_d

    def _log_det(self):
        capacitance_log_det = 2 * munet.diagonal(self._capacitance_tril, dim1=-2, dim2=-1).log().sum(-1)
        return capacitance_log_det + self._unbroadcasted_cov_diag.log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        wt_dinv_x = (w.mT @ (diff / d).unsqueeze(-1)).squeeze(-1)
        mahalanobis_d = (diff.pow(2) / d).sum(-1)
        tril = self._capacitance_tril
        shape = munet.broadcast_shapes(wt_dinv_x.shape[:-1], tril.shape[:-2])
        rank = w.shape[-1]
        correction = batch_mahalanobis(
            tril.expand(tuple(shape) + (rank, rank)), wt_dinv_x.expand(tuple(shape) + (rank,))
        )
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + self._log_det() + mahalanobis_d - correction)

    def entropy(self):
        n = self._event_shape[0]
        h = 0.5 * (n * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return h.expand(self._batch_shape) if len(self._batch_shape) else h
