"""Device telemetry through NVML (``pynvml``, from the ``nvidia-ml-py`` package), as ``torch.cuda``
reads it: ``utilization``, ``memory_usage``, ``temperature``, ``power_draw``, ``clock_rate``, ``device_memory_used``,
``list_gpu_processes``.

NVML is optional: without ``pynvml`` these raise the ModuleNotFoundError PyTorch raises
(``list_gpu_processes`` returns PyTorch's message instead). A device index is MuNet's (after
``CUDA_VISIBLE_DEVICES``), mapped to NVML's through the device's PCI bus id.
"""

from __future__ import annotations

from munet.backends.cuda import discovery

_MISSING = "nvidia-ml-py does not seem to be installed or it can't be imported."


def _pynvml():
    try:
        import pynvml
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(_MISSING) from error
    pynvml.nvmlInit()
    return pynvml


def _handle(pynvml, device):
    index = discovery.device_index(device)
    bus_id = discovery.cupy_module().cuda.runtime.deviceGetPCIBusId(index)
    return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode() if isinstance(bus_id, str) else bus_id)


def utilization(device=None) -> int:
    """Percent of the past sample period in which a kernel ran on the device (``nvidia-smi``'s figure)."""
    nvml = _pynvml()
    return int(nvml.nvmlDeviceGetUtilizationRates(_handle(nvml, device)).gpu)


def memory_usage(device=None) -> int:
    """Percent of the past sample period in which device memory was read or written."""
    nvml = _pynvml()
    return int(nvml.nvmlDeviceGetUtilizationRates(_handle(nvml, device)).memory)


def temperature(device=None) -> int:
    """The GPU's temperature in degrees Celsius."""
    nvml = _pynvml()
    return int(nvml.nvmlDeviceGetTemperature(_handle(nvml, device), nvml.NVML_TEMPERATURE_GPU))


def power_draw(device=None) -> int:
    """The GPU's power draw in milliwatts."""
    nvml = _pynvml()
    return int(nvml.nvmlDeviceGetPowerUsage(_handle(nvml, device)))


def clock_rate(device=None) -> int:
    """The streaming multiprocessors' clock in MHz."""
    nvml = _pynvml()
    return int(nvml.nvmlDeviceGetClockInfo(_handle(nvml, device), nvml.NVML_CLOCK_SM))


def device_memory_used(device=None) -> int:
    """Bytes in use on the device by every process (NVML's figure, not only MuNet's)."""
    nvml = _pynvml()
    return int(nvml.nvmlDeviceGetMemoryInfo(_handle(nvml, device)).used)


def list_gpu_processes(device=None) -> str:
    """The processes using the device and their memory, one line each (PyTorch's format)."""
    try:
        nvml = _pynvml()
    except ModuleNotFoundError:
        return "pynvml module not found, please install nvidia-ml-py"
    index = discovery.device_index(device)
    procs = nvml.nvmlDeviceGetComputeRunningProcesses(_handle(nvml, index))
    lines = [f"GPU:{index}"]
    if not procs:
        lines.append("no processes are running")
    for p in procs:
        lines.append(f"process {p.pid:>10d} uses {p.usedGpuMemory / (1 << 20):12.3f} MB GPU memory")
    return "\n".join(lines)
