"""Collectives that return a new tensor and are ops, so a ``munet.compile``d program records them
(PyTorch's ``torch.distributed._functional_collectives``).

``all_reduce(tensor, reduceOp, group)`` is the ``all_reduce`` op: the tracer records a node for it,
and the compiled program's executable runs that node's kernel (the group's all-reduce of the
rank's value) where it stands, between the backward that produced the value and the optimizer
that reads it. The op is *effectful* (see ``munet/ops/checks.py``): the compiler never removes,
merges, folds or fuses it. A cuda tensor on a group whose backend names NCCL is reduced where it
lives, by the op's cuda kernel (NCCL on the device's current stream); every other tensor goes
through host memory (``to_device`` nodes around the cpu kernel: MPI or TCP). In eager mode the
same op runs the same kernels.
"""

from __future__ import annotations

import itertools

import numpy as np

from munet._device import device, get_backend
from munet._tensor import Tensor
from munet.backends.cpu.registry import kernel
from munet.backends.cuda import copies
from munet.backends.cuda.registry import kernel as cuda_kernel
from munet.distributed import collectives
from munet.distributed.process_group import ProcessGroup, ReduceOp
from munet.distributed.world import default_group, resolve_group
from munet.ops._registry import Meta, apply, define
from munet.ops.convert import to_device
from munet.ops.creation import from_numpy

# A graph node's attributes are plain values, so a group is named by a key: 0 is whatever the
# default group is when the node runs (so a saved program runs in a new job after
# init_process_group), other keys are groups of this process, handed out here.
DEFAULT_GROUP = 0
_GROUP_KEYS: dict[int, ProcessGroup] = {}
_next_key = itertools.count(1)


def _group_key(pg: ProcessGroup) -> int:
    if pg is default_group("all_reduce"):
        return DEFAULT_GROUP
    key = getattr(pg, "_functional_key", None)
    if key is None:
        key = pg._functional_key = next(_next_key)
        _GROUP_KEYS[key] = pg
    return key


def _group_of(key: int) -> ProcessGroup:
    if key == DEFAULT_GROUP:
        return default_group("all_reduce")
    if key not in _GROUP_KEYS:
        raise RuntimeError(
            "all_reduce: this program reduces over a process group made by new_group() in the process that "
            "traced it; only programs that use the default group run in another process"
        )
    return resolve_group(_GROUP_KEYS[key], "all_reduce")


def _all_reduce_meta(tensor, *, reduce_op: str, group: int):
    if reduce_op not in ReduceOp.__members__:
        raise ValueError(f"all_reduce: op must be one of {sorted(ReduceOp.__members__)}, got {reduce_op!r}")
    if reduce_op == "AVG" and not tensor.dtype.is_floating_point:
        raise TypeError(f"all_reduce: ReduceOp.AVG needs a floating-point tensor, got {tensor.dtype.name}")
    return Meta(tuple(tensor.shape), tensor.dtype)


all_reduce_op = define("all_reduce", meta=_all_reduce_meta, effectful=True)


@kernel("all_reduce")
def _all_reduce_kernel(x, *, reduce_op, group):
    result = from_numpy(np.array(x, copy=True, order="C"))
    collectives.all_reduce(result, ReduceOp[reduce_op], group=_group_of(group))
    return result.numpy()


@cuda_kernel("all_reduce")
def _all_reduce_cuda_kernel(rt, x, *, reduce_op, group):
    """A cuda tensor of an NCCL group: NCCL reduces a fresh copy on the device (the cuda kernel
    convention: ``rt`` is the device's runtime, ``x`` a CuPy array)."""
    if rt.stream.is_capturing():
        raise RuntimeError(
            "all_reduce: a collective cannot run inside a CUDA graph capture: its cross-rank agreement check "
            "runs on the host, and a replay would skip it"
        )
    copy = rt.cupy.array(x, copy=True, order="C")
    dtype = copies.dtype_of(copy)
    result = Tensor._from_kernel(get_backend(device("cuda", rt.index)), copy, Meta(tuple(copy.shape), dtype))
    collectives.all_reduce(result, ReduceOp[reduce_op], group=_group_of(group))
    return copy


def all_reduce(tensor, reduceOp: ReduceOp | str = ReduceOp.SUM, group=None):  # noqa: N803 - PyTorch's name
    """A new tensor holding ``tensor`` reduced over ``group``'s ranks (``tensor`` is left as it is).

    Recorded as one node under ``munet.compile``; not differentiable (use
    ``munet.distributed.nn.functional.all_reduce`` for a differentiable sum).
    """
    pg = resolve_group(group, "all_reduce")
    if pg is None:
        raise ValueError("all_reduce: this process is not a member of the group")
    name = reduceOp.name if isinstance(reduceOp, ReduceOp) else str(reduceOp).upper()
    if pg.on_nccl(tensor):
        return apply(all_reduce_op, tensor.detach(), reduce_op=name, group=_group_key(pg))
    host = to_device(tensor.detach(), "cpu")
    return to_device(apply(all_reduce_op, host, reduce_op=name, group=_group_key(pg)), tensor.device)
