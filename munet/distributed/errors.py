"""torch.distributed's exception classes, with its names and hierarchy.

``DistError`` is a ``RuntimeError``; a store that times out or is misused raises
``DistStoreError``, a connection that cannot be made or breaks raises ``DistNetworkError``, and
a collective that fails (a peer died, a timeout) raises ``DistBackendError``. Code written as
``except RuntimeError`` keeps working.
"""

from __future__ import annotations


class DistError(RuntimeError):
    """Base of the errors ``munet.distributed`` raises for distributed failures."""


class DistBackendError(DistError):
    """A collective or point-to-point operation failed: a peer died, left or timed out."""


class PeerDeathError(DistBackendError):
    """The transport found peers dead (MPI's fault tolerance reported their processes failed); ``ranks``
    are their global ranks. ``Work`` raises it as a ``DistBackendError`` naming the operation it waited for."""

    def __init__(self, ranks: list[int], detail: str):
        self.ranks = ranks
        named = ", ".join(f"rank {r}" for r in ranks) if ranks else "a rank"
        super().__init__(f"{named} died ({detail})")


class DistNetworkError(DistError):
    """A connection could not be made, or broke."""


class DistStoreError(DistError):
    """A store operation failed: a key did not appear within the timeout, or a value was wrong."""
