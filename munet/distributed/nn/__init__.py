"""``munet.distributed.nn``: collectives that autograd differentiates (PyTorch's ``torch.distributed.nn``)."""

from munet.distributed.nn import functional
