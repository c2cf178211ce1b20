"""``munet.special``: PyTorch's ``torch.special`` namespace.

The functions are defined with the ops (``munet/ops/special.py`` and the modules it re-exports
from); each op module lists its ``torch.special`` names in ``__special__``.
"""

from munet import ops as _ops

__all__ = _ops.export(globals(), "__special__")
