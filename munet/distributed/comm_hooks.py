"""What a DDP communication hook sees and returns: ``GradBucket`` and ``BuiltinCommHookType``.

DDP calls ``hook(state, bucket)`` for each bucket as soon as its gradients are ready (in bucket
order on every rank); the hook returns a ``munet.futures.Future`` whose value is the bucket's
reduced gradients, a flat tensor of the bucket's size (``bucket.buffer()`` itself, or a new one).
The reducer waits on it where it would wait on its own all-reduce and copies the value into
``.grad``. See munet/distributed/algorithms/ddp_comm_hooks/default_hooks.py for PyTorch's two.
"""

from __future__ import annotations

import enum


class BuiltinCommHookType(enum.Enum):
    """``DistributedDataParallel._register_builtin_comm_hook``'s choices."""

    ALLREDUCE = 0
    FP16_COMPRESS = 1


class GradBucket:
    """One DDP bucket: a flat ``buffer`` (on the host, or on the cuda device NCCL reduces it on) holding the
    gradients of ``parameters`` back to back."""

    def __init__(self, index: int, buffer, parameters: list, offsets: list[int], is_last: bool):
        self._index, self._buffer, self._parameters = index, buffer, list(parameters)
        self._offsets, self._is_last = list(offsets), is_last

    def index(self) -> int:
        return self._index

    def buffer(self):
        """The flat tensor of this bucket's gradients (written in place by hooks that reduce in place)."""
        return self._buffer

    def set_buffer(self, buffer) -> None:
        if buffer.numel() != self._buffer.numel():
            raise ValueError(f"GradBucket.set_buffer: expected {self._buffer.numel()} elements, got {buffer.numel()}")
        self._buffer.copy_(buffer.reshape(-1))

    def gradients(self) -> list:
        """Each parameter's gradient: a view of ``buffer()`` with the parameter's shape."""
        return [
            self._buffer[start : start + p.numel()].view(tuple(p.shape))
            for p, start in zip(self._parameters, self._offsets)
        ]

    def parameters(self) -> list:
        return list(self._parameters)

    def is_last(self) -> bool:
        return self._is_last


class HookResult:
    """The reducer's handle on a hook's Future: ``wait()`` puts the value into the bucket's buffer."""

    def __init__(self, future, buffer, where: str):
        from munet.futures import Future

        if not isinstance(future, Future):
            raise TypeError(
                f"{where}: a communication hook must return a munet.futures.Future, got {type(future).__name__}"
            )
        self.future, self.buffer, self.where = future, buffer, where

    def is_completed(self) -> bool:
        return self.future.done()

    def wait(self) -> None:
        value = self.future.wait()
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        if getattr(value, "numel", None) is None or value.numel() != self.buffer.numel():
            raise ValueError(
                f"{self.where}: a communication hook's Future must hold a tensor of the bucket's {self.buffer.numel()} "
                f"elements, got {value!r:.80}"
            )
        if value is not self.buffer:
            from munet.autograd.grad_mode import no_grad

            with no_grad():
                self.buffer.copy_(value.reshape(-1).to(self.buffer.dtype))
