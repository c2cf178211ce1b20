"""The LKJ distribution over Cholesky factors of correlation matrices, ``LKJCholesky(dim, concentration=1.0)``.

Sampling is the onion method (Ghosh and Henderson 2003; Lewandowski, Kurowicka and Joe 2009)
as PyTorch implements it: row ``i`` of the factor is ``sqrt(y_i) * u_i`` with ``y_i`` a Beta draw
and ``u_i`` uniform on the unit sphere, and the diagonal completes each row to unit norm.
"""

import math

import munet

from . import constraints
from ._special import lgamma, mvlgamma
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all, finfo_tiny


class LKJCholesky(Distribution):
    """Lower Cholesky factors ``L`` of ``dim x dim`` correlation matrices with density ``det(L L^T)^(concentration - 1)``."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = munet.arange(self.dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = munet.cat([offset.new_zeros((1,)), offset])
        self._beta = Beta(offset + 0.5, marginal_conc.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.shape, (dim, dim), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = tuple(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with munet.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = munet.randn(self._extended_shape(sample_shape), dtype=y.dtype, device=y.device).tril(-1)
            norms = u_normal.norm(dim=-1, keepdim=True)
            u_hypersphere = u_normal / munet.where(norms == 0, munet.ones_like(norms), norms)  # row 0 is all zeros
            w = munet.sqrt(y) * u_hypersphere
            diag_elems = munet.clamp(1 - munet.sum(w**2, dim=-1), min=finfo_tiny(w.dtype)).sqrt()
            return w + munet.diag_embed(diag_elems)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = munet.arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = munet.sum(order * diag_elems.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = lgamma(alpha) * dm1
        numerator = mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized_log_pdf - (pi_constant + numerator - denominator)
