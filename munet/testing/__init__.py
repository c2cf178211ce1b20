"""``munet.testing``: ``assert_close`` and ``make_tensor``, as ``torch.testing``."""

from munet.testing.comparison import assert_close
from munet.testing.creation import make_tensor

__all__ = ["assert_close", "make_tensor"]
