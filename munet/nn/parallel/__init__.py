"""``munet.nn.parallel``: data-parallel wrappers (PyTorch's ``torch.nn.parallel``)."""

from munet.nn.parallel.data_parallel import DataParallel
from munet.nn.parallel.distributed import DistributedDataParallel
from munet.nn.parallel.replicate import parallel_apply
from munet.nn.parallel.scatter_gather import gather, scatter
from munet.nn.parallel.sync_batchnorm import SyncBatchNorm

__all__ = ["DataParallel", "DistributedDataParallel", "SyncBatchNorm", "gather", "parallel_apply", "scatter"]
