"""``munet.fft``: PyTorch's ``torch.fft`` namespace (cpu only; see docs/fft.md).

The functions are defined with the ops (``munet/ops/fft.py``); each op module lists its
``torch.fft`` names in ``__fft__``.
"""

from munet import ops as _ops

__all__ = _ops.export(globals(), "__fft__")
