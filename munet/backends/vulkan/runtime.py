"""One wgpu device: pipelines, the pending command encoder, submits and host transfers.

Kernels call :meth:`Runtime.dispatch`; dispatches are recorded into one compute pass of a
pending command encoder, and their small parameter blocks (shapes, strides, scalars) into
one host arena that becomes a single buffer write. The batch is submitted at a sync point:
a host read, ``munet.vulkan.synchronize()``, or after ``MAX_PENDING`` dispatches. So eager
code pays one submit per batch, not one per op; ``stats()`` counts both. Inside
``with runtime.batch():`` (a compiled program's call) the dispatch bound is lifted, so the
whole call is one command buffer unless the parameter arena fills.

The device is opened with the adapter's limits and with ``shader-f16`` when the adapter has
it (``has_f16``). Once wgpu reports the device lost (wgpu-native names it in the error of the
failing call), the runtime stays lost: every later dispatch, transfer, allocation, cache release
or statistics call raises :class:`~munet.DeviceLostError` before touching the device. A
backend's ``reset()`` closes its runtime and opens a new one with the next ``generation``;
buffers of an older runtime met by a newer one raise ``DeviceLostError`` saying the device was
reset since the tensor was made. ``MUNET_TEST_INJECT_DEVICE_LOST=N`` (or ``N,M,...``; read at
each submission) makes the N-th queue submission of the process (counted from 1 over every
runtime, ``submission_count()``) report a lost device instead of submitting: tests use it to
exercise recovery.

Thread safety: one reentrant lock per runtime guards the pending encoder and compute pass, the
parameter arena, the allocator, the pipeline and bind-group caches and the counters; every
public method takes it, and ``batch()`` holds it for its whole block (a compiled call is one
command buffer even with other threads recording). Buffers freed by the garbage collector are
queued without the lock (``Allocator.release``), so a finalizer never waits for another thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
import time
from collections import OrderedDict

from munet import metrics
from munet._device import DeviceLostError
from munet._dtype import float16
from munet.backends.vulkan.device_asserts import DeviceAsserts
from munet.backends.vulkan.memory import Allocator
from munet.backends.vulkan.wgsl import half_storage, hoist_params

MAX_PENDING = 256
_PARAM_ARENA = 1 << 20
_BIND_GROUP_CACHE = 4096
_log = logging.getLogger(__name__)
INJECT_DEVICE_LOST = "MUNET_TEST_INJECT_DEVICE_LOST"
_submissions_lock = threading.Lock()
_submissions = 0  # queue submissions of the process, over every runtime (the injection hook counts these)


def submission_count() -> int:
    """How many queue submissions this process has made (``MUNET_TEST_INJECT_DEVICE_LOST`` counts these)."""
    return _submissions


def _next_submission() -> int:
    """The number of the submission about to be made (1 for the process's first)."""
    global _submissions
    with _submissions_lock:
        _submissions += 1
        return _submissions


def _injected_loss(number: int) -> bool:
    """Whether ``MUNET_TEST_INJECT_DEVICE_LOST`` (``N`` or ``N,M,...``) names submission ``number``."""
    value = os.environ.get(INJECT_DEVICE_LOST, "").strip()
    if not value:
        return False
    numbers = [part.strip() for part in value.split(",")]
    if not all(part.isdigit() for part in numbers):
        raise ValueError(f"{INJECT_DEVICE_LOST}: expected submission numbers such as 3 or 3,5; got {value!r}")
    return number in {int(part) for part in numbers}


class Runtime:
    def __init__(self, adapter, label: str, generation: int = 0):
        import wgpu

        self.wgpu = wgpu
        self.label = label
        self.generation = generation  # how many times the backend was reset before opening this runtime
        self.lock = threading.RLock()
        self.adapter = adapter
        # Kernels whose best shape differs on CPU drivers (lavapipe) choose by this.
        self.cpu_driver = adapter.info.get("adapter_type") == "CPU"
        self.limits = dict(adapter.limits)
        self.has_f16 = "shader-f16" in adapter.features
        features = ["shader-f16"] if self.has_f16 else []
        try:
            self.device = adapter.request_device_sync(
                required_features=features, required_limits=self.limits, label=label
            )
        except Exception as exc:
            raise DeviceLostError(f"{label}: could not open the device ({exc})") from exc
        _log.info("opened %s: %s (%s)", label, adapter.info.get("device"), adapter.info.get("backend_type"))
        self.lost_reason: str | None = None
        self.queue = self.device.queue
        self.max_binding = min(self.limits["max-storage-buffer-binding-size"], self.limits["max-buffer-size"])
        self.max_groups = self.limits["max-compute-workgroups-per-dimension"]
        self.align = max(4, self.limits["min-storage-buffer-offset-alignment"])
        self.allocator = Allocator(self)
        self.asserts = DeviceAsserts(self)
        self._layouts: dict[tuple, tuple] = {}
        self._pipelines: dict[tuple, object] = {}
        # Bind groups by (layout, parameter block size, buffers): the parameter block is bound
        # with a dynamic offset, so a group is reused whenever a kernel sees the same blocks
        # again (the caching allocator hands them back); creating one costs more than a dispatch.
        self._bind_groups: OrderedDict = OrderedDict()
        self._params = self.device.create_buffer(
            size=_PARAM_ARENA, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
        )
        self._arena = bytearray()
        self._encoder = None
        self._pass = None
        self._pending = 0
        self.max_pending = MAX_PENDING
        self.counts = {"dispatches": 0, "submits": 0, "pipelines": 0, "bind_groups": 0, "readbacks": 0, "uploads": 0}

    @property
    def recording(self) -> bool:
        return self._encoder is not None

    # pipelines ----------------------------------------------------------------------------------
    def _layout(self, writable: tuple[bool, ...]):
        layout = self._layouts.get(writable)
        if layout is None:
            wgpu = self.wgpu
            entries = [
                {
                    "binding": i,
                    "visibility": wgpu.ShaderStage.COMPUTE,
                    "buffer": {"type": "storage" if w else "read-only-storage", "has_dynamic_offset": i == 0},
                }
                for i, w in enumerate((False, *writable))
            ]
            group = self.device.create_bind_group_layout(entries=entries)
            layout = (group, self.device.create_pipeline_layout(bind_group_layouts=[group]))
            self._layouts[writable] = layout
        return layout

    def pipeline(
        self,
        source: str,
        writable: tuple[bool, ...],
        halves: tuple[int, ...] = (),
        entry_point: str = "main",
        origin=None,
    ):
        """The compute pipeline of ``source`` (entry point ``entry_point``), compiled once per process;
        ``halves`` are the bindings of float16 buffers (see ``wgsl.half_storage``). ``origin`` names a
        user's source (``munet.rtc``) in a compile error; without it the kernel is MuNet's own."""
        key = (source, writable, halves, entry_point)
        cached = self._pipelines.get(key)
        if cached is not None:
            return cached
        with self.lock:
            self.check_alive()
            cached = self._pipelines.get(key)  # another thread may have compiled it meanwhile
            if cached is not None:
                return cached
            group, layout = self._layout(writable)
            start = time.perf_counter()
            try:
                module = self.device.create_shader_module(code=hoist_params(half_storage(source, halves)))
                pipeline = self.device.create_compute_pipeline(
                    layout=layout, compute={"module": module, "entry_point": entry_point}
                )
            except Exception as exc:
                self.check_lost(exc)
                if origin is not None:
                    raise RuntimeError(f"{origin}: the WGSL source failed to compile on {self.label}:\n{exc}") from exc
                raise RuntimeError(
                    f"{self.label}: internal error, a MuNet WGSL kernel failed to compile:\n{exc}"
                ) from exc
            self.counts["pipelines"] += 1
            metrics.observe_kernel_compile("vulkan", time.perf_counter() - start)
            self._pipelines[key] = (pipeline, group)
            return pipeline, group

    # recording and submitting -------------------------------------------------------------------
    def dispatch(
        self, source: str, buffers, writable, params, groups: tuple[int, int, int], entry_point="main", origin=None
    ) -> None:
        """Record one dispatch of ``source`` over ``groups`` workgroups.

        ``buffers`` are the DeviceBuffers bound at bindings 1..n (``writable[i]`` says which
        are written); ``params`` (ints, as u32 words) are bound at binding 0. ``entry_point`` and
        ``origin`` are ``pipeline``'s.
        """
        if groups[0] == 0 or groups[1] == 0 or groups[2] == 0:
            return
        halves = tuple(i for i, buf in enumerate(buffers, 1) if buf.dtype is float16)
        words = struct.pack(f"<{len(params) or 1}I", *[p & 0xFFFFFFFF for p in params] or [0])
        with self.lock:
            self.check_alive()
            self.check_owned(buffers)
            pipeline, group = self.pipeline(source, tuple(writable), halves, entry_point, origin)
            if self._pending >= self.max_pending or len(self._arena) + len(words) + self.align > _PARAM_ARENA:
                self.flush()
            if self._encoder is None:
                self._encoder = self.device.create_command_encoder()
                self._pass = self._encoder.begin_compute_pass()
            offset = -(-len(self._arena) // self.align) * self.align
            self._arena.extend(b"\0" * (offset - len(self._arena)))
            self._arena.extend(words)
            self._pass.set_pipeline(pipeline)
            self._pass.set_bind_group(0, self._bind_group(group, len(words), buffers), [offset])
            self._pass.dispatch_workgroups(*groups)
            self._pending += 1
            self.counts["dispatches"] += 1

    def _bind_group(self, group, param_bytes: int, buffers):
        key = (id(group), param_bytes, *(buf.block.address for buf in buffers))
        bind_group = self._bind_groups.get(key)
        if bind_group is not None:
            self._bind_groups.move_to_end(key)
            return bind_group
        entries = [{"binding": 0, "resource": {"buffer": self._params, "offset": 0, "size": param_bytes}}]
        for i, buf in enumerate(buffers):
            size = min(buf.block.size, self.max_binding)
            entries.append({"binding": i + 1, "resource": {"buffer": buf.block.gpu, "offset": 0, "size": size}})
        bind_group = self.device.create_bind_group(layout=group, entries=entries)
        self.counts["bind_groups"] += 1
        self._bind_groups[key] = bind_group
        if len(self._bind_groups) > _BIND_GROUP_CACHE:
            self._bind_groups.popitem(last=False)
        return bind_group

    def forget_bind_groups(self) -> None:
        """Drop cached bind groups (their buffers are being destroyed)."""
        with self.lock:
            self._bind_groups.clear()

    def grid(self, workgroups: int) -> tuple[int, int, int]:
        """A 2-D grid of at least ``workgroups`` groups (kernels linearize x + y * nx)."""
        if workgroups <= self.max_groups:
            return (workgroups, 1, 1)
        return (self.max_groups, -(-workgroups // self.max_groups), 1)

    def flush(self) -> None:
        """Submit the pending commands (no wait)."""
        with self.lock:
            self.check_alive()
            if self._encoder is None:
                return
            self._pass.end()
            number = _next_submission()
            if _injected_loss(number):
                self.lose(f"injected by {INJECT_DEVICE_LOST}={number}")
            try:
                self.queue.write_buffer(self._params, 0, bytes(self._arena))
                self.queue.submit([self._encoder.finish()])
            except Exception as exc:
                self._drop_pending()
                self.check_lost(exc)
                raise
            self._drop_pending()
            self.counts["submits"] += 1
            self.allocator.after_submit()

    def _drop_pending(self) -> None:
        self._encoder = self._pass = None
        self._arena = bytearray()
        self._pending = 0

    @contextlib.contextmanager
    def batch(self):
        """Record every dispatch inside the block into one command buffer (submitted at its end
        or at a host read inside it); only a full parameter arena submits earlier. The block holds
        the runtime's lock: other threads' device work waits until it ends."""
        with self.lock:
            previous = self.max_pending
            self.max_pending = 1 << 62
            try:
                yield
            finally:
                self.max_pending = previous
                if self._pending >= previous:
                    self.flush()

    def synchronize(self) -> None:
        """Submit pending work and wait until the device has finished it."""
        with self.lock:
            self.flush()
            try:
                # Mapping a buffer waits for all work submitted before it (wgpu-py 0.32's
                # on_submitted_work_done_sync is broken), so a 4-byte read is the fence.
                self.asserts.read(self._params, 0, 4)
            except Exception as exc:
                self.check_lost(exc)
                raise
            metrics.count_host_sync(self.label, "synchronize")
            self.asserts.check()

    def empty_cache(self) -> None:
        """Submit pending work, then destroy the allocator's cached blocks (one locked step: no
        other thread records commands over blocks freed in between)."""
        with self.lock:
            self.flush()
            self.allocator.after_submit()
            self.allocator.empty_cache()

    # host transfer --------------------------------------------------------------------------------
    def write(self, buffer, data: bytes) -> None:
        if not data:
            return
        with self.lock:
            self.check_alive()
            self.check_owned((buffer,))
            try:
                self.queue.write_buffer(buffer.block.gpu, 0, data)
            except Exception as exc:
                self.check_lost(exc)
                raise
            self.counts["uploads"] += 1

    def read(self, buffer, byte_offset: int, nbytes: int) -> bytes:
        """``nbytes`` from ``buffer`` at ``byte_offset`` (submits pending work first)."""
        with self.lock:
            self.check_alive()
            self.check_owned((buffer,))
            self.flush()
            try:
                data = self.asserts.read(buffer.block.gpu, byte_offset, nbytes)
            except Exception as exc:
                self.check_lost(exc)
                raise
            self.counts["readbacks"] += 1
            metrics.count_host_sync(self.label, "readback")
            self.asserts.check()
            return bytes(data)

    # device loss and reset -------------------------------------------------------------------------
    def check_alive(self) -> None:
        """Raise DeviceLostError if the device was lost (or its backend reset)."""
        if self.lost_reason is not None:
            self.raise_lost()

    def check_owned(self, buffers) -> None:
        """Raise DeviceLostError for a buffer of an earlier runtime of this device (made before a reset)."""
        for buf in buffers:
            owner = buf.block.owner
            if owner is not self:
                raise DeviceLostError(
                    f"{self.label}: a tensor made before the device was reset (generation {owner.generation}; "
                    f"the device is at generation {self.generation}) was used; its memory went with the old "
                    "device: create the tensor again (from host data or a checkpoint)"
                )

    def raise_lost(self, cause: Exception | None = None):
        raise DeviceLostError(
            f"{self.label}: the device was lost ({self.lost_reason}); its tensors are gone; "
            "munet.vulkan.reset() opens a fresh device"
        ) from cause

    def lose(self, reason: str, cause: Exception | None = None, *, closing: bool = False):
        """Mark the device lost for ``reason``, drop the pending commands, release the wgpu device; raises."""
        with self.lock:
            if self.lost_reason is None:
                self.lost_reason = reason
                _log.log(logging.INFO if closing else logging.ERROR, "%s: the device was lost (%s)", self.label, reason)
            self._drop_pending()
            self._bind_groups.clear()
            with contextlib.suppress(Exception):  # a lost device may refuse even this
                self.device.destroy()
            self.raise_lost(cause)

    def close(self, reason: str) -> None:
        """End this runtime (its backend is reset): later calls raise DeviceLostError naming ``reason``."""
        with contextlib.suppress(DeviceLostError):
            self.lose(reason, closing=True)

    def check_lost(self, exc: Exception) -> None:
        """Raise DeviceLostError (and stay lost) when ``exc`` is wgpu reporting a lost device."""
        if self.lost_reason is None and "lost" not in str(exc).lower():
            return
        self.lose(" ".join(str(exc).split())[-200:], exc)

    def stats(self) -> dict:
        with self.lock:
            self.check_alive()
            return {**self.allocator.stats(), **self.counts, "pending_dispatches": self._pending}
