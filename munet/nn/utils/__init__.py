"""``munet.nn.utils``: gradient clipping, parameter/vector conversion, the ``rnn`` sequence tools,
``parametrize`` and ``parametrizations``, stateless calls, the hook-based weight and spectral
norms, batch-norm fusion and ``skip_init``."""

from munet.nn.utils import parametrizations, parametrize, rnn, stateless
from munet.nn.utils.clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from munet.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from munet.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from munet.nn.utils.init import skip_init
from munet.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from munet.nn.utils.weight_norm import remove_weight_norm, weight_norm

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    "get_total_norm",
    "parameters_to_vector",
    "parametrizations",
    "parametrize",
    "remove_spectral_norm",
    "remove_weight_norm",
    "rnn",
    "skip_init",
    "spectral_norm",
    "stateless",
    "vector_to_parameters",
    "weight_norm",
]
