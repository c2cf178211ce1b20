"""``ProcessGroup``: a set of ranks joined by one MPI communicator, and its raw operations.

Each operation starts MPI's nonblocking call on flat tensors and returns a :class:`Work`.
Ranks here are ranks *in this group*; ``munet.distributed``'s functions translate global
ranks, check arguments and agree on shapes before they get here.
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


_BOOL_OPS = {"sum": "LOR", "max": "LOR", "bor": "LOR", "min": "LAND", "product": "LAND", "band": "LAND", "bxor": "LXOR"}
_NUMBER_OPS = {"sum": "SUM", "avg": "SUM", "product": "PROD", "min": "MIN", "max": "MAX"}
_BITWISE_OPS = {"band": "BAND", "bor": "BOR", "bxor": "BXOR"}


def mpi_op(op: ReduceOp, dtype, where: str):
    """The MPI reduction for ``op`` on tensors of ``dtype``; raises for pairs PyTorch refuses."""
    from mpi4py import MPI

    if not isinstance(op, ReduceOp):
        raise TypeError(f"{where}: op must be a munet.distributed.ReduceOp, got {op!r}")
    if dtype.name == "bool":
        if op is ReduceOp.AVG:
            raise ValueError(f"{where}: ReduceOp.AVG needs a floating-point tensor, got bool")
        return getattr(MPI, _BOOL_OPS[op.value])
    if op.value in _BITWISE_OPS:
        if dtype.is_floating_point:
            raise ValueError(f"{where}: ReduceOp.{op.name} needs an integer or bool tensor, got {dtype.name}")
        return getattr(MPI, _BITWISE_OPS[op.value])
    if op is ReduceOp.AVG and not dtype.is_floating_point:
        raise ValueError(f"{where}: ReduceOp.AVG needs a floating-point tensor, got {dtype.name}")
    return getattr(MPI, _NUMBER_OPS[op.value])


class ProcessGroup:
    """Ranks ``ranks`` (global numbering, in group order) joined by ``comm``."""

    def __init__(self, comm, backend: str, ranks: list[int], timeout: timedelta):
        self.comm = comm
        self.backend = backend
        self.ranks = list(ranks)
        self.timeout = timeout

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def group_rank(self, global_rank: int, where: str) -> int:
        """The rank in this group of process ``global_rank``; raises if it is not a member."""
        if global_rank not in self.ranks:
            raise ValueError(f"{where}: global rank {global_rank} is not part of this group (ranks {self.ranks})")
        return self.ranks.index(global_rank)

    def _work(self, request, description: str, outputs=(), stores=()) -> Work:
        work = Work([request] if request is not None else [], description, self.timeout, outputs)
        for buf in stores:
            work.then(buf.store)
        return work

    # collectives --------------------------------------------------------------------------------
    def allreduce(self, tensor, op: ReduceOp) -> Work:
        from mpi4py import MPI

        mop = mpi_op(op, tensor.dtype, "all_reduce")
        buf = HostBuffer(tensor, for_reduction=True)
        request = self.comm.Iallreduce(MPI.IN_PLACE, buf.mpi_buffer, mop)
        work = self._work(request, "all_reduce", [tensor])
        if op is ReduceOp.AVG:
            work.then(lambda: np.divide(buf.array, self.size(), out=buf.array))
        return work.then(buf.store)

    def reduce(self, tensor, root: int, op: ReduceOp) -> Work:
        from mpi4py import MPI

        mop = mpi_op(op, tensor.dtype, "reduce")
        buf = HostBuffer(tensor, for_reduction=True)
        if self.rank() != root:
            return self._work(self.comm.Ireduce(buf.mpi_buffer, None, mop, root), "reduce", [tensor])
        work = self._work(self.comm.Ireduce(MPI.IN_PLACE, buf.mpi_buffer, mop, root), "reduce", [tensor])
        if op is ReduceOp.AVG:
            work.then(lambda: np.divide(buf.array, self.size(), out=buf.array))
        return work.then(buf.store)

    def broadcast(self, tensor, root: int) -> Work:
        buf = HostBuffer(tensor, read=self.rank() == root)
        stores = [buf] if self.rank() != root else []
        return self._work(self.comm.Ibcast(buf.mpi_buffer, root), "broadcast", [tensor], stores)

    def allgather(self, output, input) -> Work:
        """``output`` (flat numel = size * input numel) gets every rank's ``input`` in rank order."""
        out = HostBuffer(output, read=False)
        inp = HostBuffer(input)
        return self._work(self.comm.Iallgather(inp.mpi_buffer, out.mpi_buffer), "all_gather", [output], [out])

    def reduce_scatter(self, output, input, op: ReduceOp) -> Work:
        """Rank r's ``output`` gets the reduction of chunk r of every rank's flat ``input``."""
        mop = mpi_op(op, input.dtype, "reduce_scatter")
        out = HostBuffer(output, for_reduction=True, read=False)
        inp = HostBuffer(input, for_reduction=True)
        request = self.comm.Ireduce_scatter_block(inp.mpi_buffer, out.mpi_buffer, mop)
        work = self._work(request, "reduce_scatter", [output])
        if op is ReduceOp.AVG:
            work.then(lambda: np.divide(out.array, self.size(), out=out.array))
        return work.then(out.store)

    def alltoall(self, output, input, output_counts: list[int], input_counts: list[int]) -> Work:
        """Chunk j of ``input`` (``input_counts[j]`` elements) goes to rank j, which puts it at chunk r."""
        out = HostBuffer(output, read=False)
        inp = HostBuffer(input)
        send = [inp.mpi_buffer, (input_counts, _displacements(input_counts))]
        recv = [out.mpi_buffer, (output_counts, _displacements(output_counts))]
        return self._work(self.comm.Ialltoallv(send, recv), "all_to_all", [output], [out])

    def gather(self, output, input, root: int) -> Work:
        inp = HostBuffer(input)
        if self.rank() != root:
            return self._work(self.comm.Igather(inp.mpi_buffer, None, root), "gather")
        out = HostBuffer(output, read=False)
        return self._work(self.comm.Igather(inp.mpi_buffer, out.mpi_buffer, root), "gather", [output], [out])

    def scatter(self, output, input, root: int) -> Work:
        out = HostBuffer(output, read=False)
        send = HostBuffer(input).mpi_buffer if self.rank() == root else None
        return self._work(self.comm.Iscatter(send, out.mpi_buffer, root), "scatter", [output], [out])

    def barrier(self) -> Work:
        return self._work(self.comm.Ibarrier(), "barrier")

    # point to point -----------------------------------------------------------------------------
    def send(self, tensor, dst: int, tag: int) -> Work:
        buf = HostBuffer(tensor)
        return self._work(self.comm.Isend(buf.mpi_buffer, dst, tag), f"send to group rank {dst}")

    def recv(self, tensor, src: int | None, tag: int) -> tuple[Work, list]:
        """Receive into ``tensor``; the second value holds the sender's group rank once done."""
        from mpi4py import MPI

        buf = HostBuffer(tensor, read=False)
        status = MPI.Status()
        sender: list = []
        source = MPI.ANY_SOURCE if src is None else src
        request = self.comm.Irecv(buf.mpi_buffer, source, tag)
        work = Work([request], "recv", self.timeout, [tensor], statuses=[status])

        def check_and_store():
            count = status.Get_count(MPI.BYTE)
            sender.append(status.Get_source())
            if count != buf.mpi_buffer.nbytes:
                raise RuntimeError(
                    f"recv: expected {buf.mpi_buffer.nbytes} bytes ({tensor.dtype.name} {list(tensor.shape)}), "
                    f"rank {status.Get_source()} of the group sent {count}"
                )
            buf.store()

        return work.then(check_and_store), sender

    def free(self) -> None:
        from mpi4py import MPI

        if self.comm != MPI.COMM_NULL:
            self.comm.Free()


def _displacements(counts: list[int]) -> list[int]:
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if counts else []
