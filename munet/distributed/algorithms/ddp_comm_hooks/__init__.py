"""DDP communication hooks, as ``torch.distributed.algorithms.ddp_comm_hooks``."""
