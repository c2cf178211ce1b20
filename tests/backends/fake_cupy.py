"""A stand-in for CuPy over host memory, so the cuda backend's own code runs without a GPU.

It provides the part of CuPy's API that ``munet/backends/cuda`` calls: arrays whose ``.data`` is a
memory pointer with an offset into an allocation (built with NumPy's buffer arguments, which check
that a view fits its allocation), CuPy's thread-local allocator hook and per-device memory pools,
devices as a thread-local stack, streams and events (which complete at once: ordering is not
modelled), peer copies as ``memmove``, and ``cublasGemmStridedBatchedEx`` computed in float64 from
the raw pointers and leading dimensions it is given, column-major as cuBLAS reads them.

Stream capture (``Stream.begin_capture``/``end_capture`` -> ``Graph.launch``) follows CUDA's rules:
while a stream captures, the device work issued on it (kernel launches, GEMMs, peer copies, and the
array operations: ufuncs, ``astype``, ``copy``, ``fill``, ``copyto``, item assignment, the array
constructors that copy) is recorded, *not executed*; each launch of the graph runs the recorded
work in order, reading and writing the memory the pointers named at capture. Host synchronisations (``get``,
``set``, synchronising the stream or its device) invalidate the capture and raise, and capture on
the legacy null stream is refused, as CUDA does. Allocations during a capture are host-side (they
come from the current allocator at once), as in CuPy.

Kernel modules (``cuda.function.Module``) run generated CUDA C on the CPU through
``munet/backends/cuda/emulation.py``: a cubin cannot run here, so :func:`install` wraps
``nvrtc.compile_source`` to remember which source each cubin NVRTC produced came from (NVRTC still
compiles every kernel, for the fake devices' sm_90), and ``Module.load(cubin)`` looks the source up;
its functions launch the source's kernel through the emulation's C++ build with the grid, block and
packed arguments the launcher passes (pointers are host addresses here, so the kernel reads and
writes the fake arrays' memory).

``cupy.cuda.nccl`` (see the NCCL section) is NCCL between processes that really exchange the data,
through files in a folder its unique id names; munet/distributed's NCCL path runs on it in CI.

Arithmetic is NumPy's. What this checks is MuNet's side: pointer and stride arithmetic, dtype
handling, which device and pool every allocation lands on, and the integration with tensors. It
is no evidence about CuPy's or the GPU's behaviour (tests/backends/test_cuda_gpu.py is).
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import types
import weakref

import ml_dtypes
import numpy as np

DEVICES = 2
TOTAL_MEMORY = 64 << 20  # per fake device

float16, float32, float64 = np.float16, np.float32, np.float64
int8, int16, int32, int64, uint8, uint16, uint32 = np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32
bool_ = np.bool_

_local = threading.local()


def _stack():
    if not hasattr(_local, "devices"):
        _local.devices, _local.allocator, _local.streams = [0], None, {}
    return _local


def _current_device() -> int:
    return _stack().devices[-1]


class CUDARuntimeError(RuntimeError):
    """``cupy_backends.cuda.api.runtime.CUDARuntimeError``."""


def _capturing_stream(stream=None):
    """The stream device work goes to if it is capturing, else None."""
    stream = get_current_stream() if stream is None else stream
    return stream if stream._capture is not None else None


def _submit(work, stream=None) -> None:
    """Run ``work()`` now, or record it when its stream captures (a graph launch runs it)."""
    capturing = _capturing_stream(stream)
    if capturing is None:
        work()
    else:
        capturing._capture.append(work)


def _forbid_during_capture(what: str, stream=None) -> None:
    """A host synchronisation: invalidates an ongoing capture and raises, as CUDA does."""
    capturing = _capturing_stream(stream)
    if capturing is not None:
        capturing._invalidated = what
        raise CUDARuntimeError(f"cudaErrorStreamCaptureUnsupported: {what} is not permitted when stream is capturing")


class PinnedMemoryPointer(bytearray):
    """``cupy.cuda.PinnedMemoryPointer``: page-locked host memory (here a bytearray) NumPy arrays view."""


PINNED_ALLOCATIONS: list = []  # the byte size of every alloc_pinned_memory call
HOST_COPIES: list = []  # ("get" | "set", host side pinned, blocking) of every host transfer


def alloc_pinned_memory(size: int) -> PinnedMemoryPointer:
    """``cupy.cuda.alloc_pinned_memory``: a block from the pinned memory pool."""
    PINNED_ALLOCATIONS.append(size)
    return PinnedMemoryPointer(size)


def _in_pinned_memory(array) -> bool:
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, PinnedMemoryPointer)


class Memory:
    def __init__(self, nbytes: int, device_id: int, buf=None):
        self.buf = np.zeros(max(nbytes, 1), np.uint8) if buf is None else buf
        self.size = nbytes
        self.device_id = device_id
        self.ptr = self.buf.ctypes.data if nbytes else 0


class MemoryPointer:
    def __init__(self, mem: Memory, offset: int):
        self.mem, self.offset = mem, offset

    @property
    def ptr(self) -> int:
        return self.mem.ptr + self.offset if self.mem.size else 0

    @property
    def device(self):
        return Device(self.mem.device_id)

    def __add__(self, nbytes: int) -> MemoryPointer:
        return MemoryPointer(self.mem, self.offset + nbytes)


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    def __new__(cls, shape, dtype=float, memptr=None, strides=None, order="C"):
        dtype = np.dtype(dtype)
        if memptr is None:
            memptr = _allocate(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        if 0 in tuple(shape):  # NumPy checks an empty view's strides against its buffer; CuPy does not
            out = np.ndarray.__new__(cls, shape, dtype)
        else:
            out = np.ndarray.__new__(cls, shape, dtype, buffer=memptr.mem.buf, offset=memptr.offset, strides=strides)
        out._mem = memptr.mem
        return out

    def __array_finalize__(self, obj):
        self._mem = getattr(obj, "_mem", None)
        self._created_on = _current_device()  # a NumPy result's device: where CuPy would have made it

    @property
    def data(self) -> MemoryPointer:
        mem = self._mem
        address = self.__array_interface__["data"][0]
        if mem is None or not (mem.ptr <= address < mem.ptr + max(mem.size, 1)):
            root = self
            while isinstance(root.base, np.ndarray):
                root = root.base
            flat = np.asarray(root).reshape(-1, order="A").view(np.uint8)
            mem = self._mem = Memory(flat.size, self._created_on, flat)
        return MemoryPointer(mem, address - mem.ptr)

    @property
    def device(self):
        return Device(self.data.mem.device_id)

    def get(self, stream=None, order="C", out=None, blocking=True):
        _forbid_during_capture("a device-to-host copy (ndarray.get)", stream)
        HOST_COPIES.append(("get", _in_pinned_memory(out), blocking))
        if out is None:
            return np.array(np.asarray(self), order=order)
        np.copyto(out, np.asarray(self))  # streams complete at once: the asynchronous copy is done
        return out

    def set(self, array, stream=None):
        _forbid_during_capture("a host-to-device copy from pageable memory (ndarray.set)", stream)
        HOST_COPIES.append(("set", _in_pinned_memory(array), stream is None))
        self[...] = np.asarray(array).reshape(self.shape)

    # device work: recorded instead of run while the current stream captures -------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        outs = kwargs.get("out")

        def compute():
            kw = dict(kwargs)
            if outs is not None:
                kw["out"] = tuple(_plain(o) for o in outs)
            return getattr(ufunc, method)(*[_plain(x) for x in inputs], **kw)

        if outs is not None:
            _submit(compute)
            return outs[0] if len(outs) == 1 else outs
        if _capturing_stream() is None:  # a NumPy result, on the device it was made on (see ``data``)
            result = compute()
            if isinstance(result, tuple):
                return tuple(np.asarray(r).view(ndarray) for r in result)
            return np.asarray(result).view(ndarray) if isinstance(result, np.ndarray) else result
        return _device_result(compute)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        if _capturing_stream() is None:
            return super().astype(dtype, order=order, casting=casting, subok=subok, copy=copy)
        return _device_result(lambda: np.asarray(self).astype(dtype, order="C", casting=casting))

    def copy(self, order="C"):
        if _capturing_stream() is None:
            return super().copy(order=order)
        return _device_result(lambda: np.asarray(self).copy(order="C"))

    def fill(self, value):
        if _capturing_stream() is None:
            return super().fill(value)
        _submit(lambda: np.asarray(self).fill(value))

    def __setitem__(self, key, value):
        if _capturing_stream() is None:
            return super().__setitem__(key, value)
        _submit(lambda: np.asarray(self).__setitem__(key, _plain(value)))


def _plain(x):
    """A fake array as a NumPy view of its memory (so NumPy computes on it directly)."""
    return np.asarray(x) if isinstance(x, ndarray) else x


def _device_result(compute):
    """A new device array holding ``compute()``'s result: computed now, or (capturing) computed now
    only for its shape and dtype and recorded to be computed into it at each launch of the graph."""
    result = np.asarray(compute())
    out = ndarray(result.shape, result.dtype)
    if _capturing_stream() is None:
        np.copyto(np.asarray(out), result)
    else:
        _submit(lambda: np.copyto(np.asarray(out), np.asarray(compute())))
    return out


def _as_fake(compute) -> ndarray:
    """``compute()``'s NumPy result in memory from the current allocator (a device operation)."""
    return _device_result(compute)


def empty(shape, dtype=float):
    return ndarray(shape if isinstance(shape, tuple) else (shape,), dtype)


def array(x, copy=True, order="C", dtype=None):
    return _as_fake(lambda: np.array(_plain(x), dtype=dtype))


def ascontiguousarray(x, dtype=None):
    if isinstance(x, ndarray) and x.flags.c_contiguous and (dtype is None or x.dtype == np.dtype(dtype)):
        return x
    return _as_fake(lambda: np.ascontiguousarray(_plain(x), dtype=dtype))


def copyto(dst, src):
    _submit(lambda: np.copyto(_plain(dst), _plain(src), casting="unsafe"))


def broadcast_to(x, shape):
    return np.broadcast_to(x, shape, subok=True)


def where(cond, a, b):
    return _as_fake(lambda: np.where(_plain(cond), _plain(a), _plain(b)))


def isnan(x):
    return _as_fake(lambda: np.isnan(_plain(x)))


def arange(n, dtype=None):
    return _as_fake(lambda: np.arange(n, dtype=dtype))


def linspace(start, end, steps):
    return _as_fake(lambda: np.linspace(start, end, steps))


def eye(n, m, dtype=float):
    return _as_fake(lambda: np.eye(n, m, dtype=dtype))


def full(shape, value, dtype=None):
    return _as_fake(lambda: np.full(shape, value, dtype=dtype))


def from_dlpack(ext):
    raise TypeError("the fake CuPy has no DLPack")


# memory -------------------------------------------------------------------------------------------


class OutOfMemoryError(MemoryError):
    pass


def _raw_malloc(nbytes: int) -> MemoryPointer:
    return MemoryPointer(Memory(nbytes, _current_device()), 0)


def _allocate(nbytes: int) -> MemoryPointer:
    allocator = _stack().allocator
    return (allocator or _raw_malloc)(nbytes)


@contextlib.contextmanager
def using_allocator(allocator=None):
    state = _stack()
    previous, state.allocator = state.allocator, allocator
    try:
        yield
    finally:
        state.allocator = previous


class MemoryPool:
    """Per device: live bytes, cached blocks by size (reused), and the fake device's capacity."""

    def __init__(self):
        self._used: dict[int, int] = {}
        self._cached: dict[int, list[Memory]] = {}

    def malloc(self, nbytes: int) -> MemoryPointer:
        device = _current_device()
        cached = self._cached.setdefault(device, [])
        for i, mem in enumerate(cached):
            if mem.size == nbytes:
                del cached[i]
                break
        else:
            if self._used.get(device, 0) + self._cached_bytes(device) + nbytes > TOTAL_MEMORY:
                self.free_all_blocks()
                if self._used.get(device, 0) + nbytes > TOTAL_MEMORY:
                    raise OutOfMemoryError(f"out of memory to allocate {nbytes} bytes")
            mem = Memory(nbytes, device)
        self._used[device] = self._used.get(device, 0) + nbytes
        held = Memory(nbytes, device, mem.buf)  # what arrays reference: freed with the last of them
        weakref.finalize(held, self._release, device, mem)
        return MemoryPointer(held, 0)

    def _release(self, device: int, mem: Memory) -> None:
        self._used[device] -= mem.size
        self._cached.setdefault(device, []).append(mem)

    def _cached_bytes(self, device: int) -> int:
        return builtins.sum(m.size for m in self._cached.get(device, []))

    def used_bytes(self) -> int:
        return self._used.get(_current_device(), 0)

    def total_bytes(self) -> int:
        return self.used_bytes() + self._cached_bytes(_current_device())

    def free_all_blocks(self, stream=None) -> None:
        self._cached[_current_device()] = []

    def n_free_blocks(self) -> int:
        return len(self._cached.get(_current_device(), []))


# devices, streams, events -------------------------------------------------------------------------


class Device:
    def __init__(self, device_id: int | None = None):
        self.id = _current_device() if device_id is None else device_id

    def __enter__(self):
        if not 0 <= self.id < DEVICES:
            raise RuntimeError(f"fake CuPy: invalid device {self.id}")
        _stack().devices.append(self.id)
        return self

    def __exit__(self, *exc):
        _stack().devices.pop()

    def use(self):
        _stack().devices[-1] = self.id

    def synchronize(self):
        for stream in list(_stack().streams.values()):
            if stream is not None and stream.device_id == self.id:
                _forbid_during_capture("synchronizing the device", stream)


class Stream:
    null: Stream

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        self.ptr = 0 if null else id(self)
        self.device_id = _current_device()
        self.done = True
        self._previous: list = []
        self._capture = None  # the recorded work while capturing
        self._invalidated = None  # why the ongoing capture failed
        self.waited: list = []  # the events wait_event was given (ordering is not modelled)

    def synchronize(self):
        _forbid_during_capture("synchronizing the stream", self)

    def begin_capture(self, mode=None):
        if self.ptr == 0:
            raise CUDARuntimeError("cudaErrorStreamCaptureUnsupported: the legacy default stream cannot capture")
        if self._capture is not None:
            raise CUDARuntimeError("cudaErrorIllegalState: the stream is already capturing")
        self._capture, self._invalidated, self.capture_mode = [], None, mode

    def is_capturing(self) -> bool:
        return self._capture is not None

    def end_capture(self):
        if self._capture is None:
            raise CUDARuntimeError("cudaErrorIllegalState: the stream is not capturing")
        work, invalidated = self._capture, self._invalidated
        self._capture = self._invalidated = None
        if invalidated is not None:
            raise CUDARuntimeError(f"cudaErrorStreamCaptureInvalidated: the capture was invalidated by {invalidated}")
        return Graph(work)

    def wait_event(self, event):
        self.waited.append(event)

    def use(self):
        _stack().streams[_current_device()] = self

    def __enter__(self):
        streams = _stack().streams
        self._previous.append(streams.get(_current_device()))
        streams[_current_device()] = self
        return self

    def __exit__(self, *exc):
        _stack().streams[_current_device()] = self._previous.pop()


Stream.null = Stream(null=True)


class Graph:
    """``cupy.cuda.Graph``: the work recorded by one capture; ``launch`` runs it (on the CPU)."""

    def __init__(self, work: list):
        self.work = work
        self.launches = 0

    def launch(self, stream=None):
        def run():
            for work in self.work:
                work()

        self.launches += 1
        _submit(run, stream)

    def upload(self, stream=None):
        pass

    def debug_dot_str(self, flags=0) -> str:
        return f"digraph fake {{ // {len(self.work)} recorded operations\n}}"


class ExternalStream(Stream):
    def __init__(self, ptr: int, device_id: int = -1):
        super().__init__()
        self.ptr = ptr
        self.device_id = _current_device() if device_id < 0 else device_id


def get_current_stream(device_id: int = -1) -> Stream:
    device = _current_device() if device_id < 0 else device_id
    return _stack().streams.get(device) or Stream.null


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.ptr, self.done, self.recorded_on = id(self), True, None

    def record(self, stream=None):
        self.recorded_on = stream or get_current_stream()

    def synchronize(self):
        pass


def get_elapsed_time(start, end) -> float:
    return 0.5


def _memcpy_peer(dst, dst_device, src, src_device, nbytes, stream):
    current = get_current_stream()
    _submit(lambda: ctypes.memmove(dst, src, nbytes), current if current.ptr == stream else None)


def _device_properties(index: int) -> dict:
    return {
        "name": f"Fake GPU {index}".encode(),
        "major": 9,
        "minor": 0,
        "totalGlobalMem": TOTAL_MEMORY,
        "multiProcessorCount": 132,
        "l2CacheSize": 50 << 20,
        "warpSize": 32,
        "maxThreadsPerMultiProcessor": 2048,
        "integrated": 0,
        "isMultiGpuBoard": 0,
    }


_runtime = types.SimpleNamespace(
    getDeviceCount=lambda: DEVICES,
    getDeviceProperties=_device_properties,
    getDevice=_current_device,
    memGetInfo=lambda: (TOTAL_MEMORY // 2, TOTAL_MEMORY),
    memcpyPeerAsync=_memcpy_peer,
    deviceCanAccessPeer=lambda device, peer: int(device != peer),
    CUDARuntimeError=lambda code: CUDARuntimeError(f"cudaError {code}: fake CUDA runtime error"),
    streamCaptureModeGlobal=0,
    streamCaptureModeThreadLocal=1,
    streamCaptureModeRelaxed=2,
    CUDA_R_16F=2,
    CUDA_R_32F=0,
    CUDA_R_64F=1,
    CUDA_R_16BF=14,
)

# kernel modules -----------------------------------------------------------------------------------

SOURCES: dict = {}  # cubin bytes -> the CUDA C source NVRTC compiled it from (install() records)
LAUNCHES: list = []  # (kernel name, grid, block) of every launch


class Module:
    """``cupy.cuda.function.Module``: ``load(cubin)``, ``get_function(name)``."""

    def load(self, image):
        try:
            self.source = SOURCES[bytes(image)]
        except KeyError:
            raise RuntimeError(
                "fake cupy: Module.load got a cubin that install()'s NVRTC hook did not record"
            ) from None

    def get_function(self, name: str):
        return Function(self.source, name)


class Function:
    """A kernel of a loaded module, run by the CPU emulation: ``fn(grid, block, args, stream=...)``."""

    def __init__(self, source: str, name: str):
        from munet.backends.cuda import emulation
        from munet.backends.cuda.source import CudaSource

        m = re.search(
            rf'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?{re.escape(name)}\(([^)]*)\)', source
        )
        if m is None:
            raise RuntimeError(f"fake cupy: the module has no kernel named {name}")
        params = tuple(_parameter(p) for p in m.group(1).split(", ") if p)
        layout = "rows" if "__shared__" in source else "elements"
        self.name, self.src = name, CudaSource(name, source, params, layout=layout)
        self.emulator = emulation.Emulator([self.src])

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        assert tuple(grid[1:]) == (1, 1) and tuple(block[1:]) == (1, 1), "the renderers launch 1-D grids"
        assert all(isinstance(a, np.generic) for a in args), "the launcher packs NumPy scalars"
        args = list(args)

        def run():
            LAUNCHES.append((self.name, grid[0], block[0]))
            self.emulator.launch(self.src, grid[0], block[0], args)

        _submit(run, stream)


def _parameter(text: str) -> tuple:
    m = re.fullmatch(r"(.*?)\s*(\w+)", text.strip())
    ctype = m.group(1).strip()
    return (ctype if not ctype.endswith("*") else ctype[:-1].rstrip() + " *"), m.group(2)


def install(monkeypatch) -> None:
    """Make this module CuPy for the test: the cuda backend finds two fake devices (call
    :func:`uninstall` after the test, so no later test sees them)."""
    from munet.backends.cuda import discovery, launch, nvrtc

    for name in ("cupy", "cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.libs"):
        monkeypatch.setitem(sys.modules, name, sys.modules[__name__])
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cublas", cublas)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", nccl)
    for name, module in (("cupyx", cupyx), ("cupyx.scipy", cupyx.scipy), ("cupyx.scipy.linalg", cupyx.scipy.linalg)):
        monkeypatch.setitem(sys.modules, name, module)
    LINALG_CALLS.clear()
    FFT_CALLS.clear()
    monkeypatch.setattr(discovery, "_driver_device_count", lambda: (DEVICES, None))
    import munet._device

    monkeypatch.setattr(munet._device._BACKENDS["cuda"], "instances", {})
    real = nvrtc.compile_source

    def recording(source, arch="sm_90", **kwargs):
        cubin = real(source, arch, **kwargs)
        SOURCES[cubin.data] = source
        return cubin

    monkeypatch.setattr(nvrtc, "compile_source", recording)
    launch.clear()
    discovery.reset()
    GEMM_CALLS.clear()
    LAUNCHES.clear()
    PINNED_ALLOCATIONS.clear()
    HOST_COPIES.clear()
    NCCL_CALLS.clear()


def skip_without_emulation() -> None:
    """Skip the calling test module when kernels cannot run here (no C++ compiler, or no NVRTC)."""
    import pytest

    from munet.backends.cuda import emulation

    try:
        emulation.find_cxx()
    except emulation.EmulationUnavailableError as error:  # pragma: no cover - CI has a C++ compiler
        pytest.skip(str(error), allow_module_level=True)
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-bindings) is not installed")


def uninstall() -> None:
    """Forget the fake devices and the kernels loaded for them."""
    from munet.backends.cuda import discovery, launch

    launch.clear()
    discovery.reset()


cuda = types.SimpleNamespace(
    Device=Device,
    Stream=Stream,
    Graph=Graph,
    ExternalStream=ExternalStream,
    Event=Event,
    MemoryPool=MemoryPool,
    MemoryPointer=MemoryPointer,
    PinnedMemoryPointer=PinnedMemoryPointer,
    alloc_pinned_memory=alloc_pinned_memory,
    using_allocator=using_allocator,
    get_current_stream=get_current_stream,
    get_elapsed_time=get_elapsed_time,
    runtime=_runtime,
    memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
    device=types.SimpleNamespace(get_cublas_handle=lambda: 1),
    function=types.SimpleNamespace(Module=Module),
)


# cuBLAS -------------------------------------------------------------------------------------------

_ELEMENT = {0: np.float32, 1: np.float64, 2: np.float16, 14: ml_dtypes.bfloat16}


def _read(address: int, count: int, dtype) -> np.ndarray:
    if count <= 0:
        return np.empty(0, dtype)
    raw = (ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(address)
    return np.frombuffer(raw, dtype=dtype)


def _matrix(address, dtype, rows, cols, ld, trans):
    """op(X) (rows x cols) of the column-major matrix X at ``address`` (cols x rows when ``trans``)."""
    stored_rows, stored_cols = (cols, rows) if trans else (rows, cols)
    flat = _read(address, (stored_cols - 1) * ld + stored_rows, dtype).astype(np.float64)
    stored = np.lib.stride_tricks.as_strided(flat, (stored_rows, stored_cols), (8, 8 * ld))
    return stored.T if trans else stored


def _gemm_strided_batched_ex(handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb,
                             stride_b, beta, c, c_type, ldc, stride_c, count, compute, algo):  # fmt: skip
    assert ldc >= max(1, m) and lda >= max(1, k if transa else m) and ldb >= max(1, n if transb else k)
    dtype = _ELEMENT[c_type]
    item = np.dtype(dtype).itemsize
    scalar = np.float64 if compute == CUBLAS_COMPUTE_64F else np.float32
    alpha_value = float(_read(alpha, 1, scalar)[0])

    def run():  # the pointers are read when the GEMM runs (at a graph launch when captured)
        for i in range(count):
            op_a = _matrix(a + i * stride_a * item, dtype, m, k, lda, transa == CUBLAS_OP_T)
            op_b = _matrix(b + i * stride_b * item, dtype, k, n, ldb, transb == CUBLAS_OP_T)
            out = _read(c + i * stride_c * item, (n - 1) * ldc + m, dtype)
            out = np.lib.stride_tricks.as_strided(out, (m, n), (item, item * ldc))
            out[...] = (alpha_value * (op_a @ op_b)).astype(dtype)
        GEMM_CALLS.append((m, n, k, transa, transb, lda, ldb, compute))

    _submit(run)


GEMM_CALLS: list = []
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_64F = 68, 77, 70
CUBLAS_POINTER_MODE_HOST, CUBLAS_DEFAULT_MATH, CUBLAS_GEMM_DEFAULT = 0, 0, -1
CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
MATH_MODES: list = []

cublas = types.SimpleNamespace(
    CUBLAS_OP_N=CUBLAS_OP_N,
    CUBLAS_OP_T=CUBLAS_OP_T,
    CUBLAS_COMPUTE_32F=CUBLAS_COMPUTE_32F,
    CUBLAS_COMPUTE_32F_FAST_TF32=CUBLAS_COMPUTE_32F_FAST_TF32,
    CUBLAS_COMPUTE_64F=CUBLAS_COMPUTE_64F,
    CUBLAS_POINTER_MODE_HOST=CUBLAS_POINTER_MODE_HOST,
    CUBLAS_DEFAULT_MATH=CUBLAS_DEFAULT_MATH,
    CUBLAS_GEMM_DEFAULT=CUBLAS_GEMM_DEFAULT,
    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION=CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION,
    setStream=lambda handle, stream: None,
    getPointerMode=lambda handle: CUBLAS_POINTER_MODE_HOST,
    setPointerMode=lambda handle, mode: None,
    getMathMode=lambda handle: CUBLAS_DEFAULT_MATH,
    setMathMode=lambda handle, mode: MATH_MODES.append(mode),
    gemmStridedBatchedEx=_gemm_strided_batched_ex,
)


# NCCL ---------------------------------------------------------------------------------------------
# ``cupy.cuda.nccl`` between processes (each a rank, as NCCL's are) that really exchange the data.
# The unique id names a folder under the temporary directory; each collective is one round: every
# rank writes its contribution to a file of that round (the bytes at the pointers it was given),
# waits until every rank's file is there, and computes its own result from them in rank order (in
# the dtype, as NCCL reduces). Point-to-point messages are files per sender, receiver and count.
# Calls between ``groupStart`` and ``groupEnd`` run at ``groupEnd``, the sends first. A call
# completes before it returns (so the stream and event it is given are done at once, like every
# fake stream); a peer that never arrives makes it raise NcclError after NCCL_TIMEOUT_S.

NCCL_VERSION = 22703  # what get_version() answers: 2.27.3 (ncclAvg and bfloat16 exist from 2.10)
NCCL_TIMEOUT_S = 120.0
NCCL_CALLS: list = []  # (method, count, datatype, op or None, root or peer or None, stream pointer)
(NCCL_INT8, NCCL_UINT8, NCCL_INT32, NCCL_UINT32, NCCL_INT64, NCCL_UINT64,
 NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64, NCCL_BFLOAT16) = range(10)  # fmt: skip
NCCL_CHAR, NCCL_INT, NCCL_HALF, NCCL_FLOAT, NCCL_DOUBLE = (
    NCCL_INT8,
    NCCL_INT32,
    NCCL_FLOAT16,
    NCCL_FLOAT32,
    NCCL_FLOAT64,
)
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN, NCCL_AVG = range(5)
_NCCL_TYPES = {NCCL_INT8: np.int8, NCCL_UINT8: np.uint8, NCCL_INT32: np.int32, NCCL_UINT32: np.uint32,
               NCCL_INT64: np.int64, NCCL_UINT64: np.uint64, NCCL_FLOAT16: np.float16, NCCL_FLOAT32: np.float32,
               NCCL_FLOAT64: np.float64, NCCL_BFLOAT16: ml_dtypes.bfloat16}  # fmt: skip
_NCCL_COMBINE = {NCCL_SUM: np.add, NCCL_PROD: np.multiply, NCCL_MAX: np.maximum, NCCL_MIN: np.minimum, NCCL_AVG: np.add}
_nccl_group = threading.local()


class NcclError(RuntimeError):
    """``cupy_backends.cuda.libs.nccl.NcclError``."""


def get_version() -> int:
    return NCCL_VERSION


def get_build_version() -> int:
    return NCCL_VERSION


def get_unique_id() -> tuple:
    token = os.urandom(12).hex().encode()
    return tuple(token) + (0,) * (128 - len(token))


def groupStart() -> None:  # noqa: N802 - CuPy's name
    _nccl_group.depth = getattr(_nccl_group, "depth", 0) + 1
    if _nccl_group.depth == 1:
        _nccl_group.calls = []


def groupEnd() -> None:  # noqa: N802 - CuPy's name
    if getattr(_nccl_group, "depth", 0) == 0:
        raise NcclError("NCCL_ERROR_INVALID_USAGE: groupEnd without groupStart")
    _nccl_group.depth -= 1
    if _nccl_group.depth == 0:
        calls, _nccl_group.calls = _nccl_group.calls, []
        for _, run in sorted(calls, key=lambda call: not call[0]):  # sends first, else in call order
            run()


def _nccl_buffer(address: int, count: int, datatype: int) -> np.ndarray:
    if datatype not in _NCCL_TYPES:
        raise NcclError(f"NCCL_ERROR_INVALID_ARGUMENT: datatype {datatype}")
    return _read(address, count, _NCCL_TYPES[datatype])


class NcclCommunicator:
    """``cupy.cuda.nccl.NcclCommunicator(ndev, commId, rank)``: returns once every rank has joined."""

    def __init__(self, ndev: int, commId: tuple, rank: int):  # noqa: N803 - CuPy's name
        if not isinstance(commId, tuple) or len(commId) != 128 or not all(-128 <= c < 256 for c in commId):
            raise NcclError("NCCL_ERROR_INVALID_ARGUMENT: the unique id must be a tuple of 128 chars")
        if not 0 <= rank < ndev:
            raise NcclError(f"NCCL_ERROR_INVALID_ARGUMENT: rank {rank} of {ndev}")
        token = bytes(c % 256 for c in commId).rstrip(b"\0").decode("ascii")
        self._dir = os.path.join(tempfile.gettempdir(), f"munet-fake-nccl-{token}")
        os.makedirs(self._dir, exist_ok=True)
        self._rank, self._size, self._device = rank, ndev, _current_device()
        self._round = 0
        self._sent: dict = {}
        self._received: dict = {}
        self._round_of_files(b"")  # ncclCommInitRank: every rank arrives

    # rounds and messages ------------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return os.path.join(self._dir, name)

    def _write(self, name: str, payload: bytes) -> None:
        temporary = self._path(f".{name}.{os.getpid()}")
        with open(temporary, "wb") as file:
            file.write(payload)
        os.replace(temporary, self._path(name))

    def _wait_for(self, name: str, who: int) -> bytes:
        deadline = time.monotonic() + NCCL_TIMEOUT_S
        while not os.path.exists(self._path(name)):
            if time.monotonic() > deadline:
                raise NcclError(
                    f"NCCL_ERROR_REMOTE_ERROR: fake NCCL rank {self._rank} waited {NCCL_TIMEOUT_S:g} s for rank {who}"
                )
            time.sleep(2e-4)
        with open(self._path(name), "rb") as file:
            return file.read()

    def _round_of_files(self, payload: bytes) -> list:
        """Every rank's ``payload`` of this round, in rank order. A rank in round n has finished round
        n - 1, so every rank has read round n - 2: this rank's file of it goes."""
        n, self._round = self._round, self._round + 1
        self._write(f"round{n}.rank{self._rank}", payload)
        if n >= 2:
            os.remove(self._path(f"round{n - 2}.rank{self._rank}"))
        return [self._wait_for(f"round{n}.rank{r}", r) for r in range(self._size)]

    def _collective(self, name, count, datatype, op, root, stream, run) -> None:
        if not isinstance(stream, int):
            raise NcclError(f"NCCL_ERROR_INVALID_ARGUMENT: stream must be a cudaStream_t (an int), got {stream!r}")
        NCCL_CALLS.append((name, count, datatype, op, root, stream))
        if getattr(_nccl_group, "depth", 0):
            _nccl_group.calls.append((name == "send", run))
        else:
            run()

    def _gathered(self, sendbuf: int, count: int, datatype: int) -> list:
        mine = _nccl_buffer(sendbuf, count, datatype).tobytes()
        return [np.frombuffer(part, _NCCL_TYPES[datatype]) for part in self._round_of_files(mine)]

    def _reduced(self, parts: list, op: int) -> np.ndarray:
        if op not in _NCCL_COMBINE:
            raise NcclError(f"NCCL_ERROR_INVALID_ARGUMENT: reduction op {op}")
        total = parts[0].copy()
        for part in parts[1:]:
            _NCCL_COMBINE[op](total, part, out=total)
        if op == NCCL_AVG:
            total = (total / self._size).astype(total.dtype)
        return total

    # collectives --------------------------------------------------------------------------------
    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):  # noqa: N802 - CuPy's names
        def run():
            result = self._reduced(self._gathered(sendbuf, count, datatype), op)
            _nccl_buffer(recvbuf, count, datatype)[...] = result

        self._collective("allReduce", count, datatype, op, None, stream, run)

    def reduce(self, sendbuf, recvbuf, count, datatype, op, root, stream):
        def run():
            result = self._reduced(self._gathered(sendbuf, count, datatype), op)
            if self._rank == root:
                _nccl_buffer(recvbuf, count, datatype)[...] = result

        self._collective("reduce", count, datatype, op, root, stream, run)

    def broadcast(self, sendbuf, recvbuf, count, datatype, root, stream):
        def run():
            mine = _nccl_buffer(sendbuf, count, datatype).tobytes() if self._rank == root else b""
            value = np.frombuffer(self._round_of_files(mine)[root], _NCCL_TYPES[datatype])
            _nccl_buffer(recvbuf, count, datatype)[...] = value

        self._collective("broadcast", count, datatype, None, root, stream, run)

    def bcast(self, buff, count, datatype, root, stream):
        self.broadcast(buff, buff, count, datatype, root, stream)

    def allGather(self, sendbuf, recvbuf, count, datatype, stream):  # noqa: N802
        def run():
            parts = self._gathered(sendbuf, count, datatype)
            _nccl_buffer(recvbuf, count * self._size, datatype)[...] = np.concatenate(parts)

        self._collective("allGather", count, datatype, None, None, stream, run)

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):  # noqa: N802
        def run():
            total = self._reduced(self._gathered(sendbuf, recvcount * self._size, datatype), op)
            chunk = total[self._rank * recvcount : (self._rank + 1) * recvcount]
            _nccl_buffer(recvbuf, recvcount, datatype)[...] = chunk

        self._collective("reduceScatter", recvcount, datatype, op, None, stream, run)

    # point to point -----------------------------------------------------------------------------
    def send(self, sendbuf, count, datatype, peer, stream):
        def run():
            n = self._sent.get(peer, 0)
            self._sent[peer] = n + 1
            self._write(f"p2p.{self._rank}.{peer}.{n}", _nccl_buffer(sendbuf, count, datatype).tobytes())

        self._collective("send", count, datatype, None, peer, stream, run)

    def recv(self, recvbuf, count, datatype, peer, stream):
        def run():
            n = self._received.get(peer, 0)
            self._received[peer] = n + 1
            name = f"p2p.{peer}.{self._rank}.{n}"
            payload = self._wait_for(name, peer)
            os.remove(self._path(name))
            target = _nccl_buffer(recvbuf, count, datatype)
            if len(payload) != target.nbytes:
                raise NcclError(
                    f"NCCL_ERROR_INVALID_USAGE: rank {peer} sent {len(payload)} bytes, {target.nbytes} expected"
                )
            target[...] = np.frombuffer(payload, target.dtype)

        self._collective("recv", count, datatype, None, peer, stream, run)

    # the communicator ---------------------------------------------------------------------------
    def rank_id(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def device_id(self) -> int:
        return self._device

    def check_async_error(self) -> None:
        pass

    def abort(self) -> None:
        self.destroy()

    def destroy(self) -> None:
        """Leave; the last rank to leave removes the folder (every rank has read everything then)."""
        self._write(f"left.rank{self._rank}", b"")
        if all(os.path.exists(self._path(f"left.rank{r}")) for r in range(self._size)):
            shutil.rmtree(self._dir, ignore_errors=True)


nccl = types.SimpleNamespace(
    available=True,
    NcclError=NcclError,
    NcclCommunicator=NcclCommunicator,
    get_unique_id=get_unique_id,
    get_version=get_version,
    get_build_version=get_build_version,
    groupStart=groupStart,
    groupEnd=groupEnd,
    **{n: v for n, v in globals().items() if n.startswith("NCCL_") and isinstance(v, int) and n != "NCCL_VERSION"},
)
cuda.nccl = nccl


# cuSOLVER, cupy.linalg and cupyx.scipy.linalg ---------------------------------------------------
# What munet/backends/cuda/kernels_linalg.py calls. The cuSOLVER stand-ins read and write the raw
# pointers, leading dimensions and batch pointer arrays they are given, column-major as cuSOLVER
# does (so a wrong pointer, stride or triangle gives a wrong answer); the CuPy functions compute
# with NumPy on the fake arrays and return fresh arrays from the current allocator. Every call is
# recorded in LINALG_CALLS as (function, shapes or sizes, dtype, current device).

uint64 = np.uint64
complex64, complex128 = np.complex64, np.complex128
LINALG_CALLS: list = []
CUBLAS_FILL_MODE_LOWER, CUBLAS_FILL_MODE_UPPER = 0, 1
cublas.CUBLAS_FILL_MODE_LOWER, cublas.CUBLAS_FILL_MODE_UPPER = CUBLAS_FILL_MODE_LOWER, CUBLAS_FILL_MODE_UPPER
cuda.device.get_cusolver_handle = lambda: 2


def zeros(shape, dtype=float):
    return _as_fake(lambda: np.zeros(shape, dtype=dtype))


def ones(shape, dtype=float):
    return _as_fake(lambda: np.ones(shape, dtype=dtype))


def swapaxes(x, a, b):
    return np.swapaxes(x, a, b)  # a view, as CuPy's


def _column_major(address: int, dtype, rows: int, cols: int, ld: int) -> np.ndarray:
    """The writable column-major ``rows x cols`` matrix at ``address`` with leading dimension ``ld``."""
    item = np.dtype(dtype).itemsize
    flat = _read(address, (cols - 1) * ld + rows, dtype) if rows and cols else np.empty(0, dtype)
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (item, item * ld))


def _potrf_batched(dtype):
    def potrf_batched(handle, uplo, n, pointers, lda, info, count):
        assert lda >= max(1, n)

        def run():
            addresses = _read(pointers, count, np.uint64)
            infos = _read(info, count, np.int32)
            for i, address in enumerate(addresses):
                m = _column_major(int(address), dtype, n, n, lda)
                lower = np.tril(m) if uplo == CUBLAS_FILL_MODE_LOWER else np.triu(m).T
                low, infos[i] = _cholesky_with_info(lower.astype(np.float64))
                if uplo == CUBLAS_FILL_MODE_LOWER:
                    m[np.tril_indices(n)] = low[np.tril_indices(n)]
                else:
                    m[np.triu_indices(n)] = low.T[np.triu_indices(n)]
            LINALG_CALLS.append(("potrfBatched", (n, lda, count, uplo), np.dtype(dtype).name, _current_device()))

        _submit(run)

    return potrf_batched


def _cholesky_with_info(lower: np.ndarray) -> tuple:
    """LAPACK's potrf on a lower triangle: the factor and the order of the first leading minor that
    is not positive-definite (0 when none), columns after it left as they were."""
    low = lower.copy()
    n = len(low)
    for j in range(n):
        d = low[j, j] - low[j, :j] @ low[j, :j]
        if not d > 0:
            return low, j + 1
        low[j, j] = np.sqrt(d)
        low[j + 1 :, j] = (low[j + 1 :, j] - low[j + 1 :, :j] @ low[j, :j]) / low[j, j]
    return low, 0


def _getrf_buffer_size(dtype):
    def getrf_buffer_size(handle, m, n, a, lda):
        return m * n + 1

    return getrf_buffer_size


def _getrf(dtype):
    def getrf(handle, m, n, a, lda, work, pivots, info):
        assert lda >= max(1, m)

        def run():
            x = _column_major(a, dtype, m, n, lda)
            lu = x.astype(np.float64)
            k = min(m, n)
            piv = _read(pivots, k, np.int32)
            for j in range(k):
                p = j + int(np.argmax(np.abs(lu[j:, j])))
                piv[j] = p + 1
                lu[[j, p]] = lu[[p, j]]
                if lu[j, j] != 0:
                    lu[j + 1 :, j] /= lu[j, j]
                lu[j + 1 :, j + 1 :] -= np.outer(lu[j + 1 :, j], lu[j, j + 1 :])
            zero = np.diagonal(lu)[:k] == 0
            _read(info, 1, np.int32)[0] = int(np.argmax(zero)) + 1 if zero.any() else 0
            x[...] = lu.astype(dtype)
            LINALG_CALLS.append(("getrf", (m, n, lda), np.dtype(dtype).name, _current_device()))

        _submit(run)

    return getrf


cusolver = types.SimpleNamespace(
    setStream=lambda handle, stream: LINALG_CALLS.append(("setStream", stream, None, _current_device())),
    spotrfBatched=_potrf_batched(np.float32),
    dpotrfBatched=_potrf_batched(np.float64),
    sgetrf_bufferSize=_getrf_buffer_size(np.float32),
    dgetrf_bufferSize=_getrf_buffer_size(np.float64),
    sgetrf=_getrf(np.float32),
    dgetrf=_getrf(np.float64),
)


def _linalg_call(name: str, compute, *arrays):
    """``compute()``'s NumPy results as fresh fake arrays of the current allocator, recorded; while
    the stream captures, each graph launch computes them again from the operands' memory then."""
    LINALG_CALLS.append((name, tuple(a.shape for a in arrays), arrays[0].dtype.name, _current_device()))
    result = compute()
    if isinstance(result, tuple):
        return tuple(_as_fake(lambda i=i: compute()[i]) for i in range(len(result)))
    return _as_fake(compute)


def _float_only(name: str, a) -> None:
    if a.dtype not in (np.float32, np.float64):  # CuPy's linalg takes these (and complex) only
        raise TypeError(f"fake cupy.linalg.{name}: dtype {a.dtype} is not supported")


def _fake_qr(a, mode="reduced"):
    _float_only("qr", a)
    return _linalg_call("qr", lambda: np.linalg.qr(_plain(a), mode=mode), a)


def _fake_svd(a, full_matrices=True, compute_uv=True):
    _float_only("svd", a)
    return _linalg_call("svd", lambda: tuple(np.linalg.svd(_plain(a), full_matrices, compute_uv)), a)


def _fake_eigh(a, UPLO="L"):  # noqa: N803 - CuPy's argument name
    _float_only("eigh", a)
    return _linalg_call("eigh", lambda: tuple(np.linalg.eigh(_plain(a), UPLO=UPLO)), a)


def _fake_det(a):
    _float_only("det", a)
    return _linalg_call("det", lambda: np.asarray(np.linalg.det(_plain(a)), dtype=a.dtype), a)


def _fake_solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=False):
    assert a.ndim == 2 and b.ndim in (1, 2), "cupyx.scipy.linalg.solve_triangular takes one matrix"
    _float_only("solve_triangular", a)

    def compute():
        m = np.tril(_plain(a)) if lower else np.triu(_plain(a))
        if unit_diagonal:
            np.fill_diagonal(m, 1)
        return np.linalg.solve(m.astype(np.float64), _plain(b).astype(np.float64)).astype(a.dtype)

    return _linalg_call("solve_triangular", compute, a, b)


def _fake_expm(a):
    assert a.ndim == 2, "cupyx.scipy.linalg.expm takes one matrix"
    _float_only("expm", a)

    def compute():  # a Taylor series of the scaled matrix, squared back (float64)
        x = _plain(a).astype(np.float64)
        norm = np.abs(x).sum(0).max(initial=0.0)
        squarings = int(np.ceil(np.log2(norm))) if norm > 1 else 0
        x = x / 2.0**squarings
        term = result = np.eye(len(x))
        for k in range(1, 24):
            term = term @ x / k
            result = result + term
        for _ in range(squarings):
            result = result @ result
        return result.astype(a.dtype)

    return _linalg_call("expm", compute, a)


linalg = types.SimpleNamespace(
    qr=_fake_qr, svd=_fake_svd, eigh=_fake_eigh, det=_fake_det
)  # no eig, as in CuPy releases before it
cupyx = types.SimpleNamespace(
    scipy=types.SimpleNamespace(linalg=types.SimpleNamespace(solve_triangular=_fake_solve_triangular, expm=_fake_expm))
)


# complex arrays -----------------------------------------------------------------------------------
# What munet/backends/cuda/kernels_complex.py calls besides the array operations above (NumPy's).


def conj(x):
    return _as_fake(lambda: np.conj(_plain(x)))


def angle(x):
    return _as_fake(lambda: np.angle(_plain(x)))


def abs(x):  # noqa: A001 - CuPy's name
    return _as_fake(lambda: np.abs(_plain(x)))


# cupy.fft -----------------------------------------------------------------------------------------
# What munet/backends/cuda/kernels_fft.py calls: NumPy's pocketfft on the fake arrays, in the input's
# precision as cuFFT computes (complex64 from float32/complex64), results from the current allocator.
# Every call is recorded in FFT_CALLS as (function, shape, dtype, axes, s, norm, current device).

FFT_CALLS: list = []
_FFT_PRECISION = {"f": np.complex64, "d": np.complex128, "F": np.complex64, "D": np.complex128}


def _fft_call(name: str, transform, real_result: bool):
    def call(a, s=None, axes=None, norm=None):
        if a.dtype.char not in _FFT_PRECISION:
            raise TypeError(f"fake cupy.fft.{name}: dtype {a.dtype} is not supported")
        FFT_CALLS.append((name, a.shape, a.dtype.name, axes, s, norm, _current_device()))
        complex_type = _FFT_PRECISION[a.dtype.char]
        result_type = np.dtype(complex_type(0).real.dtype) if real_result else np.dtype(complex_type)
        return _as_fake(lambda: transform(_plain(a), s=s, axes=axes, norm=norm).astype(result_type))

    return call


fft = types.SimpleNamespace(
    fftn=_fft_call("fftn", np.fft.fftn, False),
    ifftn=_fft_call("ifftn", np.fft.ifftn, False),
    rfftn=_fft_call("rfftn", np.fft.rfftn, False),
    irfftn=_fft_call("irfftn", np.fft.irfftn, True),
)


# complex formulas ---------------------------------------------------------------------------------
# munet/backends/cuda/complex_formula.py calls CuPy's ufuncs by name: here NumPy's, which dispatch to
# the fake arrays' __array_ufunc__ (so they allocate from the current allocator and follow capture).

for _name in ("add", "subtract", "multiply", "true_divide", "power", "negative", "exp", "expm1", "log", "log1p",
              "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan", "equal",
              "not_equal", "isinf", "logical_not", "logical_and", "logical_or", "matmul"):  # fmt: skip
    globals()[_name] = getattr(np, _name)


def sum(x, axis=None, keepdims=False):  # noqa: A001 - CuPy's name
    return _as_fake(lambda: np.sum(_plain(x), axis=axis, keepdims=keepdims))


def cumsum(x, axis=None):
    return _as_fake(lambda: np.cumsum(_plain(x), axis=axis))


def flip(x, axis):
    return np.flip(x, axis)  # a view, as CuPy's
