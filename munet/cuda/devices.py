"""Device queries and selection of ``munet.cuda`` (``is_available``, ``set_device``, ``device(...)``).

``is_available()`` and ``device_count()`` never raise: without CuPy, a driver or a GPU they answer
False and 0. The other queries raise :class:`munet.DeviceError` saying which of those is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from munet.backends.cuda import discovery

_MIB = 1 << 20

has_half = True  # float16 tensors and kernels exist on cuda
has_magma = False  # MuNet's linear algebra does not use MAGMA


def device_count() -> int:
    """The number of visible CUDA devices (0 without CuPy, a driver or a GPU)."""
    return len(discovery.device_names())


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    """Whether a CUDA device was found and set up in this process (asks nothing of the driver)."""
    return is_available()


def init() -> None:
    """Find the CUDA devices now (MuNet does it at the first use anyway); raises without one."""
    discovery.cupy_module()


def current_device() -> int:
    """The index of the calling thread's current CUDA device (what ``device="cuda"`` means)."""
    return discovery.current_index()


def set_device(device) -> None:
    """Make ``device`` (an index, ``"cuda:1"`` or a ``munet.device``) the current CUDA device of this
    thread; a negative index does nothing, as in PyTorch."""
    if isinstance(device, int) and not isinstance(device, bool) and device < 0:
        return
    discovery.cupy_module().cuda.Device(discovery.device_index(device)).use()


class device:  # noqa: N801 - PyTorch's name
    """``with munet.cuda.device(1):`` makes cuda:1 the current device inside the block (``None`` or
    -1: the block changes nothing)."""

    def __init__(self, device):
        self.idx = -1 if device is None else device if isinstance(device, int) else discovery.device_index(device)
        self._previous = None

    def __enter__(self):
        if self.idx >= 0:
            self._previous = current_device()
            set_device(self.idx)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            set_device(self._previous)
            self._previous = None


class device_of(device):  # noqa: N801 - PyTorch's name
    """``with munet.cuda.device_of(t):``: the current device is ``t``'s inside the block (a cpu
    tensor changes nothing)."""

    def __init__(self, obj):
        dev = obj.device
        super().__init__(dev.index if dev.type == "cuda" else -1)


@dataclass(frozen=True)
class CudaDeviceProperties:
    """What ``get_device_properties`` returns (PyTorch's field names)."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    L2_cache_size: int  # noqa: N815 - PyTorch's name
    warp_size: int
    max_threads_per_multi_processor: int
    is_integrated: bool
    is_multi_gpu_board: bool

    def __repr__(self) -> str:
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // _MIB}MB, multi_processor_count={self.multi_processor_count}, "
            f"L2_cache_size={self.L2_cache_size // _MIB}MB)"
        )


def get_device_properties(device=None) -> CudaDeviceProperties:
    index = discovery.device_index(device)
    props = discovery.cupy_module().cuda.runtime.getDeviceProperties(index)
    name = props["name"]
    return CudaDeviceProperties(
        name=name.decode() if isinstance(name, bytes) else str(name),
        major=int(props["major"]),
        minor=int(props["minor"]),
        total_memory=int(props["totalGlobalMem"]),
        multi_processor_count=int(props["multiProcessorCount"]),
        L2_cache_size=int(props.get("l2CacheSize", 0)),
        warp_size=int(props.get("warpSize", 32)),
        max_threads_per_multi_processor=int(props.get("maxThreadsPerMultiProcessor", 0)),
        is_integrated=bool(props.get("integrated", 0)),
        is_multi_gpu_board=bool(props.get("isMultiGpuBoard", 0)),
    )


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    """``(major, minor)`` compute capability, e.g. ``(9, 0)`` for an H100/H200."""
    props = get_device_properties(device)
    return props.major, props.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current device runs bfloat16 matmuls on tensor cores (compute capability 8.0 or
    newer); False without CUDA, as in PyTorch. MuNet emulates nothing, so ``including_emulation``
    does not change the answer."""
    if not is_available():
        return False
    return get_device_capability()[0] >= 8


def is_tf32_supported() -> bool:
    """Whether the current device has TF32 tensor cores (compute capability 8.0 or newer)."""
    return is_bf16_supported()


def can_device_access_peer(device, peer_device) -> bool:
    """Whether ``device`` can read and write ``peer_device``'s memory directly (peer access)."""
    index, peer = discovery.device_index(device), discovery.device_index(peer_device)
    return bool(discovery.cupy_module().cuda.runtime.deviceCanAccessPeer(index, peer))


def get_arch_list() -> list[str]:
    """The architectures MuNet can compile kernels for: NVRTC's (``sm_XY``); ``[]`` without CUDA.
    MuNet compiles every kernel at run time for the device's own architecture."""
    if not is_available():
        return []
    from munet.backends.cuda import nvrtc

    return [f"sm_{arch}" for arch in nvrtc.supported_archs()]


def get_gencode_flags() -> str:
    """``get_arch_list`` as ``-gencode`` flags (``""`` without CUDA), as PyTorch prints them."""
    return " ".join(f"-gencode compute=compute_{a[3:]},code=sm_{a[3:]}" for a in get_arch_list())


def current_blas_handle() -> int:
    """The cuBLAS handle of the current device and thread (CuPy's, which MuNet's matmuls use)."""
    cuda = discovery.cupy_module().cuda
    with cuda.Device(discovery.current_index()):
        return int(cuda.device.get_cublas_handle())
