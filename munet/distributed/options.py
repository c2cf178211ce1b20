"""torch.distributed's option records for a ProcessGroup's own methods (``pg.allreduce([t], opts)``).

Each has PyTorch's fields and defaults; ``timeout`` left at its unset value (-1 ms) means the
group's timeout. ``asyncOp`` is accepted and ignored: a ProcessGroup method always returns a
``Work``. ``rootTensor`` picks a tensor of a list, and MuNet's methods take one tensor, so it
must stay 0.
"""

from __future__ import annotations

from datetime import timedelta

from munet.distributed.process_group import ReduceOp

UNSET_TIMEOUT = timedelta(milliseconds=-1)


class _Options:
    _fields: dict = {}

    def __init__(self):
        for name, default in self._fields.items():
            setattr(self, name, list(default) if isinstance(default, list) else default)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self._fields)})"


_COMMON = {"timeout": UNSET_TIMEOUT, "asyncOp": True}


class AllreduceOptions(_Options):
    _fields = {"reduceOp": ReduceOp.SUM, **_COMMON}


class AllreduceCoalescedOptions(AllreduceOptions):
    pass


class BroadcastOptions(_Options):
    _fields = {"rootRank": 0, "rootTensor": 0, **_COMMON}


class ReduceOptions(_Options):
    _fields = {"reduceOp": ReduceOp.SUM, "rootRank": 0, "rootTensor": 0, **_COMMON}


class GatherOptions(_Options):
    _fields = {"rootRank": 0, **_COMMON}


class ScatterOptions(_Options):
    _fields = {"rootRank": 0, **_COMMON}


class ReduceScatterOptions(_Options):
    _fields = {"reduceOp": ReduceOp.SUM, **_COMMON}


class AllToAllOptions(_Options):
    _fields = dict(_COMMON)


class BarrierOptions(_Options):
    _fields = {"device_ids": [], "device": None, **_COMMON}


def option_timeout(opts, default: timedelta) -> timedelta:
    """The timeout ``opts`` asks for, else ``default`` (the group's)."""
    if opts is None or opts.timeout < timedelta(0):
        return default
    return opts.timeout


def single_tensor(tensors, where: str):
    """A method's tensor argument: one tensor, or PyTorch's list of one."""
    if isinstance(tensors, (list, tuple)):
        if len(tensors) != 1:
            raise ValueError(f"ProcessGroup.{where}: expected one tensor (a list of one), got {len(tensors)}")
        return tensors[0]
    return tensors
