"""``MixtureSameFamily(mixture_distribution, component_distribution)``: a mixture of one family's components."""

import munet

from . import constraints
from .categorical import Categorical
from .distribution import Distribution


class MixtureSameFamily(Distribution):
    """Components are the rightmost batch dim of ``component_distribution``; weights come from a ``Categorical``."""

    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(
                "MixtureSameFamily: the mixture distribution needs to be an instance of torch.distributions.Categorical"
            )
        if not isinstance(component_distribution, Distribution):
            raise ValueError(
                "MixtureSameFamily: the component distribution needs to be an instance of torch.distributions.Distribution"
            )
        mdbs = tuple(mixture_distribution.batch_shape)
        cdbs = tuple(component_distribution.batch_shape)[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(
                    f"MixtureSameFamily: mixture_distribution.batch_shape {mdbs} is not compatible with component_distribution.batch_shape {cdbs}"
                )
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(
                f"MixtureSameFamily: mixture_distribution component ({km}) does not equal component_distribution.batch_shape[-1] ({kc})"
            )
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, component_distribution.event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        batch_shape = tuple(batch_shape)
        new._component_distribution = self._component_distribution.expand(batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        Distribution.__init__(new, batch_shape, new._component_distribution.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _mixture_weights(self):
        probs = self._mixture_distribution.probs
        return probs.reshape(tuple(probs.shape) + (1,) * self._event_ndims)

    @property
    def mean(self):
        return (self._mixture_weights() * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        weights = self._mixture_weights()
        dim = -1 - self._event_ndims
        mean_cond_var = (weights * self._component_distribution.variance).sum(dim)
        var_cond_mean = (weights * (self._component_distribution.mean - self._pad(self.mean)).pow(2.0)).sum(dim)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        cdf_x = self._component_distribution.cdf(self._pad(x))
        return (cdf_x * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self._component_distribution.log_prob(self._pad(x))
        log_mix_prob = munet.log_softmax(self._mixture_distribution.logits, dim=-1)
        return munet.logsumexp(log_prob_x + log_mix_prob, -1)

    def sample(self, sample_shape=()):
        with munet.no_grad():
            sample_len = len(tuple(sample_shape))
            batch_len = len(self._batch_shape)
            gather_dim = sample_len + batch_len
            es = tuple(self._event_shape)
            mix_sample = self._mixture_distribution.sample(sample_shape)
            mix_shape = tuple(mix_sample.shape)
            comp_samples = self._component_distribution.sample(sample_shape)
            index = mix_sample.reshape(mix_shape + (1,) * (len(es) + 1))
            index = index.expand(mix_shape + (1,) + es)
            return comp_samples.gather(gather_dim, index).squeeze(gather_dim)
