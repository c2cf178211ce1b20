"""``munet.cuda``: the CUDA devices as PyTorch scripts use ``torch.cuda``.

>>> munet.cuda.is_available()
False
>>> munet.cuda.manual_seed(0)        # works without a GPU
>>> munet.zeros(2, device="cuda")    # raises munet.DeviceError: no CUDA device or driver was found ...

The backend itself (memory pool, streams, copies, kernels) is ``munet/backends/cuda``; docs/cuda.md
describes both.
"""

from munet._device import OutOfMemoryError
from munet.backends.cuda.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
    synchronize,
)
from munet.cuda import amp
from munet.cuda.devices import (
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    init,
    is_available,
    is_bf16_supported,
    is_initialized,
    is_tf32_supported,
    set_device,
)
from munet.cuda.graphs import (
    CUDAGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from munet.cuda.memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
)
from munet.cuda.random import (
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
