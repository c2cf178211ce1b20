"""``munet.utils.tensorboard``: ``SummaryWriter`` writing TensorBoard event files (needs the
``tensorboard`` package: ``pip install munet[tensorboard]``)."""

from munet.utils.tensorboard.writer import SummaryWriter

__all__ = ["SummaryWriter"]
