"""``munet.utils.data``: datasets, samplers and the DataLoader (PyTorch's ``torch.utils.data``)."""

from munet.utils.data._worker import WorkerInfo, get_worker_info
from munet.utils.data.collate import default_collate, default_convert
from munet.utils.data.dataloader import DataLoader
from munet.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from munet.utils.data.distributed import DistributedSampler
from munet.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "DistributedSampler",
    "Dataset",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "WorkerInfo",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]
