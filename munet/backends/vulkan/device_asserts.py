"""Device-side index checks: a fault record written by kernels, raised at the next synchronization.

A kernel that reads indices from a tensor (gather, scatter, index, index_put, embedding, the
sorter of searchsorted), and the value checks of the ``check`` op, are dispatched through :meth:`DeviceAsserts.dispatch`, which binds the
runtime's fault record (three u32 words) read-write after its buffers. The kernel tests each
index with the WGSL helper ``index_out_of_range(v, given, size, site)`` (:data:`INDEX_FAULT`) and
reads or writes nothing for an index out of range. The first
fault claims the record with a compare-and-swap and stores its site, the bad index and the size;
later ones leave it alone (dispatches that bind the record are ordered, so the first failing
kernel in submission order wins; which bad index of that kernel is reported is not defined). A
site is a message template interned on the host (:meth:`DeviceAsserts.site`), passed to the
kernel as a parameter word, so the pipeline does not depend on the message.

The runtime's host reads (and its ``synchronize()`` fence) go through :meth:`DeviceAsserts.read`,
which, if a checked kernel was recorded since the last read, copies the record (12 bytes) back in the same
round trip as the data; :meth:`DeviceAsserts.check`, called next, clears a set record and raises
it as its site's error (:class:`IndexOutOfRangeError`, the cpu backend's, for an index; the error of a
``check`` op's value check, ``kernels_checks.py``). So, as with CUDA's device-side
asserts, the error surfaces at the next synchronization, not at the op.
``MUNET_VULKAN_LAUNCH_BLOCKING=1`` (CUDA_LAUNCH_BLOCKING's analog) synchronizes after each
checked kernel, so the op that caused the error raises it.
"""

from __future__ import annotations

import os
import struct

from munet import _dtype as D
from munet.backends.vulkan.memory import Block, DeviceBuffer
from munet.ops.checks import IndexOutOfRangeError

_RECORD = struct.Struct("<IiI")  # site (0: no fault), bad index, size of the indexed dim

# The record's declaration, after ``@group(0) @binding(N)`` with N its binding: the last one.
FAULT_DECLARATION = "var<storage, read_write> FAULT: array<atomic<u32>>;"

# The helpers of a checked kernel (they use FAULT).
# ``index_out_of_range(v, given, size, site)``: whether ``v`` is outside [0, size); if so, the
# fault (site, given, size) is recorded unless an earlier one holds the record.
INDEX_FAULT = """
fn index_fault(site: u32, value: i32, size: u32) {
  loop {
    let r = atomicCompareExchangeWeak(&FAULT[0], 0u, site);
    if (r.exchanged) { atomicStore(&FAULT[1], bitcast<u32>(value)); atomicStore(&FAULT[2], size); return; }
    if (r.old_value != 0u) { return; }
  }
}
fn index_out_of_range(v: i32, given: i32, size: u32, site: u32) -> bool {
  if (v >= 0 && u32(v) < size) { return false; }
  index_fault(site, given, size);
  return true;
}
"""


def out_of_bounds(caller: str, dim: int) -> str:
    """The message template of an index out of ``[-size, size)`` or ``[0, size)``, as the cpu kernels word it."""
    return f"{caller}: index {{value}} is out of bounds for dimension {dim} with size {{size}}"


class DeviceAsserts:
    """The fault record of one runtime, its message sites, and the check after each wait."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.blocking = os.environ.get("MUNET_VULKAN_LAUNCH_BLOCKING") == "1"
        self._buffer: DeviceBuffer | None = None
        self._sites: dict[tuple, int] = {}
        self._messages: list[tuple[str, type]] = []  # (template, the error class it raises)
        self._armed = False  # a kernel bound the record since the last read of it
        self._fetched: bytes | None = None  # the record as the last read() copied it back

    def _record(self) -> DeviceBuffer:
        if self._buffer is None:
            rt = self.runtime
            rt.check_alive()
            usage = rt.wgpu.BufferUsage.STORAGE | rt.wgpu.BufferUsage.COPY_SRC | rt.wgpu.BufferUsage.COPY_DST
            try:
                gpu = rt.device.create_buffer(size=_RECORD.size, usage=usage)
            except Exception as exc:
                rt.check_lost(exc)
                raise
            self._buffer = DeviceBuffer(Block(gpu, _RECORD.size, 0, rt), 3, D.int32)  # address 0: no allocator block
        return self._buffer

    def site(self, message: str, error: type = IndexOutOfRangeError) -> int:
        """The id (a u32 word, never 0) a kernel passes to ``index_fault`` to raise ``error(message)``.

        ``message`` may use ``{value}`` (the bad index) and ``{size}``; see :func:`out_of_bounds`.
        """
        with self.runtime.lock:
            found = self._sites.get((message, error))
            if found is None:
                self._messages.append((message, error))
                found = self._sites[(message, error)] = len(self._messages)
            return found

    def dispatch(self, source: str, buffers, writable, params, groups) -> None:
        """``Runtime.dispatch`` of a checked kernel: the record is bound after ``buffers`` (read-write)
        and the next read checks it. In launch-blocking mode, waits for the kernel and checks now."""
        rt = self.runtime
        with rt.lock:  # a read in another thread sees the kernel and the armed record together
            rt.dispatch(source, [*buffers, self._record()], [*writable, True], params, groups)
            self._armed = True
        if self.blocking:
            rt.synchronize()

    def read(self, gpu, byte_offset: int, nbytes: int):
        """``nbytes`` (a multiple of 4) of the wgpu buffer ``gpu`` at ``byte_offset``, waiting for the
        submitted work, as ``queue.read_buffer``; the record comes back in the same copy when armed.
        The caller holds the runtime's lock and calls :meth:`check` next."""
        queue = self.runtime.queue
        if not self._armed:
            return queue.read_buffer(gpu, byte_offset, nbytes)
        self._armed = False
        wgpu, device = self.runtime.wgpu, self.runtime.device
        at = -(-nbytes // 4) * 4
        staging = device.create_buffer(
            size=at + _RECORD.size, usage=wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.MAP_READ
        )
        encoder = device.create_command_encoder()
        encoder.copy_buffer_to_buffer(gpu, byte_offset, staging, 0, nbytes)
        encoder.copy_buffer_to_buffer(self._buffer.gpu, 0, staging, at, _RECORD.size)
        queue.submit([encoder.finish()])
        staging.map_sync("READ")
        raw = bytes(staging.read_mapped())
        staging.destroy()
        self._fetched = raw[at:]
        return raw[:nbytes]

    def check(self) -> None:
        """Raise the fault that the last :meth:`read` brought back, if any, and clear the record."""
        fetched, self._fetched = self._fetched, None
        if fetched is None:
            return
        site, value, size = _RECORD.unpack(fetched)
        if site:
            try:
                self.runtime.queue.write_buffer(self._buffer.gpu, 0, bytes(_RECORD.size))
            except Exception as exc:
                self.runtime.check_lost(exc)
                raise
            template, error = self._messages[site - 1]
            message = template.format(value=value, size=size)
            if not self.blocking:
                message += (
                    f" (raised by {self.runtime.label} at the first synchronization after the kernel ran; "
                    "MUNET_VULKAN_LAUNCH_BLOCKING=1 raises it at the op)"
                )
            raise error(message)
