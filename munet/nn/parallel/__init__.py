"""``munet.nn.parallel``: data-parallel wrappers (PyTorch's ``torch.nn.parallel``)."""

from munet.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
