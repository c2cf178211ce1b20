"""``ExponentialFamily``: distributions of the form ``p(x) = h(x) exp(<t(x), theta> - F(theta))``.

A subclass gives its natural parameters ``theta`` (``_natural_params``), the log normalizer ``F``
(``_log_normalizer``) and ``E[log h(x)]`` (``_mean_carrier_measure``); ``entropy`` then follows
from the Bregman divergence of ``F``, with ``grad F`` taken by autograd (as PyTorch does).
"""

import munet

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class of exponential-family distributions; ``entropy`` is ``F(theta) - <theta, grad F(theta)> - E[log h]``."""

    @property
    def _natural_params(self):
        raise NotImplementedError(f"{type(self).__name__} does not define its natural parameters")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__} does not define its log normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(f"{type(self).__name__} does not define its mean carrier measure")

    def entropy(self):
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with munet.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = munet.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for nparam, g in zip(nparams, gradients):
            result = result - (nparam * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
