"""``munet.autograd.graph``: hooks on the tensors autograd saves for backward.

``saved_tensors_hooks(pack_hook, unpack_hook)``: inside the block, every tensor a new backward
node saves is replaced by ``pack_hook(tensor)``; when backward needs it, ``unpack_hook(packed)``
gives it back. The saved tensor's storage version is still recorded at save time, so an in-place
change of it before backward still raises. Hooks are per thread, like grad mode; nested blocks use
the innermost pair.
"""

from __future__ import annotations

import threading

__all__ = ["disable_saved_tensors_hooks", "save_on_cpu", "saved_tensors_hooks"]


class _SavedHooksState(threading.local):
    """This thread's stack of (pack, unpack) pairs and the message that forbids new ones."""

    stack: tuple = ()
    disabled_message: str | None = None


_Hooks = _SavedHooksState()


def current_saved_tensors_hooks():
    """The innermost ``(pack_hook, unpack_hook)`` of this thread, or ``None``."""
    stack = _Hooks.stack
    return stack[-1] if stack else None


class saved_tensors_hooks:  # noqa: N801
    """Context manager installing ``pack_hook`` / ``unpack_hook`` for the tensors saved inside it.

    >>> with saved_tensors_hooks(lambda x: x.numpy().copy(), lambda a: munet.tensor(a)):
    ...     y = (x * x).sum()
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if _Hooks.disabled_message is not None:
            raise RuntimeError(_Hooks.disabled_message)
        _Hooks.stack = _Hooks.stack + ((self.pack_hook, self.unpack_hook),)
        return self

    def __exit__(self, *exc) -> bool:
        _Hooks.stack = _Hooks.stack[:-1]
        return False


class save_on_cpu(saved_tensors_hooks):  # noqa: N801
    """Saved tensors are copied to CPU memory and moved back to their device when backward needs them.

    ``pin_memory`` and ``device_type`` are PyTorch's arguments; MuNet's CPU copies are ordinary host
    memory either way, so they change nothing here.
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        def pack(tensor):
            return tensor.device, tensor.detach().to("cpu", copy=True)

        def unpack(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:  # noqa: N801
    """Inside the block, entering ``saved_tensors_hooks`` raises ``RuntimeError(error_message)``."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        self._prev = _Hooks.disabled_message
        _Hooks.disabled_message = self.error_message
        return self

    def __exit__(self, *exc) -> bool:
        _Hooks.disabled_message = self._prev
        return False
