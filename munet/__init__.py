"""MuNet: a deep-learning framework with PyTorch's habits.

``import munet as torch`` and write ordinary PyTorch code: tensors with strided views,
dtypes, autograd, ``nn``, ``optim``. See README.md and docs/.
"""

import logging as _logging

from munet import _threads  # noqa: F401 - first: sets the thread pools' wait policies before NumPy loads OpenBLAS

# Modules log to ``munet.*`` loggers; what is shown, and where, is the application's choice.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

from munet import backends as _backends  # noqa: F401 - registers the cpu device
from munet import ops as _ops
from munet._compat import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    _assert,
)
from munet._device import (
    DeviceError,
    DeviceLostError,
    OutOfMemoryError,
    device,
    devices,
    get_default_device,
    set_default_device,
)
from munet._dtype import (
    bfloat16,
    can_cast,
    dtype,
    finfo,
    float16,
    float32,
    float64,
    get_default_dtype,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from munet._dtype import (
    bool_ as bool,  # noqa: A001 - PyTorch's name
)
from munet._dtype import (
    result_type as _result_type,
)
from munet._memory_format import (
    channels_last,
    channels_last_3d,
    contiguous_format,
    layout,
    memory_format,
    preserve_format,
    sparse_coo,
    strided,
)
from munet._repr import get_printoptions, set_printoptions
from munet._tensor import Size, Tensor
from munet._threads import get_num_threads, set_num_threads
from munet.autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)

half = float16
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001
short = int16

__version__ = "0.1.0"


_ops.export(globals(), "__all__")


def result_type(tensor1, tensor2):
    return _result_type(tensor1, tensor2)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def is_floating_point(input) -> bool:
    return input.is_floating_point()


def numel(input) -> int:
    return input.numel()


from munet import _tensor_methods  # noqa: E402

_tensor_methods.bind()

from munet import (  # noqa: E402,F401
    accelerator,
    amp,
    autograd,
    cuda,
    distributions,
    fft,
    func,
    futures,
    jit,
    linalg,
    metrics,
    nn,
    onnx,
    optim,
    profiler,
    rtc,
    sparse,
    special,
    testing,
    utils,
    vulkan,
)
from munet._constants import e, inf, nan, newaxis, pi  # noqa: E402,F401
from munet._determinism import (  # noqa: E402,F401
    are_deterministic_algorithms_enabled,
    get_deterministic_debug_mode,
    is_deterministic_algorithms_warn_only_enabled,
    set_deterministic_debug_mode,
    use_deterministic_algorithms,
)
from munet._global_flags import (  # noqa: E402,F401
    get_float32_matmul_precision,
    get_num_interop_threads,
    has_lapack,
    has_mkl,
    has_spectral,
    init_num_threads,
    is_warn_always_enabled,
    set_float32_matmul_precision,
    set_flush_denormal,
    set_num_interop_threads,
    set_warn_always,
)
from munet._inplace_functions import *  # noqa: E402,F401,F403 - the function forms of in-place methods
from munet._introspection import (  # noqa: E402,F401
    get_device_module,
    is_inference,
    is_storage,
    thread_safe_generator,
    typename,
)
from munet._tensor_surface import (  # noqa: E402,F401
    get_device,
    is_distributed,
    is_nonzero,
    is_same_size,
    is_signed,
    split_with_sizes,
    unsafe_chunk,
    unsafe_split,
    unsafe_split_with_sizes,
)
from munet.amp import (  # noqa: E402,F401
    GradScaler,  # noqa: E402,F401
    autocast,
    get_autocast_dtype,
    is_autocast_enabled,
)
from munet.amp.autocast_state import (  # noqa: E402,F401
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from munet.autograd.anomaly_mode import (  # noqa: E402,F401
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_anomaly_enabled,
)
from munet.compiler import compile  # noqa: E402,F401,A004
from munet.func.vmap import vmap  # noqa: E402,F401
from munet.futures import Future  # noqa: E402,F401
from munet.nn.parallel.training_step import DataParallel  # noqa: E402,F401
from munet.nn.torch_level import *  # noqa: E402,F401,F403 - torch.* entry points of nn functions (ATen signatures)
from munet.serialization import load, save  # noqa: E402,F401
from munet.sparse import sparse_coo_tensor  # noqa: E402,F401
