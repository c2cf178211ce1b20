"""Device-side asserts on cuda: a fault record written by kernels, raised at the next synchronization.

A checked kernel (the ``check`` op's, ``kernels_checks.py``; integer division by zero, in the
rendered kernels) gets the device's fault record, three ``unsigned long long`` words in device
memory: the first failing thread claims it with ``atomicCAS`` on word 0 (its *site*, an id the host
interned with :meth:`DeviceAsserts.site`; 0 means no fault) and stores the failing element's value
(word 1, as 64 bits) and flat position (word 2); later faults leave it alone. A site is a message
template and the error class it raises, so the kernel does not depend on the message.

Launching a checked kernel *arms* the record (:meth:`DeviceAsserts.launched`, which notes the
stream it ran on). The backend's host reads (``to_numpy``: ``.item()``, ``.cpu()``, ``.numpy()``)
and its synchronizations (``munet.cuda.synchronize``, ``backend.synchronize``) call
:meth:`DeviceAsserts.check`, which, when armed, waits for the noted streams, copies the record back
(24 bytes), clears a set record and raises its site's error, the cpu kernels' error class and
message (``munet/ops/checks.py``). So, as with CUDA's own device-side asserts, the error surfaces
at the next synchronization, not at the op; ``CUDA_LAUNCH_BLOCKING=1`` synchronizes after every
checked kernel, so the op that caused it raises. A CUDA graph replay arms the record of its
device when the record exists (the graph may hold checked kernels).

Unlike CUDA's ``assert``, the fault does not poison the context: after the error is raised the
device is usable and later work runs as before. Which failing element of a kernel is reported is
the first to claim the record (on the device: not defined; under the CPU emulation, which runs
threads in order: the first).
"""

from __future__ import annotations

import os
import threading

from munet import _dtype as D
from munet.ops.checks import IndexOutOfRangeError

# Prepended to a checked kernel's source: ``munet_fault(fault, site, value, index)`` records a
# fault unless an earlier one holds the record.
FAULT_HELPER = r"""#ifndef MUNET_FAULT_HELPER
#define MUNET_FAULT_HELPER
__device__ __forceinline__ void munet_fault(unsigned long long *fault, unsigned long long site,
                                            unsigned long long value, unsigned long long index) {
  if (atomicCAS(fault, 0ULL, site) == 0ULL) { fault[1] = value; fault[2] = index; }
}
#endif
"""


# The site every runtime reserves first: an integer division by zero (PyTorch's error on the cpu).
ZERO_DIVISION_SITE = 1
_ZERO_DIVISION = ("ZeroDivisionError", RuntimeError)


class DeviceAsserts:
    """The fault record of one cuda runtime, its message sites, and the check at each synchronization."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.blocking = os.environ.get("CUDA_LAUNCH_BLOCKING") == "1"
        self._lock = threading.Lock()
        self._record = None  # allocated at the first checked kernel
        self._sites: dict[tuple, int] = {}
        self._messages: list[tuple[str, type]] = []  # (template, the error class it raises)
        self._armed: dict[int, object] = {}  # stream pointer -> cupy stream a checked kernel ran on
        self.site(*_ZERO_DIVISION)  # the first site: ZERO_DIVISION_SITE

    def site(self, message: str, error: type = IndexOutOfRangeError) -> int:
        """The id (never 0) a kernel passes as its fault site to raise ``error(message)``;
        ``message`` may use ``{value}`` (the failing element) and ``{index}`` (its flat position)."""
        with self._lock:
            found = self._sites.get((message, error))
            if found is None:
                self._messages.append((message, error))
                found = self._sites[(message, error)] = len(self._messages)
            return found

    def record(self):
        """The device pointer of the fault record (call within ``rt.scope()``)."""
        if self._record is None:
            rt = self.runtime
            if rt.stream.is_capturing():
                raise RuntimeError(
                    f"{rt.label}: the first checked kernel of the device cannot run inside a CUDA graph capture "
                    "(its fault record is allocated and cleared then); run the step once before capturing it"
                )
            record = rt.empty((3,), D.int64)
            record.fill(0)
            self._record = record
        return self._record.data.ptr

    def launched(self) -> None:
        """A checked kernel was launched on the current stream: the next :meth:`check` reads the record."""
        stream = self.runtime.stream
        with self._lock:
            self._armed[stream.ptr] = stream
        if self.blocking and not stream.is_capturing():
            self.check()

    def replayed(self, stream) -> None:
        """A CUDA graph ran on ``stream``: it may hold checked kernels, so arm the record if it exists."""
        if self._record is not None:
            with self._lock:
                self._armed[stream.ptr] = stream
            if self.blocking:
                self.check()

    def check(self) -> None:
        """If armed: wait for the armed streams, read the record, and raise a fault it holds (clearing it)."""
        with self._lock:
            armed, self._armed = list(self._armed.values()), {}
        if not armed:
            return
        rt = self.runtime
        with rt.scope():
            for stream in armed:
                stream.synchronize()
            site, value, index = (int(w) for w in self._record.get())
            if not site:
                return
            self._record.fill(0)
        template, error = self._messages[site - 1]
        message = template.format(value=value, index=index)  # the record holds int64 words
        if not self.blocking:
            message += (
                f" (raised by {rt.label} at the first synchronization after the kernel ran; "
                "CUDA_LAUNCH_BLOCKING=1 raises it at the op)"
            )
        raise error(message)
