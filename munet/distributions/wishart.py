"""The Wishart distribution ``Wishart(df, covariance_matrix=None, precision_matrix=None, scale_tril=None)``.

``rsample`` is Bartlett's decomposition, ``L A A^T L^T`` with ``A`` lower triangular holding the
square roots of Chi2(df - i) draws on its diagonal and standard normals below it; it is
differentiable in ``df`` (through the gamma draws) and in the scale. Singular draws (possible when
``df`` is close to ``dim - 1``) are redrawn up to ``max_try_correction`` times, as PyTorch does.
"""

import math
import warnings
from numbers import Number

import munet

from . import constraints
from ._special import digamma, mvlgamma
from .chi2 import Chi2
from .exp_family import ExponentialFamily
from .multivariate_normal import precision_to_scale_tril
from .utils import finfo_eps, lazy_property, vec_to_tril_matrix

_LOG_2 = math.log(2)


def _mvdigamma(x, p: int):
    """The multivariate digamma ``sum_i digamma(x - i / 2)``, i < p."""
    halves = munet.arange(p, dtype=x.dtype, device=x.device) / 2
    return digamma(x.unsqueeze(-1) - halves).sum(-1)


class Wishart(ExponentialFamily):
    """Wishart over ``p x p`` positive-definite matrices with ``df > p - 1`` degrees of freedom."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self.event_shape[-1] - 1),
        }

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        given = [(k, v) for k, v in (("covariance_matrix", covariance_matrix), ("precision_matrix", precision_matrix),
                                     ("scale_tril", scale_tril)) if v is not None]  # fmt: skip
        if len(given) != 1:
            raise ValueError(
                "Wishart: exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."
            )
        name, param = given[0]
        if param.dim() < 2:
            raise ValueError(
                f"Wishart: {name} must be at least two-dimensional, with optional leading batch dimensions"
            )
        if isinstance(df, Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = munet.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = tuple(munet.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(batch_shape)
        event_shape = tuple(param.shape[-2:])
        if bool(self.df.le(event_shape[-1] - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {event_shape[-1] - 1}.")
        setattr(self, name, param.expand(batch_shape + (-1, -1)))
        if bool(self.df.lt(event_shape[-1]).any()):
            warnings.warn(
                "Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < ndim.",
                stacklevel=2,
            )
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = param
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = munet.linalg.cholesky(param)
        else:
            self._unbroadcasted_scale_tril = precision_to_scale_tril(param)
        self._dist_chi2 = self._chi2(self.df, batch_shape)

    def _chi2(self, df, batch_shape):
        tril = self._unbroadcasted_scale_tril
        steps = munet.arange(tril.shape[-1], dtype=tril.dtype, device=tril.device)
        return Chi2(df=df.unsqueeze(-1) - steps.expand(tuple(batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        new._dist_chi2 = new._chi2(new.df, batch_shape)
        ExponentialFamily.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full(self, matrix):
        return matrix.expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        return self._full(self._unbroadcasted_scale_tril)

    @lazy_property
    def covariance_matrix(self):
        tril = self._unbroadcasted_scale_tril
        return self._full(tril @ tril.transpose(-2, -1))

    @lazy_property
    def precision_matrix(self):
        tril = self._unbroadcasted_scale_tril
        identity = munet.eye(self._event_shape[-1], dtype=tril.dtype, device=tril.device)
        return self._full(munet.cholesky_solve(identity, tril))

    def _df_matrix(self, value):
        return value.view(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix(self.df) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = munet.where(factor <= 0, munet.full_like(factor, math.nan), factor)
        return self._df_matrix(factor) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        diag_v = v.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix(self.df) * (v.pow(2) + diag_v.unsqueeze(-1) * diag_v.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=()):
        p = self._event_shape[-1]
        diagonal = self._dist_chi2.rsample(sample_shape).sqrt().clamp(min=finfo_eps(self.df.dtype))
        below = munet.randn(
            tuple(sample_shape) + tuple(self._batch_shape) + (p * (p - 1) // 2,),
            dtype=diagonal.dtype,
            device=diagonal.device,
        )
        noise = diagonal.diag_embed(dim1=-2, dim2=-1) + vec_to_tril_matrix(below, diag=-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.transpose(-2, -1)

    def _singular(self, sample):
        singular = ~self.support.check(sample)
        return singular.amax(self._batch_dims) if self._batch_shape else singular

    def rsample(self, sample_shape=(), max_try_correction=None):
        max_try_correction = 10 if max_try_correction is None else max_try_correction
        sample = self._bartlett_sampling(sample_shape)
        singular = self._singular(sample)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                mask = singular.reshape(tuple(singular.shape) + (1,) * (len(self._batch_shape) + 2))
                sample = munet.where(mask, self._bartlett_sampling(sample_shape), sample)
                singular = self._singular(sample)
                if not bool(singular.any()):
                    break
        return sample

    def _tril_log_det_half(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        trace = munet.cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(dim1=-2, dim2=-1).sum(dim=-1)
        return (
            -nu * (p * _LOG_2 / 2 + self._tril_log_det_half())
            - mvlgamma(nu / 2, p)
            + (nu - p - 1) / 2 * munet.linalg.slogdet(value).logabsdet
            - trace / 2
        )

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        return (
            (p + 1) * (p * _LOG_2 / 2 + self._tril_log_det_half())
            + mvlgamma(nu / 2, p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p)
            + nu * p / 2
        )

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-munet.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p) + mvlgamma(y + (p + 1) / 2, p)
