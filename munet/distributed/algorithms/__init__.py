"""``munet.distributed.algorithms``: PyTorch's DDP communication hooks (``ddp_comm_hooks``)."""
