"""The NCCL transport: a group's operations on cuda arrays through CuPy's ``cupy.cuda.nccl``.

A group whose backend names NCCL (``"nccl"``, ``"cpu:gloo,cuda:nccl"``) carries its cuda tensors
here and everything else over its host transport (MPI or TCP, munet/distributed/mpi_comm.py and
tcp_comm.py), which it always has: the host transport exchanges NCCL's unique id (rank 0 makes it,
a host broadcast hands it to the others), checks that the ranks agree on each collective, and
carries objects and barriers. The communicator is made at the group's first cuda collective, on the
device of that tensor (every rank makes it then, since every rank runs the same collectives in the
same order); a group keeps that one device.

Each operation is issued on MuNet's current stream of the device (CuPy's, ``munet.cuda.current_stream``),
so it is ordered after the kernels that produced its input and before the ones issued after it;
the request records a cuda event behind it. ``Work.wait()`` makes the calling thread's current
stream wait for that event (PyTorch's semantics: the host does not block), ``is_completed()`` asks
the event; with ``TORCH_NCCL_BLOCKING_WAIT=1`` (or ``MUNET_NCCL_BLOCKING_WAIT=1``) ``wait()`` blocks
the host until the event completes, and after the group's timeout aborts the communicator and raises.

Reductions map ReduceOp to NCCL's: SUM, PRODUCT, MIN, MAX as NCCL's own, AVG as ``ncclAvg`` (NCCL 2.10
and later; earlier, SUM and a division by the group size), bool tensors as uint8 with SUM as MAX and
PRODUCT as MIN (PyTorch's choice). NCCL has no bitwise reductions, and no int16 or complex
reduction: those raise. Data movement (broadcast, gathers, scatters, all-to-all, point-to-point)
moves raw bytes, so any dtype goes. float16 and bfloat16 are reduced by NCCL in their own precision.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time

import numpy as np

from munet.distributed.errors import DistBackendError

NCCL_INSTALL = "install NCCL with `pip install nvidia-nccl-cu13` (nvidia-nccl-cu12 for a CUDA 12 CuPy)"
AVG_AND_BFLOAT16_SINCE = 21000  # NCCL 2.10: ncclAvg and ncclBfloat16
_DATATYPES = {
    "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "bool": "NCCL_UINT8", "int32": "NCCL_INT32",
    "int64": "NCCL_INT64", "float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
    "bfloat16": "NCCL_BFLOAT16",
}  # fmt: skip
_OPS = {"SUM": "NCCL_SUM", "PROD": "NCCL_PROD", "MAX": "NCCL_MAX", "MIN": "NCCL_MIN", "AVG": "NCCL_AVG"}
_BOOL_OPS = {"sum": "MAX", "product": "MIN", "max": "MAX", "min": "MIN"}
_NUMBER_OPS = {"sum": "SUM", "product": "PROD", "max": "MAX", "min": "MIN"}


def unavailable(reason: str, where: str = "init_process_group") -> RuntimeError:
    return RuntimeError(
        f"{where}: backend 'nccl' (cuda tensors through NCCL, by CuPy's cupy.cuda.nccl) is unavailable here: "
        f"{reason}. Use backend 'gloo' or 'mpi' for cpu and vulkan tensors (they carry cuda tensors too, staged "
        "through host memory)"
    )


def nccl_module(where: str = "init_process_group"):
    """CuPy's NCCL binding; raises ``RuntimeError`` naming backend 'nccl' when CuPy, a CUDA device or
    the NCCL library is missing."""
    from munet._device import DeviceError
    from munet.backends.cuda.discovery import cupy_module

    try:
        cupy_module()
    except DeviceError as error:
        raise unavailable(str(error), where) from None
    try:
        module = importlib.import_module("cupy.cuda.nccl")
    except ImportError as error:
        raise unavailable(f"CuPy has no NCCL binding ({error}); {NCCL_INSTALL}", where) from None
    if not getattr(module, "available", True) or not hasattr(module, "NcclCommunicator"):
        raise unavailable(f"CuPy could not load the NCCL library (libnccl.so.2); {NCCL_INSTALL}", where)
    return module


def is_available() -> bool:
    try:
        nccl_module()
    except RuntimeError:
        return False
    return True


def blocking_wait() -> bool:
    """Whether ``Work.wait()`` blocks the host (PyTorch's ``TORCH_NCCL_BLOCKING_WAIT``)."""
    value = os.environ.get("MUNET_NCCL_BLOCKING_WAIT") or os.environ.get("TORCH_NCCL_BLOCKING_WAIT") or "0"
    return value.strip().lower() in ("1", "true", "yes", "on")


def reduction(op, dtype, version: int, where: str) -> str:
    """NCCL's reduction (``"SUM"``, ``"PROD"``, ``"MAX"``, ``"MIN"``, ``"AVG"``) for ``op`` on ``dtype``;
    ``"SUM"`` for AVG before NCCL 2.10 (the caller divides). Raises for what NCCL cannot reduce."""
    from munet.distributed.process_group import ReduceOp
    from munet.distributed.process_group import reduction as check_reduction

    check_reduction(op, dtype, where)  # AVG on integers, bitwise ops on floats: as on every backend
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        raise ValueError(f"{where}: Cannot use ReduceOp.{op.name} with NCCL (backend 'nccl' has no bitwise reductions)")
    check_datatype(dtype, version, where)
    if dtype.name == "bool":
        return _BOOL_OPS[op.value]
    if op is ReduceOp.AVG:
        return "AVG" if version >= AVG_AND_BFLOAT16_SINCE else "SUM"
    return _NUMBER_OPS[op.value]


def check_datatype(dtype, version: int, where: str) -> None:
    if dtype.name not in _DATATYPES:
        raise TypeError(
            f"{where}: backend 'nccl' cannot reduce {dtype.name} tensors (NCCL reduces int8, uint8, bool, int32, "
            "int64, float16, bfloat16, float32 and float64)"
        )
    if dtype.name == "bfloat16" and version < AVG_AND_BFLOAT16_SINCE:
        raise TypeError(f"{where}: NCCL {version} cannot reduce bfloat16 (NCCL 2.10 and later can)")


class NcclRequest:
    """An operation issued on a stream: a cuda event recorded behind it (``test()``, ``wait(seconds)``)."""

    def __init__(self, comm: NcclComm, stream, source: int = -1, nbytes: int = 0):
        self.comm = comm
        self.event = comm.cupy.cuda.Event(disable_timing=True)
        self.source, self.nbytes = source, nbytes
        if comm.deferred is None:
            self.event.record(stream)
        else:  # inside coalesced(): the grouped calls are issued at groupEnd, the event goes behind them
            comm.deferred.append(self)

    def test(self) -> bool:
        return bool(self.event.done)

    def wait(self, seconds: float) -> bool:
        """Make the current stream wait for the operation; with blocking wait, wait on the host instead,
        False (the communicator aborted) after ``seconds``."""
        if not blocking_wait():
            cp = self.comm.cupy
            with cp.cuda.Device(self.comm.index):
                cp.cuda.get_current_stream(self.comm.index).wait_event(self.event)
            return True
        deadline = time.monotonic() + seconds
        while not self.event.done:
            if time.monotonic() > deadline:
                self.comm.abort(f"an operation did not complete within {seconds:g} s")
                return False
            time.sleep(1e-4)
        return True


class NcclComm:
    """One NCCL communicator for a group's ranks on cuda device ``index``, its id exchanged over ``host``
    (the group's MpiComm or TcpComm)."""

    def __init__(self, host, index: int, timeout, where: str):
        from munet.backends.cuda.discovery import cupy_module
        from munet.distributed.work import Work

        self.nccl = nccl_module(where)
        self.cupy = cupy_module()
        self.index = index
        self.failed: str | None = None
        self.deferred: list | None = None  # requests of a coalesced() block, recorded at its end
        unique_id = np.zeros(128, dtype=np.int8)
        if host.rank() == 0:
            unique_id[:] = np.asarray(self.nccl.get_unique_id(), dtype=np.int64).astype(np.int8)
        Work(host.bcast(unique_id, 0), f"{where} (exchanging NCCL's unique id)", timeout).wait()
        self._size, self._rank = host.size(), host.rank()
        with self.cupy.cuda.Device(index):
            self.comm = self.nccl.NcclCommunicator(self._size, tuple(int(x) for x in unique_id), self._rank)

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    @contextlib.contextmanager
    def coalesced(self):
        """Issue the operations started inside as one NCCL group (``batch_isend_irecv``: a ring of sends
        and receives that would deadlock one by one); their events are recorded behind the group."""
        cp = self.cupy
        with cp.cuda.Device(self.index):
            self.nccl.groupStart()
            self.deferred = []
            try:
                yield
            finally:
                deferred, self.deferred = self.deferred, None
                try:
                    self.nccl.groupEnd()
                except Exception as error:  # noqa: BLE001 - NcclError: the grouped calls failed
                    raise DistBackendError(f"batch_isend_irecv: NCCL failed: {error}") from error
                stream = cp.cuda.get_current_stream(self.index)
                for request in deferred:
                    request.event.record(stream)

    # plumbing -----------------------------------------------------------------------------------
    def _issue(self, what: str, calls, source: int = -1, nbytes: int = 0) -> NcclRequest:
        """Run ``calls`` (each ``call(stream_ptr)``, grouped when more than one) on the current stream."""
        if self.failed is not None:
            raise DistBackendError(f"{what}: the NCCL communicator of this group was aborted ({self.failed})")
        cp = self.cupy
        with cp.cuda.Device(self.index):
            stream = cp.cuda.get_current_stream(self.index)
            try:
                if len(calls) != 1:
                    self.nccl.groupStart()
                try:
                    for call in calls:
                        call(stream.ptr)
                finally:
                    if len(calls) != 1:
                        self.nccl.groupEnd()
            except Exception as error:  # noqa: BLE001 - NcclError, CUDARuntimeError: the backend's failure
                raise DistBackendError(f"{what}: NCCL failed: {error}") from error
            return NcclRequest(self, stream, source, nbytes)

    def _datatype(self, array) -> int:
        from munet.backends.cuda.copies import dtype_of

        return getattr(self.nccl, _DATATYPES[dtype_of(array).name])

    def _op(self, name: str) -> int:
        return getattr(self.nccl, _OPS[name])

    @staticmethod
    def _bytes(array):
        """``(pointer, byte count)`` of a contiguous array: data movement goes as ``NCCL_UINT8``."""
        return array.data.ptr if array.size else 0, int(array.nbytes)

    # collectives --------------------------------------------------------------------------------
    def allreduce(self, array, op: str) -> NcclRequest:
        p, n, dt, code = array.data.ptr, array.size, self._datatype(array), self._op(op)
        return self._issue("all_reduce", [lambda s: self.comm.allReduce(p, p, n, dt, code, s)])

    def reduce(self, array, op: str, root: int) -> NcclRequest:
        p, n, dt, code = array.data.ptr, array.size, self._datatype(array), self._op(op)
        return self._issue("reduce", [lambda s: self.comm.reduce(p, p, n, dt, code, root, s)])

    def bcast(self, array, root: int) -> NcclRequest:
        (p, n), u8 = self._bytes(array), self.nccl.NCCL_UINT8
        return self._issue("broadcast", [lambda s: self.comm.broadcast(p, p, n, u8, root, s)])

    def allgather(self, send, recv) -> NcclRequest:
        (sp, n), (rp, _), u8 = self._bytes(send), self._bytes(recv), self.nccl.NCCL_UINT8
        return self._issue("all_gather", [lambda s: self.comm.allGather(sp, rp, n, u8, s)])

    def reduce_scatter(self, send, recv, op: str) -> NcclRequest:
        sp, rp, n = send.data.ptr, recv.data.ptr, recv.size
        dt, code = self._datatype(send), self._op(op)
        return self._issue("reduce_scatter", [lambda s: self.comm.reduceScatter(sp, rp, n, dt, code, s)])

    def _sends_and_receives(self, what: str, send, send_counts, recv, recv_counts) -> NcclRequest:
        """Grouped point-to-point: ``send_counts[j]`` elements of ``send`` to rank j (in rank order), and
        ``recv_counts[j]`` elements from rank j into ``recv``; a None array takes part in nothing."""
        u8, calls = self.nccl.NCCL_UINT8, []
        for array, counts, method in ((send, send_counts, self.comm.send), (recv, recv_counts, self.comm.recv)):
            if array is None:
                continue
            base, item, offset = array.data.ptr, array.itemsize, 0
            for peer, count in enumerate(counts):
                if count:
                    args = (base + offset * item, int(count) * item, u8, peer)
                    calls.append(lambda s, method=method, args=args: method(*args, s))
                offset += int(count)
        return self._issue(what, calls or [lambda s: None])

    def alltoallv(self, send, send_counts, recv, recv_counts) -> NcclRequest:
        return self._sends_and_receives("all_to_all", send, send_counts, recv, recv_counts)

    def gather(self, send, recv, root: int) -> NcclRequest:
        size = self.size()
        to_root = [send.size if r == root else 0 for r in range(size)]
        return self._sends_and_receives("gather", send, to_root, recv, [send.size] * size if recv is not None else [])

    def scatter(self, send, recv, root: int) -> NcclRequest:
        size = self.size()
        from_root = [recv.size if r == root else 0 for r in range(size)]
        return self._sends_and_receives(
            "scatter", send, [recv.size] * size if send is not None else [], recv, from_root
        )

    # point to point -----------------------------------------------------------------------------
    def send(self, array, dst: int, tag: int) -> NcclRequest:
        (p, n), u8 = self._bytes(array), self.nccl.NCCL_UINT8
        return self._issue(f"send to group rank {dst}", [lambda s: self.comm.send(p, n, u8, dst, s)])

    def recv(self, array, src: int | None, tag: int) -> NcclRequest:
        if src is None:
            raise ValueError("recv: backend 'nccl' cannot receive from any source (NCCL names the sender); pass src")
        (p, n), u8 = self._bytes(array), self.nccl.NCCL_UINT8
        return self._issue("recv", [lambda s: self.comm.recv(p, n, u8, src, s)], source=src, nbytes=n)

    def abort(self, why: str) -> None:
        if self.failed is None:
            self.failed = why
            self.comm.abort()

    def free(self) -> None:
        if self.failed is None:
            self.comm.destroy()
            self.failed = "the group was destroyed"


class DeviceBuffer:
    """The contiguous cuda array behind ``tensor`` for one NCCL operation, and how to put a result back.

    A contiguous tensor is its own buffer; a strided view is staged through a contiguous copy on its
    device and written back with ``copy_`` (a device copy, in stream order).
    """

    def __init__(self, tensor, *, read: bool = True, **_):
        from munet.ops.creation import empty

        self.tensor = tensor
        view = tensor.detach()
        self.shares_memory = view.is_contiguous()
        if self.shares_memory:
            self.flat = view.reshape(-1)
        elif read:
            self.flat = view.contiguous().reshape(-1)
        else:
            self.flat = empty(view.numel(), dtype=view.dtype, device=view.device)
        self.array = self.flat._data

    @property
    def buffer(self):
        return self.array

    def divide(self, n: int) -> None:
        from munet.autograd.grad_mode import no_grad

        with no_grad():
            self.flat.div_(n)

    def store(self) -> None:
        if self.shares_memory:
            self.tensor.untyped_storage().version += 1
            return
        from munet.autograd.grad_mode import no_grad

        with no_grad():
            self.tensor.detach().copy_(self.flat.view(tuple(self.tensor.shape)))
