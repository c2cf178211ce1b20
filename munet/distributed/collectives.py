"""``munet.distributed``'s collectives and point-to-point operations, with PyTorch's signatures.

Each function resolves the group (a process outside it returns ``None`` and does nothing, as
in PyTorch), checks its arguments, has the ranks agree on the op, dtypes and shapes (unless
the debug level is ``OFF``), and starts the group's operation. With ``async_op=True`` it
returns the :class:`Work`; otherwise it waits. Tensors are updated in place. Ranks given as
``src``/``dst`` are global ranks; ``group_src``/``group_dst`` are ranks within ``group``.
"""

from __future__ import annotations

import functools

import numpy as np

from munet._tensor import Tensor
from munet.distributed.host_buffers import store_array
from munet.distributed.process_group import ProcessGroup, ReduceOp
from munet.distributed.work import Work
from munet.distributed.world import DebugLevel, get_debug_level, resolve_group

_OPS = (
    "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter", "barrier", "object",
)  # fmt: skip
_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
_MAX_DIMS = 8
_OP_NUMBER = {op: k for k, op in enumerate(ReduceOp)}  # a reduction's number in a signature


@functools.lru_cache(maxsize=512)
def _signature(where: str, dtype, shape: tuple, extra: int, nccl: bool = False) -> np.ndarray:
    """The row a rank sends in :func:`agree` (read-only: cached, a training loop repeats its calls)."""
    dims = list(shape)[:_MAX_DIMS]
    if len(shape) > _MAX_DIMS:
        dims[-1] = int(np.prod(shape[_MAX_DIMS - 1 :]))
    code = _DTYPES.index(dtype.name) if dtype is not None and dtype.name in _DTYPES else len(_DTYPES)
    row = [_OPS.index(where), code, len(shape), *dims, *([-1] * (_MAX_DIMS - len(dims))), int(nccl), extra]
    signature = np.asarray(row, dtype=np.int64)
    signature.flags.writeable = False
    return signature


def _describe(row: np.ndarray, extra_name: str) -> str:
    op = _OPS[row[0]]
    if op in ("barrier", "object"):
        return op
    dtype = _DTYPES[row[1]] if row[1] < len(_DTYPES) else "another dtype"
    text = f"{op} of {dtype} {[int(d) for d in row[3 : 3 + min(int(row[2]), _MAX_DIMS)]]}"
    text += " (a cuda tensor, through NCCL)" if row[-2] else ""
    return text + (f" ({extra_name} {int(row[-1])})" if extra_name else "")


def agree(pg: ProcessGroup, where: str, dtype=None, shape=(), extra: int = 0, extra_name: str = "", on=None) -> None:
    """Raise on every rank unless all ranks called ``where`` with the same dtype, shape and ``extra``, and
    with tensors (``on``) that take the same transport (NCCL or the host one)."""
    if pg.size() == 1 or get_debug_level() is DebugLevel.OFF:
        return
    mine = _signature(where, dtype, tuple(shape), extra, on is not None and pg.uses_nccl and pg.on_nccl(on))
    request, table = pg.comm.gather_rows(mine)
    pg.wait_now(request, f"{where} (checking that the ranks agree)")
    if table.tobytes() == mine.tobytes() * len(table):  # bytes: cheaper than a ufunc on 13 numbers
        return
    calls = "; ".join(f"rank {pg.ranks[r]} called {_describe(row, extra_name)}" for r, row in enumerate(table))
    raise RuntimeError(f"{where}: the ranks disagree on the collective: {calls}")


def _finish(work: Work, async_op: bool):
    if async_op:
        return work
    work.wait()
    return None


def _tensor(t, where: str, name: str = "tensor") -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: {name} must be a munet.Tensor, got {type(t).__name__}")
    return t


def _tensor_list(tensors, count: int, like: Tensor | None, where: str, name: str) -> list:
    if not isinstance(tensors, (list, tuple)) or len(tensors) != count:
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise ValueError(f"{where}: {name} must be a list of {count} tensors (one per rank), got {got}")
    for t in tensors:
        _tensor(t, where, name)
        if like is not None and (t.dtype is not like.dtype or t.shape != like.shape):
            raise ValueError(
                f"{where}: every tensor in {name} must be {like.dtype.name} {list(like.shape)} like the input, "
                f"got {t.dtype.name} {list(t.shape)}"
            )
    return list(tensors)


def _same_dtype(a: Tensor, b: Tensor, where: str) -> None:
    if a.dtype is not b.dtype:
        raise ValueError(f"{where}: output and input must have the same dtype, got {a.dtype.name} and {b.dtype.name}")


def root_rank(pg: ProcessGroup, global_rank, group_rank, where: str, name: str) -> int:
    if (global_rank is None) == (group_rank is None):
        raise ValueError(f"{where}: give exactly one of {name} (a global rank) and group_{name} (a rank in the group)")
    if group_rank is not None:
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{where}: group_{name}={group_rank} is not a rank of a group of {pg.size()}")
        return int(group_rank)
    return pg.group_rank(int(global_rank), where)


def _flat(pg: ProcessGroup, like: Tensor, numel: int) -> Tensor:
    """An empty flat tensor of ``like``'s dtype where ``pg`` stages ``like`` (its cuda device on NCCL, else cpu)."""
    from munet.ops.creation import empty

    return empty(numel, dtype=like.dtype, device=pg.staging_device(like))


def flat_copy(tensors: list, device="cpu") -> Tensor:
    """One contiguous tensor on ``device`` holding ``tensors`` one after the other."""
    from munet._device import as_device
    from munet.autograd.grad_mode import no_grad
    from munet.ops.creation import empty, from_numpy

    if as_device(device).type == "cpu":
        return from_numpy(np.concatenate([np.asarray(t.detach().cpu().numpy()).reshape(-1) for t in tensors]))
    flat = empty(sum(t.numel() for t in tensors), dtype=tensors[0].dtype, device=device)
    start = 0
    with no_grad():
        for t in tensors:
            flat[start : start + t.numel()].view(tuple(t.shape)).copy_(t.detach())
            start += t.numel()
    return flat


def split_into(flat: Tensor, tensors: list) -> None:
    """Copy consecutive chunks of ``flat`` into ``tensors`` (a Work step)."""
    from munet.autograd.grad_mode import no_grad

    if flat.device.type != "cpu":  # a device copy per tensor, in stream order
        start = 0
        with no_grad():
            for t in tensors:
                t.detach().copy_(flat[start : start + t.numel()].view(tuple(t.shape)))
                start += t.numel()
        return
    array = flat.numpy()
    start = 0
    for t in tensors:
        store_array(t, array[start : start + t.numel()])
        start += t.numel()


# collectives ------------------------------------------------------------------------------------------
def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` across the ranks; every rank gets the result in ``tensor``."""
    pg = resolve_group(group, "all_reduce")
    if pg is None:
        return None
    name = pg.check_reduction(op, _tensor(tensor, "all_reduce"), "all_reduce")
    if pg.size() > 1 and get_debug_level() is not DebugLevel.OFF:  # agree's own test, to skip its arguments
        agree(pg, "all_reduce", tensor.dtype, tensor.shape, _OP_NUMBER[op], "reduce op #", on=tensor)
    if not async_op and pg.allreduce_now(tensor, op, name):  # the common case: a contiguous cpu tensor
        return None
    return _finish(pg.allreduce(tensor, op), async_op)


def broadcast(tensor: Tensor, src: int | None = None, group=None, async_op: bool = False, group_src: int | None = None):
    """Copy ``tensor`` of rank ``src`` into ``tensor`` of every rank."""
    pg = resolve_group(group, "broadcast")
    if pg is None:
        return None
    root = root_rank(pg, src, group_src, "broadcast", "src")
    agree(pg, "broadcast", _tensor(tensor, "broadcast").dtype, tensor.shape, root, "from group rank", on=tensor)
    return _finish(pg.broadcast(tensor, root), async_op)


def reduce(
    tensor: Tensor,
    dst: int | None = None,
    op: ReduceOp = ReduceOp.SUM,
    group=None,
    async_op: bool = False,
    group_dst: int | None = None,
):
    """Reduce ``tensor`` across the ranks into ``tensor`` of rank ``dst`` (the others keep theirs)."""
    pg = resolve_group(group, "reduce")
    if pg is None:
        return None
    root = root_rank(pg, dst, group_dst, "reduce", "dst")
    pg.check_reduction(op, _tensor(tensor, "reduce"), "reduce")
    agree(pg, "reduce", tensor.dtype, tensor.shape, root * 16 + _OP_NUMBER[op], "dst * 16 + op #", on=tensor)
    return _finish(pg.reduce(tensor, root, op), async_op)


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """``tensor_list[r]`` of every rank gets ``tensor`` of rank r."""
    pg = resolve_group(group, "all_gather")
    if pg is None:
        return None
    outputs = _tensor_list(tensor_list, pg.size(), _tensor(tensor, "all_gather"), "all_gather", "tensor_list")
    agree(pg, "all_gather", tensor.dtype, tensor.shape, on=tensor)
    flat = _flat(pg, tensor, tensor.numel() * pg.size())
    work = pg.allgather(flat, tensor)
    return _finish(work.then(lambda: split_into(flat, outputs)), async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group=None, async_op: bool = False):
    """``output_tensor`` (``world_size`` times ``input_tensor``'s size, stacked or concatenated on dim 0)
    gets every rank's ``input_tensor`` in rank order."""
    where = "all_gather_into_tensor"
    pg = resolve_group(group, where)
    if pg is None:
        return None
    out, inp = _tensor(output_tensor, where, "output_tensor"), _tensor(input_tensor, where, "input_tensor")
    _same_dtype(out, inp, where)
    if out.numel() != inp.numel() * pg.size():
        raise ValueError(
            f"{where}: output_tensor must hold world_size ({pg.size()}) times input_tensor's "
            f"{inp.numel()} elements, got shape {list(out.shape)}"
        )
    agree(pg, where, inp.dtype, inp.shape, on=inp)
    return _finish(pg.allgather(out, inp), async_op)


def reduce_scatter(output: Tensor, input_list: list, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """``output`` of rank r gets the reduction over the ranks of their ``input_list[r]``."""
    pg = resolve_group(group, "reduce_scatter")
    if pg is None:
        return None
    inputs = _tensor_list(
        input_list, pg.size(), _tensor(output, "reduce_scatter", "output"), "reduce_scatter", "input_list"
    )
    pg.check_reduction(op, output, "reduce_scatter")
    agree(pg, "reduce_scatter", output.dtype, output.shape, _OP_NUMBER[op], "reduce op #", on=output)
    return _finish(pg.reduce_scatter(output, flat_copy(inputs, pg.staging_device(output)), op), async_op)


def reduce_scatter_tensor(
    output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False
):
    """``output`` of rank r gets the reduction of chunk r (on dim 0) of every rank's ``input``."""
    where = "reduce_scatter_tensor"
    pg = resolve_group(group, where)
    if pg is None:
        return None
    _same_dtype(_tensor(output, where, "output"), _tensor(input, where, "input"), where)
    if input.numel() != output.numel() * pg.size():
        raise ValueError(
            f"{where}: input must hold world_size ({pg.size()}) times output's {output.numel()} elements, "
            f"got shape {list(input.shape)}"
        )
    pg.check_reduction(op, output, where)
    agree(pg, where, output.dtype, output.shape, _OP_NUMBER[op], "reduce op #", on=output)
    return _finish(pg.reduce_scatter(output, input, op), async_op)


def _alltoall_counts_agree(pg: ProcessGroup, where: str, dtype, send_counts: list, recv_counts: list, on) -> None:
    """Every rank sends rank j exactly as many elements as rank j expects; else all ranks raise."""
    agree(pg, where, dtype, on=on)
    if pg.size() == 1 or get_debug_level() is DebugLevel.OFF:
        return
    announced = np.empty(pg.size(), dtype=np.int64)
    ones = [1] * pg.size()
    request = pg.comm.alltoallv(np.asarray(send_counts, dtype=np.int64), ones, announced, ones)
    Work(request, where, pg.timeout).wait()
    wrong = [j for j in range(pg.size()) if announced[j] != recv_counts[j]]
    flags = np.empty(pg.size(), dtype=np.int64)
    Work(pg.comm.allgather(np.array([len(wrong)], dtype=np.int64), flags), where, pg.timeout).wait()
    if not flags.any():
        return
    here = "; ".join(
        f"here {recv_counts[j]} element(s) are expected from rank {pg.ranks[j]}, which sends {announced[j]}"
        for j in wrong
    )
    bad = [pg.ranks[r] for r in np.flatnonzero(flags)]
    raise RuntimeError(
        f"{where}: the ranks disagree on the sizes: ranks {bad} expect other sizes than their peers send"
        + (f" ({here})" if here else "")
    )


def all_to_all(output_tensor_list: list, input_tensor_list: list, group=None, async_op: bool = False):
    """``input_tensor_list[j]`` goes to rank j, which receives it as ``output_tensor_list[r]``."""
    where = "all_to_all"
    pg = resolve_group(group, where)
    if pg is None:
        return None
    outputs = _tensor_list(output_tensor_list, pg.size(), None, where, "output_tensor_list")
    inputs = _tensor_list(input_tensor_list, pg.size(), None, where, "input_tensor_list")
    dtype = inputs[0].dtype
    for t in outputs + inputs:
        if t.dtype is not dtype:
            raise ValueError(f"{where}: every tensor must have dtype {dtype.name}, got {t.dtype.name}")
    send_counts, recv_counts = [t.numel() for t in inputs], [t.numel() for t in outputs]
    _alltoall_counts_agree(pg, where, dtype, send_counts, recv_counts, inputs[0])
    flat_out = _flat(pg, inputs[0], sum(recv_counts))
    work = pg.alltoall(flat_out, flat_copy(inputs, pg.staging_device(inputs[0])), recv_counts, send_counts)
    return _finish(work.then(lambda: split_into(flat_out, outputs)), async_op)


def all_to_all_single(
    output: Tensor, input: Tensor, output_split_sizes=None, input_split_sizes=None, group=None, async_op: bool = False
):
    """``all_to_all`` on dim-0 chunks of one tensor (equal chunks unless split sizes are given)."""
    where = "all_to_all_single"
    pg = resolve_group(group, where)
    if pg is None:
        return None
    _same_dtype(_tensor(output, where, "output"), _tensor(input, where, "input"), where)
    send_counts = _split_counts(input, input_split_sizes, pg.size(), where, "input")
    recv_counts = _split_counts(output, output_split_sizes, pg.size(), where, "output")
    _alltoall_counts_agree(pg, where, input.dtype, send_counts, recv_counts, input)
    return _finish(pg.alltoall(output, input, recv_counts, send_counts), async_op)


def _split_counts(t: Tensor, splits, size: int, where: str, name: str) -> list[int]:
    rows = t.shape[0] if t.ndim else 1
    row = t.numel() // rows if rows else 0
    if splits is None:
        if rows % size:
            raise ValueError(f"{where}: {name}'s dim 0 ({rows}) must divide by the world size ({size})")
        return [rows // size * row] * size
    splits = [int(s) for s in splits]
    if len(splits) != size or sum(splits) != rows:
        raise ValueError(f"{where}: {name}_split_sizes must be {size} sizes summing to {rows}, got {splits}")
    return [s * row for s in splits]


def gather(
    tensor: Tensor, gather_list=None, dst: int | None = None, group=None, async_op: bool = False, group_dst=None
):
    """``gather_list[r]`` of rank ``dst`` gets ``tensor`` of rank r; other ranks pass no list."""
    pg = resolve_group(group, "gather")
    if pg is None:
        return None
    root = root_rank(pg, dst, group_dst, "gather", "dst")
    _tensor(tensor, "gather")
    outputs = _tensor_list(gather_list, pg.size(), tensor, "gather", "gather_list") if pg.rank() == root else []
    agree(pg, "gather", tensor.dtype, tensor.shape, root, "dst group rank", on=tensor)
    flat = _flat(pg, tensor, tensor.numel() * pg.size()) if outputs else None
    work = pg.gather(flat, tensor, root)
    return _finish(work.then(lambda: split_into(flat, outputs)) if outputs else work, async_op)


def scatter(
    tensor: Tensor, scatter_list=None, src: int | None = None, group=None, async_op: bool = False, group_src=None
):
    """``tensor`` of rank r gets ``scatter_list[r]`` of rank ``src``; other ranks pass no list."""
    pg = resolve_group(group, "scatter")
    if pg is None:
        return None
    root = root_rank(pg, src, group_src, "scatter", "src")
    _tensor(tensor, "scatter")
    inputs = _tensor_list(scatter_list, pg.size(), tensor, "scatter", "scatter_list") if pg.rank() == root else []
    agree(pg, "scatter", tensor.dtype, tensor.shape, root, "src group rank", on=tensor)
    flat = flat_copy(inputs, pg.staging_device(tensor)) if inputs else None
    return _finish(pg.scatter(tensor, flat, root), async_op)


def barrier(group=None, async_op: bool = False, device_ids=None):
    """Wait until every rank of the group reached the barrier."""
    pg = resolve_group(group, "barrier")
    if pg is None:
        return None
    agree(pg, "barrier")
    return _finish(pg.barrier(), async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks: bool = False):
    """A barrier that raises after ``timeout`` (the group's by default) instead of waiting forever."""
    pg = resolve_group(group, "monitored_barrier")
    if pg is None:
        return None
    pg.barrier().wait(timeout)
    return None


# point to point ---------------------------------------------------------------------------------------
def isend(tensor: Tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None):
    """Start sending ``tensor`` to rank ``dst``; returns the Work."""
    pg = resolve_group(group, "isend")
    if pg is None:
        return None
    return pg.send(_tensor(tensor, "isend"), root_rank(pg, dst, group_dst, "isend", "dst"), tag)


def irecv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None):
    """Start receiving into ``tensor`` from rank ``src`` (any rank when both are None); returns the Work."""
    pg = resolve_group(group, "irecv")
    if pg is None:
        return None
    root = None if src is None and group_src is None else root_rank(pg, src, group_src, "irecv", "src")
    work, _ = pg.recv(_tensor(tensor, "irecv"), root, tag)
    return work


def send(tensor: Tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None) -> None:
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor: Tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None) -> int:
    """Receive into ``tensor``; returns the sender's global rank (-1 outside the group)."""
    pg = resolve_group(group, "recv")
    if pg is None:
        return -1
    root = None if src is None and group_src is None else root_rank(pg, src, group_src, "recv", "src")
    work, sender = pg.recv(_tensor(tensor, "recv"), root, tag)
    work.wait()
    return pg.ranks[sender[0]]


# batches and coalesced collectives --------------------------------------------------------------------
class P2POp:
    """One point-to-point operation for ``batch_isend_irecv``: ``op`` is ``isend`` or ``irecv``."""

    def __init__(self, op, tensor: Tensor, peer: int | None = None, group=None, tag: int = 0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError(
                "Invalid ``op``. Expected ``op`` to be of type ``munet.distributed.isend`` or "
                "``munet.distributed.irecv``."
            )
        if (peer is None) == (group_peer is None):
            raise ValueError("P2POp: give exactly one of peer (a global rank) and group_peer (a rank in the group)")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = (
            op,
            tensor,
            peer,
            group,
            tag,
            group_peer,
        )


def batch_isend_irecv(p2p_op_list: list) -> list:
    """Start every ``P2POp`` of the list (in order) and return their Works."""
    if not isinstance(p2p_op_list, list) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("batch_isend_irecv: expected a non-empty list of P2POp")
    if not p2p_op_list:
        raise ValueError("batch_isend_irecv: expected a non-empty list of P2POp")
    with _coalesced(p2p_op_list):
        works = []
        for p in p2p_op_list:
            if p.op is isend:
                works.append(isend(p.tensor, p.peer, p.group, p.tag, group_dst=p.group_peer))
            else:
                works.append(irecv(p.tensor, p.peer, p.group, p.tag, group_src=p.group_peer))
    return works


def _coalesced(p2p_op_list: list):
    """One NCCL group for a batch whose every operation goes through the same group's NCCL communicator
    (as PyTorch coalesces them); otherwise the operations simply start in order."""
    import contextlib

    groups = {id(resolve_group(p.group, "batch_isend_irecv")) for p in p2p_op_list}
    pg = resolve_group(p2p_op_list[0].group, "batch_isend_irecv")
    if (
        len(groups) != 1
        or pg is None
        or not all(pg.on_nccl(_tensor(p.tensor, "batch_isend_irecv")) for p in p2p_op_list)
    ):
        return contextlib.nullcontext()
    return pg.nccl_comm(p2p_op_list[0].tensor.device.index, "batch_isend_irecv").coalesced()


def _one_dtype(tensors: list, where: str):
    if not tensors:
        raise ValueError(f"{where}: expected a non-empty list of tensors")
    dtype = _tensor(tensors[0], where, "tensors").dtype
    for t in tensors:
        if _tensor(t, where, "tensors").dtype is not dtype:
            raise ValueError(f"{where}: every tensor must have dtype {dtype.name}, got {t.dtype.name}")
    return dtype


def all_reduce_coalesced(tensors: list, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """``all_reduce`` of every tensor of ``tensors`` (one dtype), as one collective."""
    where = "all_reduce_coalesced"
    pg = resolve_group(group, where)
    if pg is None:
        return None
    _one_dtype(list(tensors), where)
    pg.check_reduction(op, tensors[0], where)
    from munet.distributed.options import AllreduceCoalescedOptions

    total = [sum(t.numel() for t in tensors)]
    agree(pg, "all_reduce", tensors[0].dtype, total, _OP_NUMBER[op], "op #", on=tensors[0])
    opts = AllreduceCoalescedOptions()
    opts.reduceOp = op
    return _finish(pg.allreduce_coalesced(list(tensors), opts), async_op)


def all_gather_coalesced(output_tensor_lists: list, input_tensor_list: list, group=None, async_op: bool = False):
    """``output_tensor_lists[r][i]`` of every rank gets ``input_tensor_list[i]`` of rank r, as one collective."""
    where = "all_gather_coalesced"
    pg = resolve_group(group, where)
    if pg is None:
        return None
    inputs = list(input_tensor_list)
    dtype = _one_dtype(inputs, where)
    if not isinstance(output_tensor_lists, (list, tuple)) or len(output_tensor_lists) != pg.size():
        raise ValueError(f"{where}: output_tensor_lists must hold one list per rank ({pg.size()})")
    outputs = []
    for outs in output_tensor_lists:
        if len(outs) != len(inputs) or any(
            o.numel() != i.numel() or o.dtype is not dtype for o, i in zip(outs, inputs)
        ):
            raise ValueError(f"{where}: every output list must match input_tensor_list in sizes and dtype")
        outputs += list(outs)
    flat = flat_copy(inputs, pg.staging_device(inputs[0]))
    agree(pg, "all_gather", dtype, flat.shape, on=flat)
    gathered = _flat(pg, flat, flat.numel() * pg.size())
    work = pg.allgather(gathered, flat)
    return _finish(work.then(lambda: split_into(gathered, outputs)), async_op)
