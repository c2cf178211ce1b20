"""MXNet's older ``mx.rtc.Rtc(name, inputs, outputs, body)``: a CUDA kernel body over named arrays.

The body is wrapped into ``extern "C" __global__ void name(const T0 *in0, ..., T *out0, ...)``,
with each array's C type from its dtype (inputs ``const``), compiled by NVRTC at construction;
``push(inputs, outputs, grid_dims, block_dims)`` launches it on the outputs' device.

    rtc = munet.rtc.Rtc("scale", [("x", x)], [("y", y)], "y[threadIdx.x] = x[threadIdx.x] * 5.0f;")
    rtc.push([x], [y], (1, 1, 1), (10, 1, 1))
"""

from __future__ import annotations

from munet._tensor import Tensor
from munet.rtc.cuda import CudaModule
from munet.rtc.signature import TYPES

# dtype -> the first C type of the table that names it
_C_TYPE = {}
for _name, _dtype in TYPES.items():
    _C_TYPE.setdefault(_dtype, _name)

_HEADERS = {"__half": "#include <cuda_fp16.h>\n", "__nv_bfloat16": "#include <cuda_bf16.h>\n"}


class Rtc:
    """A CUDA kernel from a body over named ``inputs`` and ``outputs`` (lists of ``(name, tensor)``)."""

    def __init__(self, name: str, inputs, outputs, body: str):
        self.name = name
        args = []
        for role, pairs in (("inputs", inputs), ("outputs", outputs)):
            for pair in pairs:
                if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], Tensor)):
                    raise TypeError(f"Rtc({name}): {role} must be (name, tensor) pairs, got {pair!r}")
                c_type = _C_TYPE.get(pair[1].dtype)
                if c_type is None:
                    raise TypeError(
                        f"Rtc({name}): {role} '{pair[0]}' has dtype {pair[1].dtype.name}, not in the type table"
                    )
                args.append(f"{'const ' if role == 'inputs' else ''}{c_type} *{pair[0]}")
        self.signature = ", ".join(args)
        headers = "".join(h for t, h in _HEADERS.items() if t in self.signature)
        self.source = f'{headers}extern "C" __global__ void {name}({self.signature}) {{\n{body}\n}}\n'
        self.kernel = CudaModule(self.source).get_kernel(name, self.signature)
        self.num_inputs = len(inputs)

    def push(self, inputs, outputs, grid_dims, block_dims, shared_mem: int = 0) -> None:
        """Launch on ``inputs`` and ``outputs`` (tensors of the constructor's dtypes, on one cuda device)."""
        inputs, outputs = list(inputs), list(outputs)
        if len(inputs) != self.num_inputs:
            raise TypeError(f"Rtc({self.name}).push expects {self.num_inputs} inputs but got {len(inputs)}")
        args = inputs + outputs
        device = outputs[0].device if outputs else args[0].device if args else "cuda:0"
        self.kernel.launch(args, device, grid_dims, block_dims, shared_mem)
