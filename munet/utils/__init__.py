"""``munet.utils``: activation checkpointing (``checkpoint``) and data loading (``data``)."""

from munet.utils import checkpoint, data

__all__ = ["checkpoint", "data"]
