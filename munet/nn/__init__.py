"""Neural-network building blocks: ``munet.nn.functional`` (layers arrive with the training stack)."""

from munet.nn import functional

__all__ = ["functional"]
