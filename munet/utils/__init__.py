"""``munet.utils``: activation checkpointing, data loading, and saving/resuming training runs."""

from munet.utils import checkpoint, data, training_state

__all__ = ["checkpoint", "data", "training_state"]
