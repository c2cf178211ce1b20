"""A rendered CUDA kernel: its source, its parameters and its launch geometry.

Every renderer of the cuda backend (eager kernels in ``kernels_*.py``, fused kernels in
``munet/compiler/codegen/cuda.py``) returns a :class:`CudaSource`; the launcher needs nothing
else. ``source`` is one translation unit (NVRTC compiles it with ``nvrtc.compile_source``)
exporting ``extern "C" __global__ void <name>(...)`` whose parameters are ``params`` in order,
each ``(C type, name)``: a ``T *`` is a device pointer, ``long long``/``double``/... a value
passed by value. ``grid(n)`` is the number of blocks of ``block`` threads (1-D) to launch for
``n`` work items: elements for ``layout == "elements"`` (a grid-stride loop, so any grid is
correct and the rule caps it at ``MAX_BLOCKS``), outputs for ``"outputs"`` (one thread per
output, grid-stride too) and ``"rows"`` (one block per output: the kernel uses shared memory
and ``__syncthreads``) and ``"tiles"`` (one block per output tile, ``n`` the number of tiles:
the implicit-GEMM convolution). ``shared_memory`` is True for ``"rows"`` and ``"tiles"`` kernels
(the CPU emulation, ``munet/backends/cuda/emulation.py``, runs their blocks' threads concurrently).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_BLOCKS = 65535 * 8  # a grid-stride loop needs no more blocks than the device keeps busy


@dataclass(frozen=True)
class CudaSource:
    name: str
    source: str
    params: tuple  # ((C type, parameter name), ...) in order
    block: int = 256
    layout: str = "elements"  # "elements", "outputs" (grid-stride), "rows" (a block per output), "tiles" (per tile)

    @property
    def shared_memory(self) -> bool:
        return self.layout in ("rows", "tiles")

    def grid(self, n: int) -> int:
        """Blocks to launch for ``n`` work items (at least one, so a size-0 launch is legal)."""
        if self.layout in ("rows", "tiles"):
            return max(int(n), 1)
        return max(1, min(-(-int(n) // self.block), MAX_BLOCKS))


def kernel_head(name: str, params, count: str) -> list[str]:
    """The opening lines of a hand-written grid-stride kernel: ``extern "C" __global__ void name(...)``
    over ``params`` and a loop of ``long long i`` over ``[0, count)`` (close both braces after the body)."""
    signature = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{p}" for t, p in params)
    return [
        f'extern "C" __global__ void {name}({signature}) {{',
        f"  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {count};"
        " i += (long long)blockDim.x * gridDim.x) {",
    ]


def offsets(position: str, sizes: str, rank: int, families) -> list[str]:
    """Kernel-body lines declaring ``at_<f>``: the offset of row-major ``position`` over ``rank`` dims of
    sizes ``<sizes>0, <sizes>1, ...`` through each stride family ``f`` (parameters ``<f>0, <f>1, ...``)."""
    lines = [f"    long long rem = {position}, " + ", ".join(f"at_{f} = 0" for f in families) + ";"]
    for d in reversed(range(rank)):
        adds = " ".join(f"at_{f} += c * {f}{d};" for f in families)
        lines.append(f"    {{ const long long c = rem % {sizes}{d}; rem /= {sizes}{d}; {adds} }}")
    return lines
