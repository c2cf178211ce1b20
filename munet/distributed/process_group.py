"""``ProcessGroup``: a set of ranks joined by one communicator, and its raw operations.

The communicator is a transport: ``MpiComm`` (munet/distributed/mpi_comm.py) for ranks that
``mpirun`` started, ``TcpComm`` (munet/distributed/tcp_comm.py) for ranks that met through a
store. Each operation stages its tensors as host arrays (``HostBuffer``), starts the
transport's nonblocking call and returns a :class:`Work`. Ranks here are ranks *in this
group*; ``munet.distributed``'s functions translate global ranks, check arguments and agree on
shapes before they get here.
"""

from __future__ import annotations

import enum
from datetime import timedelta

import numpy as np

from munet.distributed.host_buffers import HostBuffer
from munet.distributed.work import Work


class ReduceOp(enum.Enum):
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter`` combine the ranks' values."""

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


def reduction(op: ReduceOp, dtype, where: str) -> str:
    """The transport's reduction (MPI's name: ``"SUM"``, ``"LOR"``, ...) for ``op`` on ``dtype``;
    raises for pairs PyTorch refuses."""
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


class ProcessGroup:
    """Ranks ``ranks`` (global numbering, in group order) joined by ``comm`` (an MpiComm or TcpComm)."""

    def __init__(self, comm, backend: str, ranks: list[int], timeout: timedelta):
        self.comm = comm
        self.backend = backend
        self.ranks = list(ranks)
        self.timeout = timeout

    def rank(self) -> int:
        return self.comm.rank()

    def size(self) -> int:
        return self.comm.size()

    def group_rank(self, global_rank: int, where: str) -> int:
        """The rank in this group of process ``global_rank``; raises if it is not a member."""
        if global_rank not in self.ranks:
            raise ValueError(f"{where}: global rank {global_rank} is not part of this group (ranks {self.ranks})")
        return self.ranks.index(global_rank)

    def _work(self, request, description: str, outputs=(), stores=(), opts=None) -> Work:
        from munet.distributed.options import option_timeout

        work = Work(request, description, option_timeout(opts, self.timeout), outputs)
        for buf in stores:
            work.then(buf.store)
        return work

    def _averaged(self, work: Work, buf: HostBuffer, op: ReduceOp) -> Work:
        if op is ReduceOp.AVG:
            work.then(lambda: np.divide(buf.array, self.size(), out=buf.array))
        return work.then(buf.store)

    # collectives --------------------------------------------------------------------------------
    # Each also takes PyTorch's form (a list of one tensor, an options record in place of the
    # op or root: ``pg.allreduce([t], AllreduceOptions())``), see munet/distributed/options.py.
    def allreduce(self, tensor, op=ReduceOp.SUM) -> Work:
        from munet.distributed.options import AllreduceOptions, single_tensor

        opts = op if isinstance(op, AllreduceOptions) else None
        op, tensor = op.reduceOp if opts else op, single_tensor(tensor, "allreduce")
        name = reduction(op, tensor.dtype, "all_reduce")
        buf = HostBuffer(tensor, for_reduction=True)
        work = self._work(self.comm.allreduce(buf.mpi_buffer, name), "all_reduce", [tensor], opts=opts)
        return self._averaged(work, buf, op)

    def allreduce_coalesced(self, tensors: list, opts=None) -> Work:
        """``allreduce`` of every tensor of ``tensors`` (one dtype), as one operation."""
        from munet.distributed.collectives import flat_copy, split_into
        from munet.distributed.options import AllreduceCoalescedOptions

        opts = opts or AllreduceCoalescedOptions()
        flat = flat_copy(list(tensors))
        return self.allreduce(flat, opts).then(lambda: split_into(flat, list(tensors)))

    def reduce(self, tensor, root, op=ReduceOp.SUM) -> Work:
        from munet.distributed.options import ReduceOptions, single_tensor

        opts = root if isinstance(root, ReduceOptions) else None
        if opts:
            root, op = opts.rootRank, opts.reduceOp
        tensor = single_tensor(tensor, "reduce")
        name = reduction(op, tensor.dtype, "reduce")
        buf = HostBuffer(tensor, for_reduction=True)
        work = self._work(self.comm.reduce(buf.mpi_buffer, name, root), "reduce", [tensor], opts=opts)
        return work if self.rank() != root else self._averaged(work, buf, op)

    def broadcast(self, tensor, root) -> Work:
        from munet.distributed.options import BroadcastOptions, single_tensor

        opts = root if isinstance(root, BroadcastOptions) else None
        root, tensor = opts.rootRank if opts else root, single_tensor(tensor, "broadcast")
        buf = HostBuffer(tensor, read=self.rank() == root)
        stores = [buf] if self.rank() != root else []
        return self._work(self.comm.bcast(buf.mpi_buffer, root), "broadcast", [tensor], stores, opts)

    def allgather(self, output, input) -> Work:
        """``output`` (flat numel = size * input numel) gets every rank's ``input`` in rank order."""
        out = HostBuffer(output, read=False)
        inp = HostBuffer(input)
        return self._work(self.comm.allgather(inp.mpi_buffer, out.mpi_buffer), "all_gather", [output], [out])

    def reduce_scatter(self, output, input, op=ReduceOp.SUM) -> Work:
        """Rank r's ``output`` gets the reduction of chunk r of every rank's flat ``input``."""
        from munet.distributed.options import ReduceScatterOptions

        opts = op if isinstance(op, ReduceScatterOptions) else None
        op = opts.reduceOp if opts else op
        name = reduction(op, input.dtype, "reduce_scatter")
        out = HostBuffer(output, for_reduction=True, read=False)
        inp = HostBuffer(input, for_reduction=True)
        request = self.comm.reduce_scatter(inp.mpi_buffer, out.mpi_buffer, name)
        return self._averaged(self._work(request, "reduce_scatter", [output], opts=opts), out, op)

    def alltoall(self, output, input, output_counts: list[int], input_counts: list[int], opts=None) -> Work:
        """Chunk j of ``input`` (``input_counts[j]`` elements) goes to rank j, which puts it at chunk r."""
        out = HostBuffer(output, read=False)
        inp = HostBuffer(input)
        request = self.comm.alltoallv(inp.mpi_buffer, input_counts, out.mpi_buffer, output_counts)
        return self._work(request, "all_to_all", [output], [out], opts)

    def gather(self, output, input, root) -> Work:
        from munet.distributed.options import GatherOptions

        opts = root if isinstance(root, GatherOptions) else None
        root = opts.rootRank if opts else root
        inp = HostBuffer(input)
        if self.rank() != root:
            return self._work(self.comm.gather(inp.mpi_buffer, None, root), "gather", opts=opts)
        out = HostBuffer(output, read=False)
        return self._work(self.comm.gather(inp.mpi_buffer, out.mpi_buffer, root), "gather", [output], [out], opts)

    def scatter(self, output, input, root) -> Work:
        from munet.distributed.options import ScatterOptions

        opts = root if isinstance(root, ScatterOptions) else None
        root = opts.rootRank if opts else root
        out = HostBuffer(output, read=False)
        send = HostBuffer(input).mpi_buffer if self.rank() == root else None
        return self._work(self.comm.scatter(send, out.mpi_buffer, root), "scatter", [output], [out], opts)

    def barrier(self, opts=None) -> Work:
        return self._work(self.comm.barrier(), "barrier", opts=opts)

    # point to point -----------------------------------------------------------------------------
    def send(self, tensor, dst: int, tag: int) -> Work:
        buf = HostBuffer(tensor)
        return self._work(self.comm.send(buf.mpi_buffer, dst, tag), f"send to group rank {dst}")

    def recv(self, tensor, src: int | None, tag: int) -> tuple[Work, list]:
        """Receive into ``tensor``; the second value holds the sender's group rank once done."""
        buf = HostBuffer(tensor, read=False)
        request = self.comm.recv(buf.mpi_buffer, src, tag)
        sender: list = []

        def check_and_store():
            sender.append(request.source)
            if request.nbytes != buf.mpi_buffer.nbytes:
                raise RuntimeError(
                    f"recv: expected {buf.mpi_buffer.nbytes} bytes ({tensor.dtype.name} {list(tensor.shape)}), "
                    f"rank {request.source} of the group sent {request.nbytes}"
                )
            buf.store()

        return Work(request, "recv", self.timeout, [tensor]).then(check_and_store), sender

    def free(self) -> None:
        self.comm.free()
