"""The default process group and the groups made from it: ``init_process_group`` and friends.

Two ways in. Processes started by ``mpirun`` (or ``munet-run``) are already known to MPI, which
gives the rank and world size; ``init_process_group`` checks what the script says (arguments,
or ``RANK``/``WORLD_SIZE``) against it and builds the default group on a private duplicate of
``MPI.COMM_WORLD``. Processes started separately, as torchrun starts them (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), or given ``store=``/a ``tcp://`` or
``file://`` ``init_method``, meet through a store (munet/distributed/rendezvous.py) and are
joined by MuNet's TCP transport (munet/distributed/tcp_comm.py); that is the ``"gloo"``
backend. ``"gloo"`` under ``mpirun`` takes the MPI path, so CPU scripts written for gloo run
either way.
"""

from __future__ import annotations

import enum
import functools
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
    debug = None  # the level set_debug_level (or set_debug_level_from_env) chose
    env_debug = None  # the environment's level, read at the first collective after init_process_group
    inits = 0  # default groups made so far in this process
    watchdog = None  # the MPI job's census (munet/distributed/watchdog.py), while a default group exists


def is_available() -> bool:
    """True: the TCP transport needs nothing beyond Python (MPI needs mpi4py, ``is_mpi_available``)."""
    return True


def is_mpi_available() -> bool:
    """True when mpi4py is installed (``pip install munet[dist]``)."""
    return importlib.util.find_spec("mpi4py") is not None


def is_gloo_available() -> bool:
    return True


def is_nccl_available() -> bool:
    """True when CuPy, a CUDA device and CuPy's NCCL binding (the NCCL library) are all there."""
    from munet.distributed.nccl_comm import is_available as nccl_is_available

    return nccl_is_available()


def is_ucc_available() -> bool:
    return False


def is_xccl_available() -> bool:
    return False


def is_backend_available(backend: str) -> bool:
    """Whether ``init_process_group(backend)`` can run here: gloo always, mpi with mpi4py, nccl with CuPy,
    a CUDA device and NCCL (``is_nccl_available``), nothing else."""
    name = str(backend).lower()
    if name == Backend.NCCL:
        return is_nccl_available()
    return name == Backend.GLOO or (name == Backend.MPI and is_mpi_available())


def get_default_backend_for_device(device) -> str:
    """PyTorch's default backend for a device type: ``"gloo"`` for cpu (and MuNet's vulkan, carried
    through host memory), ``"nccl"`` for cuda."""
    kind = str(getattr(device, "type", device)).split(":")[0]
    defaults = {"cpu": Backend.GLOO, "vulkan": Backend.GLOO, "cuda": Backend.NCCL}
    if kind not in defaults:
        raise ValueError(f"Default backend not registered for device : {device}")
    return defaults[kind]


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's rank on its machine: ``LOCAL_RANK`` (torchrun and munet-run set it), else ``fallback_rank``."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError(
        "LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow `get_node_local_rank` to "
        "work, assuming you are not running in a multi-device context and want the code to run locally instead."
    )


def is_torchelastic_launched() -> bool:
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def is_initialized() -> bool:
    return _World.default is not None


def get_debug_level() -> DebugLevel:
    """The level ``set_debug_level`` chose, else the environment's (``DETAIL`` when unset), as it was at
    the first ask after ``init_process_group`` (every collective asks; reading the environment costs
    microseconds; ``set_debug_level_from_env`` reads it again)."""
    level = _World.debug or _World.env_debug
    if level is None:
        level = _World.env_debug = _environment_debug_level()
    return level


def _environment_debug_level() -> DebugLevel:
    return _parse_debug_level(os.environ.get("MUNET_DISTRIBUTED_DEBUG") or os.environ.get("TORCH_DISTRIBUTED_DEBUG"))


@functools.lru_cache(maxsize=8)
def _parse_debug_level(name: str | None) -> DebugLevel:
    """The level an environment value names (unset: ``DETAIL``)."""
    name = name or "DETAIL"
    if name.upper() not in DebugLevel.__members__:
        raise ValueError(f"MUNET_DISTRIBUTED_DEBUG must be OFF, INFO or DETAIL, got {name!r}")
    return DebugLevel[name.upper()]


def set_debug_level_from_env() -> None:
    """Set the debug level from ``MUNET_DISTRIBUTED_DEBUG`` or ``TORCH_DISTRIBUTED_DEBUG`` (now)."""
    _World.debug = _environment_debug_level()


def set_debug_level(level: DebugLevel) -> None:
    if not isinstance(level, DebugLevel):
        raise TypeError(f"set_debug_level: expected a DebugLevel, got {level!r}")
    _World.debug = level


_HOST_BACKENDS = (Backend.MPI, Backend.GLOO)


def _check_backend(backend, where: str, default: str = Backend.MPI) -> str:
    """``backend`` lower-cased and checked: ``"mpi"``, ``"gloo"``, ``"nccl"``, or one backend per device
    type (``"cpu:gloo,cuda:nccl"``; nccl carries cuda tensors only). A backend naming nccl raises
    ``RuntimeError`` here when NCCL cannot run (no CuPy, no CUDA device, no NCCL library)."""
    name = (backend or default).lower().replace(" ", "")
    expected = "expected 'mpi', 'gloo', 'nccl' or one per device type such as 'cpu:gloo,cuda:nccl'"
    if ":" in name:
        pairs = [part.split(":", 1) for part in name.split(",")]
        for pair in pairs:
            if len(pair) != 2 or pair[0] not in ("cpu", "cuda") or pair[1] not in (*_HOST_BACKENDS, Backend.NCCL):
                raise ValueError(f"{where}: unknown backend {backend!r}; {expected}")
            if pair[0] == "cpu" and pair[1] == Backend.NCCL:
                raise ValueError(f"{where}: backend {backend!r}: nccl carries cuda tensors only, not cpu ones")
        if len({device for device, _ in pairs}) != len(pairs):
            raise ValueError(f"{where}: backend {backend!r} names a device type twice")
        if len({b for _, b in pairs if b != Backend.NCCL}) > 1:
            raise ValueError(f"{where}: backend {backend!r} names two host backends (gloo and mpi); name one")
    elif name not in (*_HOST_BACKENDS, Backend.NCCL):
        raise ValueError(f"{where}: unknown backend {backend!r}; {expected}")
    if Backend.NCCL in name:
        from munet.distributed.nccl_comm import nccl_module

        nccl_module(where)
    return name


def _host_backend(name: str) -> str | None:
    """The host backend a checked backend string names (None for plain ``"nccl"``: MPI under mpirun, else gloo)."""
    from munet.distributed.process_group import device_backends

    hosts = [b for b in device_backends(name).values() if b != Backend.NCCL]
    return hosts[0] if hosts else None


def _require_mpi(name: str, where: str) -> None:
    if not is_mpi_available():
        raise RuntimeError(
            f"{where}: backend {name!r} on MPI needs mpi4py; install it with `pip install munet[dist]` "
            "(ranks started separately, with MASTER_ADDR/MASTER_PORT or store=, need only backend 'gloo')"
        )


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
        "(to join processes started separately, as torchrun starts them, do not start them with mpirun)"
    )


def started_by_mpirun() -> bool:
    """True when this process is a rank of an ``mpirun`` job (Open MPI's or PMIx's variables are set)."""
    return any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"))


def _meets_through_a_store(init_method: str | None, store) -> bool:
    if store is not None:
        return True
    if started_by_mpirun():
        return False
    if init_method is not None and not init_method.startswith("env://"):
        return True
    return os.environ.get("MASTER_ADDR", "") != ""


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
    """Join the default process group.

    Under ``mpirun``, MPI knows the ranks; ``rank`` and ``world_size`` (or ``RANK``/``WORLD_SIZE``)
    are optional and must match it, and ``init_method`` is only checked for form. Otherwise the
    ranks meet through ``store`` (then ``rank`` and ``world_size`` are required) or through the
    rendezvous of ``init_method`` (``"env://"``, the default, reads torchrun's variables;
    ``"tcp://host:port"``; ``"file:///path"``), and talk over TCP (backend ``"gloo"``).
    """
    where = "init_process_group"
    if _World.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if timeout is not None and not isinstance(timeout, timedelta):
        raise TypeError(f"{where}: timeout must be a datetime.timedelta, got {type(timeout).__name__}")
    if init_method is not None and store is not None:
        raise ValueError("Cannot specify both init_method and store.")
    if init_method is not None and not isinstance(init_method, str):
        raise TypeError(f"{where}: init_method must be a URL string, got {type(init_method).__name__}")
    timeout = timeout or default_pg_timeout
    index = _device_index(device_id, where)
    if _meets_through_a_store(init_method, store):
        name = _check_backend(backend, where, Backend.GLOO)
        pg = _join_over_tcp(name, init_method, timeout, world_size, rank, store, index)
    else:
        pg = _join_mpi_job(_check_backend(backend, where), init_method, timeout, world_size, rank, index)
    if index is not None and pg.uses_nccl:
        pg.nccl_comm(index, where)  # as PyTorch does with device_id: the communicator is made now
    _World.default = pg
    _World.groups = [pg]
    _World.env_debug = None  # read the environment again for this group
    _World.inits += 1
    GroupMember.WORLD = pg


def _device_index(device_id, where: str) -> int | None:
    """The cuda device index of ``init_process_group``'s ``device_id`` (a ``munet.device``, ``"cuda:1"`` or an int)."""
    if device_id is None:
        return None
    if isinstance(device_id, int) and not isinstance(device_id, bool):
        return device_id
    from munet._device import as_device

    dev = as_device(device_id)
    if dev.type != "cuda":
        raise ValueError(f"{where}: device_id must be a cuda device, got {dev}")
    return 0 if dev.index is None else dev.index


def _join_mpi_job(name: str, init_method, timeout: timedelta, world_size: int, rank: int, index) -> ProcessGroup:
    where = "init_process_group"
    _require_mpi(name, where)
    if init_method is not None and not init_method.startswith(("env://", "tcp://", "file://")):
        raise ValueError(
            f"{where}: init_method must be 'env://', 'tcp://host:port' or 'file://path', got {init_method!r}"
        )
    set_mpi_defaults()
    from mpi4py import MPI

    from munet.distributed.mpi_comm import MpiComm
    from munet.distributed.watchdog import Watchdog

    world = MPI.COMM_WORLD
    _setting(world_size, "WORLD_SIZE", world.Get_size(), where)
    _setting(rank, "RANK", world.Get_rank(), where)
    _World.watchdog = Watchdog(world.Dup())
    return ProcessGroup(MpiComm(world.Dup()), name, list(range(world.Get_size())), timeout, index, _World.watchdog)


def _join_over_tcp(
    name: str, init_method, timeout: timedelta, world_size: int, rank: int, store, index
) -> ProcessGroup:
    from munet.distributed.rendezvous import rendezvous
    from munet.distributed.store import PrefixStore
    from munet.distributed.tcp_comm import TcpComm, TcpTransport

    where = "init_process_group"
    if _host_backend(name) == Backend.MPI:
        raise ValueError(
            f"{where}: backend {name!r} needs ranks started by mpirun or munet-run; ranks started separately "
            "(torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, init_method='tcp://...' or 'file://...', or "
            "store=) talk over TCP: use backend='gloo' (or 'nccl' for cuda tensors)"
        )
    if store is None:
        store, rank, world_size = next(rendezvous(init_method or "env://", rank, world_size, timeout=timeout))
    elif world_size is None or world_size <= 0:
        raise ValueError(f"{where}: world_size must be positive if using store, got {world_size}")
    elif rank is None or rank < 0:
        raise ValueError(f"{where}: rank must be non-negative if using store, got {rank}")
    if not 0 <= rank < world_size:
        raise ValueError(f"{where}: rank {rank} is not in [0, world_size={world_size})")
    # a store outlives one group (destroy, then init again): each init's keys get their own prefix
    transport = TcpTransport(rank, world_size, PrefixStore(f"default_pg/{_World.inits}", store), timeout)
    ranks = list(range(world_size))
    return ProcessGroup(TcpComm(transport, 0, ranks, timeout), name, ranks, timeout, index)


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Free ``group`` (all groups, and the default one, when ``None``)."""
    if group is None or group is _World.default:
        for pg in _World.groups:
            pg.free()
        if _World.watchdog is not None:
            _World.watchdog.free()
            _World.watchdog = None
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
    if group is None and _World.default is not None:  # the common case (the default group is never destroyed alone)
        return _World.default
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
    world = default_group("new_group")
    return _subgroup(world, range(world.size()) if ranks is None else ranks, timeout, backend, "new_group")


def _subgroup(parent: ProcessGroup, ranks, timeout, backend, where: str):
    """The group of global ``ranks`` (members of ``parent``), made by every rank of ``parent``."""
    members = sorted(int(r) for r in ranks)
    if len(set(members)) != len(members) or any(r not in parent.ranks for r in members):
        raise ValueError(f"{where}: ranks must be distinct ranks of the group {parent.ranks}, got {list(ranks)}")
    name = parent.backend if backend is None else _check_backend(backend, where)
    comm = parent.comm.subgroup([parent.ranks.index(r) for r in members])
    if comm is None:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, name, members, timeout or parent.timeout, parent.device_id, parent.watchdog)
    _World.groups.append(pg)
    return pg


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None, group_desc=None):
    """One group per list of global ranks (every rank calls it); returns (this rank's group or None, all groups)."""
    where = "new_subgroups_by_enumeration"
    world = default_group(where)
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    seen: set = set()
    for ranks in ranks_per_subgroup_list:
        for r in ranks:
            if r in seen:
                raise ValueError(f"Rank {r} has appeared in both subgroup {ranks} and another subgroup")
            seen.add(r)
    groups = [_subgroup(world, ranks, timeout, backend, where) for ranks in ranks_per_subgroup_list]
    mine = next((g for g in groups if g is not GroupMember.NON_GROUP_MEMBER), None)
    return mine, groups


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Split ``group`` (the default group) into groups of ``group_size`` consecutive ranks; every rank of it
    calls this. Returns (this rank's group, all groups)."""
    where = "new_subgroups"
    parent = resolve_group(group, where)
    if parent is None:
        raise ValueError(f"{where}: this process is not a member of the group")
    if group_size is None:
        from munet.cuda import device_count

        group_size = device_count() or None  # PyTorch's default: the machine's CUDA devices
    if group_size is None:
        raise ValueError(
            f"{where}: the default group size is the number of CUDA devices, and CUDA is unavailable; pass group_size"
        )
    if group_size <= 0:
        raise ValueError("The arg 'group_size' must be greater than 0")
    if group_size > parent.size():
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world size ({parent.size()})")
    if parent.size() % group_size:
        raise ValueError(f"The world size ({parent.size()}) must be divisible by 'group_size' ({group_size})")
    chunks = [parent.ranks[i : i + group_size] for i in range(0, parent.size(), group_size)]
    groups = [_subgroup(parent, ranks, timeout, backend, where) for ranks in chunks]
    return next(g for g in groups if g is not GroupMember.NON_GROUP_MEMBER), groups


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None, backend=None):
    """Split ``parent_pg`` (the default group) into the disjoint groups ``split_ranks`` (lists of global
    ranks); every rank of the parent calls it. Returns this rank's group, or None when it is in none."""
    where = "split_group"
    parent = resolve_group(parent_pg, where)
    if parent is None:
        return None
    if not split_ranks:
        raise ValueError("split_ranks cannot be None or empty")
    flat = [r for ranks in split_ranks for r in ranks]
    if len(flat) != len(set(flat)):
        raise ValueError(f"{where}: split_ranks must be disjoint, got {split_ranks}")
    groups = [_subgroup(parent, ranks, timeout, backend, where) for ranks in split_ranks]
    return next((g for g in groups if g is not GroupMember.NON_GROUP_MEMBER), None)


def get_pg_count() -> int:
    """How many process groups (the default one included) exist now."""
    return len(_World.groups)


def get_backend_config(group: ProcessGroup | None = None) -> str:
    """PyTorch's device-to-backend string: ``"cpu:gloo"`` for a host backend (it carries vulkan and cuda
    tensors too, through host memory), ``"cuda:nccl"`` for nccl, the string given for one naming devices."""
    name = get_backend(group)
    if ":" in name:
        return name
    return "cuda:nccl" if name == Backend.NCCL else f"cpu:{name}"
