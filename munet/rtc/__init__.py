"""User kernels compiled at run time and launched on MuNet tensors (MXNet's ``mxnet.rtc``).

- :class:`CudaModule`: CUDA C compiled by NVRTC at construction (no GPU needed to compile),
  launched on cuda tensors on MuNet's current stream;
- :class:`CModule`: C compiled by the system compiler, called on cpu tensors;
- :class:`WGSLModule`: WGSL compute shaders dispatched on vulkan tensors;
- :class:`Rtc`: MXNet's older form (a CUDA body over named arrays).

Every module's ``get_kernel(name, signature)`` parses a C-style signature (``signature.py``);
launches check their arguments, bump the versions of written tensors, and are graph nodes under
``munet.compile`` (``launch.py``). See docs/rtc.md.
"""

from munet.rtc.c import CKernel, CModule
from munet.rtc.cuda import CudaKernel, CudaModule, compile_options
from munet.rtc.legacy import Rtc
from munet.rtc.signature import TYPES
from munet.rtc.wgsl import WGSLKernel, WGSLModule

__all__ = [
    "TYPES",
    "CKernel",
    "CModule",
    "CudaKernel",
    "CudaModule",
    "Rtc",
    "WGSLKernel",
    "WGSLModule",
    "compile_options",
]
