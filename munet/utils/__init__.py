"""``munet.utils``: activation checkpointing, data loading, hook handles, saving/resuming training runs, and
TensorBoard event files."""

from munet.utils import checkpoint, data, hooks, tensorboard, training_state

__all__ = ["checkpoint", "data", "hooks", "tensorboard", "training_state"]
