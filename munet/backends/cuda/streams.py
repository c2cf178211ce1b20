"""CUDA streams and events (``munet.cuda.Stream``, ``Event``, ``current_stream``, ``stream()``).

They wrap ``cupy.cuda.Stream`` and ``cupy.cuda.Event``, so MuNet's current stream of a device *is*
CuPy's (per thread and device): every kernel MuNet launches, every cuBLAS call and every copy is
issued on it, and CuPy code called inside ``with munet.cuda.stream(s):`` runs on ``s`` too. As in
PyTorch, each device's default stream is the legacy null stream, which orders against all others.
"""

from __future__ import annotations

from munet._device import device
from munet.backends.cuda.discovery import cupy_module, device_index


class Stream:
    """A stream of work on one CUDA device, ordered; streams run concurrently with each other.

    >>> s = munet.cuda.Stream()
    >>> with munet.cuda.stream(s):
    ...     y = x @ x               # issued on s
    >>> munet.cuda.current_stream().wait_stream(s)
    """

    def __init__(self, device=None, priority: int = 0):
        index = device_index(device)
        cp = cupy_module()
        with cp.cuda.Device(index):
            self._init(cp.cuda.Stream(priority=priority), index)

    def _init(self, cupy_stream, index: int) -> None:
        self._stream = cupy_stream
        self.device = _cuda(index)
        self._contexts: list = []

    @classmethod
    def _wrap(cls, cupy_stream, index: int) -> Stream:
        out = object.__new__(cls)
        out._init(cupy_stream, index)
        return out

    @property
    def cuda_stream(self) -> int:
        """The raw ``cudaStream_t`` (0 for the legacy default stream)."""
        return self._stream.ptr

    def query(self) -> bool:
        """Whether every piece of work issued on the stream has finished."""
        return bool(self._stream.done)

    def synchronize(self) -> None:
        """Wait on the host until the stream's work has finished."""
        self._stream.synchronize()

    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait for ``event`` (no-op for an event never recorded)."""
        if event._event is not None:
            self._stream.wait_event(event._event)

    def wait_stream(self, stream: Stream) -> None:
        """Make later work on this stream wait for the work issued on ``stream`` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        event = Event() if event is None else event
        event.record(self)
        return event

    def __enter__(self) -> Stream:
        context = StreamContext(self)
        context.__enter__()
        self._contexts.append(context)
        return self

    def __exit__(self, *exc) -> None:
        self._contexts.pop().__exit__(*exc)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Stream):
            return NotImplemented
        return self.cuda_stream == other.cuda_stream and self.device == other.device

    def __hash__(self) -> int:
        return hash((self.cuda_stream, self.device))

    def __repr__(self) -> str:
        return f"<munet.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class ExternalStream(Stream):
    """A stream created elsewhere (another library's ``cudaStream_t``), used as a MuNet stream; the
    caller keeps it alive while MuNet uses it.

    >>> s = munet.cuda.ExternalStream(cupy_stream.ptr)
    """

    def __init__(self, stream_ptr: int, device=None):
        index = device_index(device)
        cp = cupy_module()
        with cp.cuda.Device(index):
            self._init(cp.cuda.ExternalStream(int(stream_ptr), index), index)


def capture_stream(device=None) -> Stream:
    """A new non-blocking stream of ``device``: it does not synchronise with the legacy default
    stream, which is what a graph capture needs (work on the legacy stream would join it)."""
    index = device_index(device)
    cp = cupy_module()
    with cp.cuda.Device(index):
        return Stream._wrap(cp.cuda.Stream(non_blocking=True), index)


def get_stream_from_external(data_ptr: int, device=None) -> ExternalStream:
    """``ExternalStream(data_ptr, device)`` (PyTorch's spelling)."""
    return ExternalStream(data_ptr, device)


class Event:
    """A marker in a stream: record it, wait for it on another stream or the host, time between two.

    Created on the device of the stream it is first recorded on, as in PyTorch.
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._event = None
        self.device = None

    def record(self, stream: Stream | None = None) -> None:
        stream = current_stream() if stream is None else stream
        if self._event is None:
            cp = cupy_module()
            with cp.cuda.Device(stream.device.index):
                self._event = cp.cuda.Event(
                    block=self.blocking, disable_timing=not self.enable_timing, interprocess=self.interprocess
                )
            self.device = stream.device
        elif stream.device != self.device:
            raise RuntimeError(f"Event.record: the event belongs to {self.device}, the stream to {stream.device}")
        self._event.record(stream._stream)

    def wait(self, stream: Stream | None = None) -> None:
        """Make later work on ``stream`` (default: the current one) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        """Whether the work before the recorded point has finished (True if never recorded)."""
        return self._event is None or bool(self._event.done)

    def synchronize(self) -> None:
        if self._event is not None:
            self._event.synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event to ``end_event`` (both recorded with ``enable_timing=True``);
        waits for ``end_event`` first."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time: both events must be created with enable_timing=True")
        if self._event is None or end_event._event is None:
            raise RuntimeError("Event.elapsed_time: both events must be recorded before measuring")
        end_event.synchronize()
        return float(cupy_module().cuda.get_elapsed_time(self._event, end_event._event))

    @property
    def cuda_event(self) -> int:
        return 0 if self._event is None else self._event.ptr

    def __repr__(self) -> str:
        return f"<munet.cuda.Event device={self.device} cuda_event={self.cuda_event:#x}>"


class StreamContext:
    """``with munet.cuda.stream(s):``: ``s`` is the current stream of its device, and its device the
    current device, inside the block (None: the block changes nothing)."""

    def __init__(self, stream: Stream | None):
        self.stream = stream
        self._device = None

    def __enter__(self) -> Stream | None:
        if self.stream is None:
            return None
        self._device = cupy_module().cuda.Device(self.stream.device.index)
        self._device.__enter__()
        self.stream._stream.__enter__()
        return self.stream

    def __exit__(self, *exc) -> None:
        if self.stream is None:
            return
        try:
            self.stream._stream.__exit__(*exc)
        finally:
            self._device.__exit__(*exc)


def stream(stream: Stream | None) -> StreamContext:
    return StreamContext(stream)


def current_stream(device=None) -> Stream:
    """The stream work on ``device`` (default: the current device) is issued on in this thread."""
    index = device_index(device)
    return Stream._wrap(cupy_module().cuda.get_current_stream(index), index)


def default_stream(device=None) -> Stream:
    """The device's default (legacy null) stream."""
    index = device_index(device)
    return Stream._wrap(cupy_module().cuda.Stream.null, index)


def set_stream(stream: Stream) -> None:
    """Make ``stream`` the current stream of its device in this thread (until changed again)."""
    with cupy_module().cuda.Device(stream.device.index):
        stream._stream.use()


def synchronize(device=None) -> None:
    """Wait until every stream of ``device`` (default: the current device) has finished its work."""
    cupy_module().cuda.Device(device_index(device)).synchronize()


def _cuda(index: int):
    return device("cuda", index)
