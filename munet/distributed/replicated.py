"""Which process group keeps a tensor equal on all of its ranks.

``DistributedDataParallel`` registers its parameters with its group. A ``GradScaler`` stepping an
optimizer over registered parameters agrees its inf/NaN decision across that group
(``munet/amp/grad_scaler.py``), so every replica skips the same steps. Entries are dropped when
their tensor is freed; a tensor's latest registration wins.
"""

from __future__ import annotations

import weakref

_GROUPS: dict[int, tuple[weakref.ref, object]] = {}


def register(tensors, group) -> None:
    """Record that ``group`` keeps each of ``tensors`` equal on its ranks."""
    for t in tensors:
        key = id(t)
        _GROUPS[key] = (weakref.ref(t, lambda _, key=key: _GROUPS.pop(key, None)), group)


def groups_of(tensors) -> list:
    """The distinct groups of more than one rank that keep any of ``tensors`` equal, in the order
    the tensors name them (the same order on every rank that holds the same tensors)."""
    found: list = []
    for t in tensors:
        entry = _GROUPS.get(id(t))
        if entry is None or entry[0]() is not t:
            continue
        group = entry[1]
        if group.size() > 1 and not any(group is g for g in found):
            found.append(group)
    return found
