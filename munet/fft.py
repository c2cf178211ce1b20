"""``munet.fft``: PyTorch's ``torch.fft`` namespace (cpu only; see docs/fft.md).

The functions are defined with the ops (``munet/ops/fft.py``); each op module lists its
``torch.fft`` names in ``__fft__``. ``Tensor`` is re-exported, as ``torch.fft`` does.
"""

from munet import ops as _ops
from munet._tensor import Tensor

__all__ = ["Tensor", *_ops.export(globals(), "__fft__")]
