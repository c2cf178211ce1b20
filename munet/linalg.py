"""``munet.linalg``: PyTorch's ``torch.linalg`` namespace.

The functions are defined with the ops, in ``munet/ops/linalg*.py``; each such module lists its
``torch.linalg`` names in ``__linalg__``. See docs/linalg.md.
"""

from munet import ops as _ops

__all__ = _ops.export(globals(), "__linalg__")
