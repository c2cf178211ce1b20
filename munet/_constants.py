"""PyTorch's constants at ``munet.*``: ``e``, ``pi``, ``inf``, ``nan`` (Python floats, as in PyTorch)
and ``newaxis`` (``None``, for indexing: ``x[:, munet.newaxis]``)."""

from math import e, inf, nan, pi

newaxis = None

__all__ = ["e", "inf", "nan", "newaxis", "pi"]
