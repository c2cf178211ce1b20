"""``ProcessGroup``: a set of ranks joined by one communicator, and its raw operations.

The communicator is a host transport: ``MpiComm`` (munet/distributed/mpi_comm.py) for ranks that
``mpirun`` started, ``TcpComm`` (munet/distributed/tcp_comm.py) for ranks that met through a
store. A group whose backend names NCCL (``"nccl"``, ``"cpu:gloo,cuda:nccl"``) also carries its cuda
tensors through an ``NcclComm`` (munet/distributed/nccl_comm.py), made at its first cuda collective.
Each operation picks the transport of its tensor, stages the tensor as that transport's buffer
(``HostBuffer``: a host array; ``DeviceBuffer``: a contiguous cuda array), starts the transport's
nonblocking call and returns a :class:`Work`. Ranks here are ranks *in this group*;
``munet.distributed``'s functions translate global ranks, check arguments and agree on shapes
before they get here.
"""

from __future__ import annotations

import enum
from datetime import timedelta

import numpy as np

from munet.distributed.errors import PeerDeathError
from munet.distributed.host_buffers import HostBuffer, own_array
from munet.distributed.mpi_comm import MpiRequest
from munet.distributed.watchdog import group_key
from munet.distributed.work import Work, failed_operation


class ReduceOp(enum.Enum):
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter`` combine the ranks' values."""

    __hash__ = object.__hash__  # members compare by identity; Enum's hash of the name is Python code, per call

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


def supports_complex(reduceOp: ReduceOp) -> bool:  # noqa: N803 - PyTorch's name
    """Whether ``reduceOp`` is defined on complex values (PyTorch's answer: not MAX, MIN, PRODUCT or bitwise)."""
    return reduceOp not in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT, ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)


_BOOL_OPS = {"sum": "LOR", "max": "LOR", "bor": "LOR", "min": "LAND", "product": "LAND", "band": "LAND", "bxor": "LXOR"}
_NUMBER_OPS = {"sum": "SUM", "avg": "SUM", "product": "PROD", "min": "MIN", "max": "MAX"}
_BITWISE_OPS = {"band": "BAND", "bor": "BOR", "bxor": "BXOR"}


_REDUCTIONS: dict = {}  # (op, dtype) -> the transport's reduction, for the pairs already checked


def reduction(op: ReduceOp, dtype, where: str) -> str:
    """The transport's reduction (MPI's name: ``"SUM"``, ``"LOR"``, ...) for ``op`` on ``dtype``;
    raises for pairs PyTorch refuses."""
    known = _REDUCTIONS.get((op, dtype)) if isinstance(op, ReduceOp) else None
    if known is None:
        known = _REDUCTIONS[(op, dtype)] = _checked_reduction(op, dtype, where)
    return known


def _checked_reduction(op: ReduceOp, dtype, where: str) -> str:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{where}: op must be a munet.distributed.ReduceOp, got {op!r}")
    if dtype.name == "bool":
        if op is ReduceOp.AVG:
            raise ValueError(f"{where}: ReduceOp.AVG needs a floating-point tensor, got bool")
        return _BOOL_OPS[op.value]
    if op.value in _BITWISE_OPS:
        if dtype.is_floating_point:
            raise ValueError(f"{where}: ReduceOp.{op.name} needs an integer or bool tensor, got {dtype.name}")
        return _BITWISE_OPS[op.value]
    if op is ReduceOp.AVG and not dtype.is_floating_point:
        raise ValueError(f"{where}: ReduceOp.AVG needs a floating-point tensor, got {dtype.name}")
    return _NUMBER_OPS[op.value]


def device_backends(backend: str) -> dict[str, str]:
    """What carries each device type's tensors for a (checked) backend string: ``"gloo"`` and ``"mpi"``
    carry everything over the host transport, ``"nccl"`` (or ``"cuda:nccl"``) carries cuda tensors
    through NCCL and the rest over the host transport, ``"cpu:gloo,cuda:nccl"`` names each."""
    parts = [p.strip() for p in backend.split(",")]
    if len(parts) == 1 and ":" not in parts[0]:
        name = parts[0]
        return {"cuda": "nccl"} if name == "nccl" else {"cpu": name, "cuda": name}
    return dict(tuple(p.split(":", 1)) for p in parts)


class ProcessGroup:
    """Ranks ``ranks`` (global numbering, in group order) joined by ``comm`` (an MpiComm or TcpComm),
    and by NCCL for cuda tensors when ``backend`` says so (on cuda device ``device_id`` when given,
    else on the device of the first cuda tensor it carries)."""

    def __init__(
        self, comm, backend: str, ranks: list[int], timeout: timedelta, device_id: int | None = None, watchdog=None
    ):
        self.comm = comm
        self.backend = backend
        self.ranks = list(ranks)
        self.timeout = timeout
        self.uses_nccl = device_backends(backend).get("cuda") == "nccl"
        self.device_id = device_id
        self._nccl = None
        self.watchdog = watchdog  # the MPI job's (munet/distributed/watchdog.py), or None
        self._watch_key = group_key(self.ranks) if watchdog is not None else None
        self._collectives = 0  # collectives started on the host transport (the same count on every member)
        self._size = comm.size()  # fixed for the group's life, asked by every collective

    def watch(self, request):
        """What ``Work`` needs to name the ranks missing from the next collective, when ``request``
        is an MPI one (else None); numbers the collective."""
        if self.watchdog is None or not isinstance(request, MpiRequest):
            return None
        self._collectives += 1
        return (self.watchdog, self._watch_key, self.ranks, self.ranks[self.rank()], self._collectives)

    def rank(self) -> int:
        return self.comm.rank()

    def size(self) -> int:
        return self._size

    def group_rank(self, global_rank: int, where: str) -> int:
        """The rank in this group of process ``global_rank``; raises if it is not a member."""
        if global_rank not in self.ranks:
            raise ValueError(f"{where}: global rank {global_rank} is not part of this group (ranks {self.ranks})")
        return self.ranks.index(global_rank)

    # which transport carries a tensor ---------------------------------------------------------------
    def on_nccl(self, tensor) -> bool:
        """Whether ``tensor`` goes through NCCL (a cuda tensor on a group whose backend names nccl)."""
        return self.uses_nccl and tensor.device.type == "cuda"

    def staging_device(self, tensor):
        """Where a flat buffer made for ``tensor`` lives: its own cuda device on NCCL, else the host."""
        return tensor.device if self.on_nccl(tensor) else "cpu"

    def nccl_comm(self, index: int, where: str):
        """The group's NCCL communicator on cuda device ``index`` (made now, by every rank, if need be)."""
        from munet.distributed.nccl_comm import NcclComm

        wanted = index if self.device_id is None else self.device_id
        if self._nccl is None and index == wanted:
            self._nccl = NcclComm(self.comm, index, self.timeout, where)
        if self._nccl is None or self._nccl.index != index:
            raise ValueError(
                f"{where}: this group's NCCL communicator is on cuda:{wanted if self._nccl is None else self._nccl.index}"
                f", the tensor on cuda:{index}; a rank uses one cuda device per group (call "
                "munet.cuda.set_device(local_rank) or pass device_id to init_process_group)"
            )
        return self._nccl

    def _carrier(self, tensor, where: str, other=None):
        """``(transport, buffer class)`` for ``tensor`` (and ``other``, which must go the same way)."""
        nccl = self.on_nccl(tensor)
        if other is not None and (nccl != self.on_nccl(other) or (nccl and other.device != tensor.device)):
            raise ValueError(
                f"{where}: backend {self.backend!r} needs the output and input on the same transport; got {other.device} "
                f"and {tensor.device}"
            )
        if not nccl:
            return self.comm, HostBuffer
        from munet.distributed.nccl_comm import DeviceBuffer

        return self.nccl_comm(tensor.device.index, where), DeviceBuffer

    def check_reduction(self, op, tensor, where: str) -> str:
        """The reduction ``tensor``'s transport runs for ``op``; raises for pairs it cannot reduce."""
        if not self.uses_nccl or not self.on_nccl(tensor):
            return reduction(op, tensor.dtype, where)
        from munet.distributed.nccl_comm import nccl_module
        from munet.distributed.nccl_comm import reduction as nccl_reduction

        return nccl_reduction(op, tensor.dtype, int(nccl_module(where).get_version()), where)

    def wait_now(self, request, description: str) -> None:
        """Wait for a collective's ``request`` as its ``Work`` would (the group's timeout, the watchdog's
        census), making the Work only when the request is not done within the transport's spin (``poll``)."""
        try:
            done = request.poll()
        except PeerDeathError as error:
            raise failed_operation(description, error) from None
        if done:
            self._collectives += 1  # numbers it, as watch() would (only MPI groups read the number)
            return
        Work(request, description, self.timeout, watch=self.watch(request)).wait()

    def _work(self, request, description: str, outputs=(), stores=(), opts=None, collective: bool = True) -> Work:
        from munet.distributed.options import option_timeout

        watch = self.watch(request) if collective else None
        work = Work(request, description, option_timeout(opts, self.timeout), outputs, watch)
        for buf in stores:
            work.then(buf.store)
        return work

    def _averaged(self, work: Work, buf, op: ReduceOp, name: str) -> Work:
        if op is ReduceOp.AVG and name != "AVG":  # AVG as SUM, then a division (NCCL 2.10+ averages itself)
            work.then(lambda: buf.divide(self.size()))
        return work.then(buf.store)

    # collectives --------------------------------------------------------------------------------
    # Each also takes PyTorch's form (a list of one tensor, an options record in place of the
    # op or root: ``pg.allreduce([t], AllreduceOptions())``), see munet/distributed/options.py.
    def allreduce(self, tensor, op=ReduceOp.SUM) -> Work:
        from munet.distributed.options import AllreduceOptions, single_tensor

        opts = op if isinstance(op, AllreduceOptions) else None
        op, tensor = op.reduceOp if opts else op, single_tensor(tensor, "allreduce")
        name = self.check_reduction(op, tensor, "all_reduce")
        comm, buffer = self._carrier(tensor, "all_reduce")
        buf = buffer(tensor, for_reduction=True)
        work = self._work(comm.allreduce(buf.buffer, name), "all_reduce", [tensor], opts=opts)
        return self._averaged(work, buf, op, name)

    def allreduce_now(self, tensor, op: ReduceOp, name: str) -> bool:
        """``allreduce(tensor, op).wait()`` for a tensor that is its own host buffer (``own_array``), with
        ``name`` its checked reduction: MPI works on the tensor's memory, no Work unless it must wait.
        Does nothing and returns False for any other tensor. (Every step here is on the time of a
        small all-reduce, on every rank: it makes as few Python calls as it can.)"""
        array = own_array(tensor, for_reduction=True)
        if array is None:
            return False
        self.wait_now(self.comm.allreduce(array, name), "all_reduce")
        if op is ReduceOp.AVG:  # AVG as SUM, then the division HostBuffer.divide makes
            np.divide(array, self.size(), out=array)
        tensor.untyped_storage().version += 1
        return True

    def allreduce_coalesced(self, tensors: list, opts=None) -> Work:
        """``allreduce`` of every tensor of ``tensors`` (one dtype), as one operation."""
        from munet.distributed.collectives import flat_copy, split_into
        from munet.distributed.options import AllreduceCoalescedOptions

        opts = opts or AllreduceCoalescedOptions()
        flat = flat_copy(list(tensors), self.staging_device(tensors[0]))
        return self.allreduce(flat, opts).then(lambda: split_into(flat, list(tensors)))

    def reduce(self, tensor, root, op=ReduceOp.SUM) -> Work:
        from munet.distributed.options import ReduceOptions, single_tensor

        opts = root if isinstance(root, ReduceOptions) else None
        if opts:
            root, op = opts.rootRank, opts.reduceOp
        tensor = single_tensor(tensor, "reduce")
        name = self.check_reduction(op, tensor, "reduce")
        comm, buffer = self._carrier(tensor, "reduce")
        buf = buffer(tensor, for_reduction=True)
        work = self._work(comm.reduce(buf.buffer, name, root), "reduce", [tensor], opts=opts)
        return work if self.rank() != root else self._averaged(work, buf, op, name)

    def broadcast(self, tensor, root) -> Work:
        from munet.distributed.options import BroadcastOptions, single_tensor

        opts = root if isinstance(root, BroadcastOptions) else None
        root, tensor = opts.rootRank if opts else root, single_tensor(tensor, "broadcast")
        comm, buffer = self._carrier(tensor, "broadcast")
        buf = buffer(tensor, read=self.rank() == root)
        stores = [buf] if self.rank() != root else []
        return self._work(comm.bcast(buf.buffer, root), "broadcast", [tensor], stores, opts)

    def allgather(self, output, input) -> Work:
        """``output`` (flat numel = size * input numel) gets every rank's ``input`` in rank order."""
        comm, buffer = self._carrier(input, "all_gather", output)
        out = buffer(output, read=False)
        inp = buffer(input)
        return self._work(comm.allgather(inp.buffer, out.buffer), "all_gather", [output], [out])

    def reduce_scatter(self, output, input, op=ReduceOp.SUM) -> Work:
        """Rank r's ``output`` gets the reduction of chunk r of every rank's flat ``input``."""
        from munet.distributed.options import ReduceScatterOptions

        opts = op if isinstance(op, ReduceScatterOptions) else None
        op = opts.reduceOp if opts else op
        name = self.check_reduction(op, input, "reduce_scatter")
        comm, buffer = self._carrier(input, "reduce_scatter", output)
        out = buffer(output, for_reduction=True, read=False)
        inp = buffer(input, for_reduction=True)
        request = comm.reduce_scatter(inp.buffer, out.buffer, name)
        return self._averaged(self._work(request, "reduce_scatter", [output], opts=opts), out, op, name)

    def alltoall(self, output, input, output_counts: list[int], input_counts: list[int], opts=None) -> Work:
        """Chunk j of ``input`` (``input_counts[j]`` elements) goes to rank j, which puts it at chunk r."""
        comm, buffer = self._carrier(input, "all_to_all", output)
        out = buffer(output, read=False)
        inp = buffer(input)
        request = comm.alltoallv(inp.buffer, input_counts, out.buffer, output_counts)
        return self._work(request, "all_to_all", [output], [out], opts)

    def gather(self, output, input, root) -> Work:
        from munet.distributed.options import GatherOptions

        opts = root if isinstance(root, GatherOptions) else None
        root = opts.rootRank if opts else root
        if self.rank() != root:
            comm, buffer = self._carrier(input, "gather")
            return self._work(comm.gather(buffer(input).buffer, None, root), "gather", opts=opts)
        comm, buffer = self._carrier(input, "gather", output)
        inp, out = buffer(input), buffer(output, read=False)
        return self._work(comm.gather(inp.buffer, out.buffer, root), "gather", [output], [out], opts)

    def scatter(self, output, input, root) -> Work:
        from munet.distributed.options import ScatterOptions

        opts = root if isinstance(root, ScatterOptions) else None
        root = opts.rootRank if opts else root
        comm, buffer = self._carrier(output, "scatter", input if self.rank() == root else None)
        out = buffer(output, read=False)
        send = buffer(input).buffer if self.rank() == root else None
        return self._work(comm.scatter(send, out.buffer, root), "scatter", [output], [out], opts)

    def barrier(self, opts=None) -> Work:
        """Over the host transport, on every backend (it moves no tensor)."""
        return self._work(self.comm.barrier(), "barrier", opts=opts)

    # point to point -----------------------------------------------------------------------------
    def send(self, tensor, dst: int, tag: int) -> Work:
        comm, buffer = self._carrier(tensor, "send")
        buf = buffer(tensor)
        return self._work(comm.send(buf.buffer, dst, tag), f"send to group rank {dst}", collective=False)

    def recv(self, tensor, src: int | None, tag: int) -> tuple[Work, list]:
        """Receive into ``tensor``; the second value holds the sender's group rank once done."""
        comm, buffer = self._carrier(tensor, "recv")
        buf = buffer(tensor, read=False)
        request = comm.recv(buf.buffer, src, tag)
        sender: list = []

        def check_and_store():
            sender.append(request.source)
            if request.nbytes != buf.buffer.nbytes:
                raise RuntimeError(
                    f"recv: expected {buf.buffer.nbytes} bytes ({tensor.dtype.name} {list(tensor.shape)}), "
                    f"rank {request.source} of the group sent {request.nbytes}"
                )
            buf.store()

        return Work(request, "recv", self.timeout, [tensor]).then(check_and_store), sender

    def free(self) -> None:
        if self._nccl is not None:
            self._nccl.free()
        self.comm.free()
