"""The default process group and the groups made from it: ``init_process_group`` and friends.

Processes are started by ``mpirun`` (or ``munet-run``), so MPI already knows every rank and
the world size; ``init_process_group`` checks what the script says (arguments, or the
torchrun-style ``RANK``/``WORLD_SIZE`` variables) against it and builds the default group on
a private duplicate of ``MPI.COMM_WORLD``. ``"gloo"`` is served by the same MPI path, so CPU
scripts written for gloo run unchanged.
"""

from __future__ import annotations

import enum
import importlib.util
import os
from datetime import timedelta

from munet.distributed.process_group import ProcessGroup

default_pg_timeout = timedelta(minutes=30)

# Every collective here is MPI's non-blocking form (so waits can time out). For the all-reduce,
# Open MPI's libnbc then picks algorithms 2-40x slower than the blocking Allreduce at 1-16 MiB on
# one machine; its ring matches the blocking one (docs/perf/distributed.md). Set before MPI starts,
# unless the user chose a value; it has no effect when mpi4py was imported (MPI started) earlier.
MPI_DEFAULTS = {"OMPI_MCA_coll_libnbc_iallreduce_algorithm": "1"}


def set_mpi_defaults() -> None:
    for name, value in MPI_DEFAULTS.items():
        os.environ.setdefault(name, value)


class Backend:
    """Backend names, as ``torch.distributed.Backend``."""

    MPI = "mpi"
    GLOO = "gloo"
    NCCL = "nccl"


class DebugLevel(enum.Enum):
    """``OFF`` trusts every rank to pass matching tensors; ``INFO`` and ``DETAIL`` check each collective.

    MuNet's default is ``DETAIL``: before each collective the ranks exchange the op, dtypes and
    shapes (one small all-gather) and all raise if they differ, instead of hanging or reducing
    garbage. Set ``MUNET_DISTRIBUTED_DEBUG=OFF`` (or ``TORCH_DISTRIBUTED_DEBUG=OFF``) to skip it.
    """

    OFF = "OFF"
    INFO = "INFO"
    DETAIL = "DETAIL"


class GroupMember:
    """``GroupMember.WORLD`` is the default group; ``NON_GROUP_MEMBER`` is what a non-member gets."""

    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


group = GroupMember  # ``dist.group.WORLD``, as PyTorch spells it


class _World:
    default: ProcessGroup | None = None
    groups: list = []
    debug = None


def is_available() -> bool:
    """True when mpi4py is installed (``pip install munet[dist]``)."""
    return importlib.util.find_spec("mpi4py") is not None


def is_mpi_available() -> bool:
    return is_available()


def is_gloo_available() -> bool:
    return is_available()


def is_nccl_available() -> bool:
    return False


def is_torchelastic_launched() -> bool:
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def is_initialized() -> bool:
    return _World.default is not None


def get_debug_level() -> DebugLevel:
    """The level ``set_debug_level`` chose, else the environment's (``DETAIL`` when unset)."""
    if _World.debug is not None:
        return _World.debug
    name = os.environ.get("MUNET_DISTRIBUTED_DEBUG") or os.environ.get("TORCH_DISTRIBUTED_DEBUG") or "DETAIL"
    if name.upper() not in DebugLevel.__members__:
        raise ValueError(f"MUNET_DISTRIBUTED_DEBUG must be OFF, INFO or DETAIL, got {name!r}")
    return DebugLevel[name.upper()]


def set_debug_level(level: DebugLevel) -> None:
    if not isinstance(level, DebugLevel):
        raise TypeError(f"set_debug_level: expected a DebugLevel, got {level!r}")
    _World.debug = level


def _check_backend(backend, where: str) -> str:
    name = (backend or Backend.MPI).lower()
    if name == Backend.NCCL:
        raise RuntimeError(
            f"{where}: backend 'nccl' carries CUDA tensors through NCCL, but CUDA/NCCL is unavailable in this "
            "MuNet build (no cuda device is registered and MuNet has no NCCL binding yet); use backend='mpi' "
            "or 'gloo' for cpu and vulkan tensors"
        )
    if name not in (Backend.MPI, Backend.GLOO):
        raise ValueError(f"{where}: unknown backend {backend!r}; expected 'mpi', 'gloo' or 'nccl'")
    if not is_available():
        raise RuntimeError(f"{where}: backend {name!r} needs mpi4py; install it with `pip install munet[dist]`")
    return name


def _setting(argument: int, variable: str, mpi_value: int, where: str) -> int:
    """The value a script asked for (argument, else environment), checked against MPI's."""
    wanted = argument if argument is not None and argument >= 0 else None
    source = "argument"
    if wanted is None and os.environ.get(variable, "") != "":
        wanted, source = int(os.environ[variable]), f"environment variable {variable}"
    if wanted is None or wanted == mpi_value:
        return mpi_value
    raise ValueError(
        f"{where}: {variable.lower()}={wanted} (from the {source}) but MPI started this process as "
        f"{variable.lower()}={mpi_value}; start every rank with `mpirun -n N` or `munet-run -n N script.py` "
        "(joining processes started separately, as torchrun does through MASTER_ADDR/MASTER_PORT, is not supported)"
    )


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Join the default process group of the processes ``mpirun`` started.

    ``rank`` and ``world_size`` (or ``RANK``/``WORLD_SIZE``) are optional; when given they must
    match what MPI says. ``init_method`` may be ``None``, ``"env://"`` or a ``tcp://``/``file://``
    URL: MPI has already met every rank, so it only names how a torchrun script would have.
    """
    where = "init_process_group"
    name = _check_backend(backend, where)
    if _World.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if store is not None:
        raise ValueError(f"{where}: store= is not supported; MuNet's ranks meet through mpirun, not a Store")
    if init_method is not None and not init_method.startswith(("env://", "tcp://", "file://")):
        raise ValueError(
            f"{where}: init_method must be 'env://', 'tcp://host:port' or 'file://path', got {init_method!r}"
        )
    if timeout is not None and not isinstance(timeout, timedelta):
        raise TypeError(f"{where}: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    set_mpi_defaults()
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    _setting(world_size, "WORLD_SIZE", world.Get_size(), where)
    _setting(rank, "RANK", world.Get_rank(), where)
    comm = world.Dup()
    pg = ProcessGroup(comm, name, list(range(world.Get_size())), timeout or default_pg_timeout)
    _World.default = pg
    _World.groups = [pg]
    GroupMember.WORLD = pg


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Free ``group`` (all groups, and the default one, when ``None``)."""
    if group is None or group is _World.default:
        for pg in _World.groups:
            pg.free()
        _World.groups = []
        _World.default = None
        GroupMember.WORLD = None
        return
    if group in _World.groups:
        _World.groups.remove(group)
        group.free()


def default_group(where: str) -> ProcessGroup:
    if _World.default is None:
        raise ValueError(
            f"{where}: Default process group has not been initialized, please make sure to call init_process_group."
        )
    return _World.default


def resolve_group(group, where: str):
    """The ProcessGroup an operation runs on, or None when this process is not a member."""
    pg = default_group(where) if group is None else group
    if pg is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(pg, ProcessGroup):
        raise TypeError(f"{where}: group must be a ProcessGroup from new_group(), got {type(group).__name__}")
    if pg not in _World.groups:
        raise ValueError(f"{where}: this process group was destroyed")
    return pg


def get_rank(group: ProcessGroup | None = None) -> int:
    pg = resolve_group(group, "get_rank")
    return -1 if pg is None else pg.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    pg = resolve_group(group, "get_world_size")
    return -1 if pg is None else pg.size()


def get_backend(group: ProcessGroup | None = None) -> str:
    pg = resolve_group(group, "get_backend")
    if pg is None:
        raise ValueError("get_backend: this process is not a member of the group")
    return pg.backend


def get_process_group_ranks(group: ProcessGroup) -> list[int]:
    pg = resolve_group(group, "get_process_group_ranks")
    return list(pg.ranks) if pg is not None else []


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    pg = resolve_group(group, "get_global_rank")
    if pg is None or not 0 <= group_rank < len(pg.ranks):
        raise ValueError(f"get_global_rank: group rank {group_rank} is not part of the group")
    return pg.ranks[group_rank]


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    pg = resolve_group(group, "get_group_rank")
    if pg is None:
        raise ValueError("get_group_rank: this process is not a member of the group")
    return pg.group_rank(global_rank, "get_group_rank")


def new_group(
    ranks=None,
    timeout: timedelta | None = None,
    backend=None,
    pg_options=None,
    use_local_synchronization=False,
    group_desc=None,
):
    """A group of the given global ``ranks`` (all ranks when ``None``); every rank must call it.

    Non-members get ``GroupMember.NON_GROUP_MEMBER``, as in PyTorch.
    """
    where = "new_group"
    world = default_group(where)
    size = world.size()
    members = sorted(range(size) if ranks is None else (int(r) for r in ranks))
    if len(set(members)) != len(members) or any(not 0 <= r < size for r in members):
        raise ValueError(f"{where}: ranks must be distinct ranks in [0, {size}), got {list(ranks)}")
    name = world.backend if backend is None else _check_backend(backend, where)
    from mpi4py import MPI

    everyone = world.comm.Get_group()
    chosen = everyone.Incl(members)
    comm = world.comm.Create(chosen)
    chosen.Free()
    everyone.Free()
    if comm == MPI.COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, name, members, timeout or world.timeout)
    _World.groups.append(pg)
    return pg
