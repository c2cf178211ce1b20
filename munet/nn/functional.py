"""``munet.nn.functional``: activations, normalization, losses, convolution, pooling, ..."""

from munet import ops as _ops

_ops.export(globals(), "__functional__")

# composites written in munet.nn, re-exported here after the op families
from munet.nn.channel_shuffle import channel_shuffle, native_channel_shuffle  # noqa: E402, F401
from munet.nn.ctc import ctc_loss  # noqa: E402, F401
from munet.nn.fractional_pool import (  # noqa: E402, F401
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from munet.nn.gumbel import gumbel_softmax  # noqa: E402, F401
from munet.nn.modules.attention import multi_head_attention_forward  # noqa: E402, F401
from munet.nn.modules.linear_cross_entropy import linear_cross_entropy  # noqa: E402, F401
from munet.nn.multilabel_margin import multilabel_margin_loss  # noqa: E402, F401
from munet.nn.unpool import max_unpool1d, max_unpool2d, max_unpool3d  # noqa: E402, F401
