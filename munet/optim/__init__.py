"""``munet.optim``: optimizers over parameter groups (the algorithms arrive with the training stack)."""

from munet.optim.optimizer import Optimizer, required

__all__ = ["Optimizer", "required"]
