"""``munet.compile(..., recover="rebuild")``: a compiled call that meets a lost device comes back.

Before each call the compiled function copies to the host every device buffer the call reads or
writes: its tensor arguments and their gradients, the parameters, buffers and gradients the
trace met, the optimizer state, and the device constants folded into the plan (those once per
specialization). When the call raises :class:`~munet.DeviceLostError`, the device is reset
(``munet._device.reset_backend``), each saved buffer gets fresh memory holding its copy
(``backend.restore``: the same tensor objects work again, views included), the plan is rebuilt
on the new device and the call runs once more. So nothing the compiled function owns is lost;
other tensors on the device are (they raise ``DeviceLostError`` when used). A second loss in the
retry resets and restores again, then raises.

The cost: one host read of every buffer the call touches, per call (a host synchronization,
and the bytes of the arguments and the training state), on devices that can be reset (vulkan);
on cpu ``recover`` does nothing.
"""

from __future__ import annotations

import numpy as np

from munet._device import DeviceLostError, reset_backend

RECOVER_MODES = (None, "rebuild")


def check_recover(recover) -> None:
    if recover not in RECOVER_MODES:
        raise ValueError(f"munet.compile: recover must be None or 'rebuild', got {recover!r}")


def can_reset(backend) -> bool:
    """Whether ``backend``'s device can be lost and reset (vulkan; not cpu)."""
    return hasattr(backend, "reset")


class Snapshot:
    """What one call of a compiled function touches, saved on the host now: the contents of every
    buffer on ``backend`` among ``tensors``, their ``.grad`` and the optimizers' state, and which
    tensor objects the ``.grad`` of ``grad_owners`` and each optimizer's state entries are."""

    def __init__(self, backend, tensors, grad_owners=(), optimizers=(), kept: list | None = None):
        self.backend = backend
        self.grads = [(t, t.grad) for t in grad_owners]
        self.states = [(opt, {p: (st, dict(st)) for p, st in opt.state.items()}) for opt in optimizers]
        tensors = list(tensors) + [g for _, g in self.grads]
        tensors += [v for _, saved in self.states for _, items in saved.values() for v in items.values()]
        # host tensors the call writes (a step count) are copied too: the retry must not count twice
        self.host = [(buf, buf.copy()) for buf in _buffers_on(None, tensors)]
        try:
            self.saved = [(buf, backend.read_storage(buf)) for buf in _buffers_on(backend, tensors)]
        except DeviceLostError as exc:
            raise DeviceLostError(
                f"munet.compile(recover='rebuild'): the device was lost before the call started, with its "
                f"arguments, so the call cannot be retried ({exc})"
            ) from exc
        self.saved += kept or []

    def reset_and_restore(self) -> None:
        """Open a fresh device, put every saved buffer back on it and every saved reference back in place."""
        reset_backend(self.backend.device)
        for buf, host in self.saved:
            self.backend.restore(buf, host)
        for buf, host in self.host:
            np.copyto(buf, host)
        for t, grad in self.grads:
            t.grad = grad
        for opt, saved in self.states:
            opt.state.clear()
            for p, (st, items) in saved.items():
                st.clear()
                st.update(items)
                opt.state[p] = st


def _buffers_on(backend, tensors) -> list:
    """The distinct storage buffers of the real (not traced) tensors among ``tensors`` on ``backend``
    (None: those in host memory, NumPy arrays, whichever backend holds them)."""
    from munet._tensor import Tensor
    from munet.compiler.trace import is_symbolic

    seen, out = set(), []
    for t in tensors:
        if not isinstance(t, Tensor) or is_symbolic(t):
            continue
        host = backend is None and isinstance(t._storage.data, np.ndarray)
        if t._storage.backend is not backend and not host:
            continue
        buf = t._storage.data
        if id(buf) not in seen:
            seen.add(id(buf))
            out.append(buf)
    return out
