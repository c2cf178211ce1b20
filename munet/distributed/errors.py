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


class DistNetworkError(DistError):
    """A connection could not be made, or broke."""


class DistStoreError(DistError):
    """A store operation failed: a key did not appear within the timeout, or a value was wrong."""
