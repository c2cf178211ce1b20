"""``munet.utils``: activation checkpointing, data loading, hook handles, and saving/resuming training runs."""

from munet.utils import checkpoint, data, hooks, training_state

__all__ = ["checkpoint", "data", "hooks", "training_state"]
