"""``munet.nn.utils``: gradient clipping, parameter/vector conversion, the ``rnn`` sequence tools,
``parametrize`` and ``parametrizations``, stateless calls."""

from munet.nn.utils import parametrizations, parametrize, rnn, stateless
from munet.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm
from munet.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "get_total_norm",
    "parameters_to_vector",
    "parametrizations",
    "parametrize",
    "rnn",
    "stateless",
    "vector_to_parameters",
]
