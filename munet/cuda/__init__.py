"""``munet.cuda``: the CUDA devices as PyTorch scripts use ``torch.cuda``.

>>> munet.cuda.is_available()
False
>>> munet.cuda.manual_seed(0)        # works without a GPU
>>> munet.zeros(2, device="cuda")    # raises munet.DeviceError: no CUDA device or driver was found ...

The backend itself (memory pool, streams, copies, kernels) is ``munet/backends/cuda``; docs/cuda.md
describes both.
"""

from munet._compat import CUDA_LEGACY_TYPES as _TYPES
from munet._device import OutOfMemoryError
from munet.backends.cuda.streams import (
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    get_stream_from_external,
    set_stream,
    stream,
    synchronize,
)
from munet.cuda import amp
from munet.cuda.devices import (
    can_device_access_peer,
    current_blas_handle,
    current_device,
    device,
    device_count,
    device_of,
    get_arch_list,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_gencode_flags,
    has_half,
    has_magma,
    init,
    is_available,
    is_bf16_supported,
    is_initialized,
    is_tf32_supported,
    set_device,
)
from munet.cuda.errors import CudaError, check_error, cudart, get_sync_debug_mode, set_sync_debug_mode
from munet.cuda.graphs import (
    CUDAGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from munet.cuda.memory import (
    MemPool,
    caching_allocator_alloc,
    caching_allocator_delete,
    empty_cache,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    ipc_collect,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    use_mem_pool,
)
from munet.cuda.nvml import (
    clock_rate,
    device_memory_used,
    list_gpu_processes,
    memory_usage,
    power_draw,
    temperature,
    utilization,
)
from munet.cuda.random import (
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)

FloatTensor = _TYPES["FloatTensor"]
DoubleTensor = _TYPES["DoubleTensor"]
HalfTensor = _TYPES["HalfTensor"]
BFloat16Tensor = _TYPES["BFloat16Tensor"]
ByteTensor = _TYPES["ByteTensor"]
CharTensor = _TYPES["CharTensor"]
ShortTensor = _TYPES["ShortTensor"]
IntTensor = _TYPES["IntTensor"]
LongTensor = _TYPES["LongTensor"]
BoolTensor = _TYPES["BoolTensor"]
