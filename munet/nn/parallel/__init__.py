"""``munet.nn.parallel``: data-parallel wrappers (PyTorch's ``torch.nn.parallel``)."""

from munet.nn.parallel.distributed import DistributedDataParallel
from munet.nn.parallel.sync_batchnorm import SyncBatchNorm

__all__ = ["DistributedDataParallel", "SyncBatchNorm"]
