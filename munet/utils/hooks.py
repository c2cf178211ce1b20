"""``RemovableHandle``: what every ``register_*_hook`` returns (``torch.utils.hooks.RemovableHandle``).

Hooks live in plain ordered dicts keyed by the handle's id, so removal is O(1), removing twice
is harmless, and ``prepend=True`` moves a hook to the front.
"""

from __future__ import annotations

import itertools


class RemovableHandle:
    """Removes the hook it was created for from its dict; also a context manager."""

    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self.hooks_dict = hooks
        self.id = next(self._ids)

    @classmethod
    def add(cls, hooks: dict, hook, *, prepend: bool = False) -> RemovableHandle:
        """Store ``hook`` in ``hooks`` under a fresh id (first when ``prepend``); return its handle."""
        handle = cls(hooks)
        hooks[handle.id] = hook
        if prepend:
            rest = [(k, v) for k, v in hooks.items() if k != handle.id]
            hooks.clear()
            hooks[handle.id] = hook
            hooks.update(rest)
        return handle

    def remove(self) -> None:
        self.hooks_dict.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
