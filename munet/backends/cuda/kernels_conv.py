"""``convolution`` on cuda (1-3 spatial dims, stride, per-side padding, dilation, groups,
transposed; float32, float64, float16, bfloat16): the kernel-table entry and the choice between
its two CUDA C kernels, which take the same arguments.

- The implicit GEMM (``kernels_conv_gemm.py``): tiles of output pixels x output channels staged
  through shared memory, the default.
- The direct kernel (``kernels_conv_direct.py``): one thread per output element. It runs where the
  GEMM's tiles would be mostly empty (:func:`choose_kernel`: fewer than ``1 / MIN_FILL`` of the
  multiply-adds a tile issues are real, such as depthwise or few-channel convolutions, whose
  handful of output channels fill a few of a tile's 64 columns), and where the GEMM cannot: a
  reduction of ``2**31`` or more terms per output, or ``2**31`` or more tiles.

Transposed convolutions (so every input gradient) take the same rule: the GEMM gathers their input
through ``(p + pad - k * d) / s``, dense at stride 1, with ``prod(stride) - 1`` of every
``prod(stride)`` terms zero otherwise (the direct kernel skips the same terms one by one). Gradients
are convolutions (``munet/ops/conv.py``), so they are dispatched the same way.
"""

from __future__ import annotations

import math

from munet._device import DeviceError
from munet.backends.cuda import kernels_conv_gemm as gemm
from munet.backends.cuda import launch
from munet.backends.cuda.kernels_conv_direct import DTYPES, render_convolution
from munet.backends.cuda.registry import kernel
from munet.ops.conv import conv_output_spatial

MIN_FILL = 1 / 8  # the GEMM runs when at least this share of its tiles' multiply-adds are real
_LIMIT = 2**31


def choose_kernel(rows: int, og: int, groups: int, kdim: int) -> str:
    """``"gemm"`` or ``"direct"`` for ``groups`` products of ``rows x kdim`` by ``kdim x og`` (see
    the module docstring)."""
    tiles = gemm.tiles(rows, og, groups)
    if kdim >= _LIMIT or tiles >= _LIMIT:
        return "direct"
    issued = tiles * gemm.BM * gemm.BN * -(-kdim // gemm.BK) * gemm.BK
    return "gemm" if rows * og * groups * kdim >= MIN_FILL * issued else "direct"


def _strides(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides)


@kernel("convolution")
def convolution(rt, x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    from munet.backends.cuda import copies

    dtype = copies.dtype_of(x).name
    nd = w.ndim - 2
    if dtype not in DTYPES:
        raise DeviceError(f"convolution: no kernel for device '{rt.label}' (dtype {dtype}; floating dtypes only)")
    if not 1 <= nd <= 3:
        raise DeviceError(f"convolution: {nd} spatial dims; the cuda kernel supports 1 to 3")
    n, cin = x.shape[:2]
    kernel_size, spatial_in = tuple(w.shape[2:]), tuple(x.shape[2:])
    cg, og = (cin // groups, w.shape[1]) if transposed else (w.shape[1], w.shape[0] // groups)
    spatial = conv_output_spatial(spatial_in, kernel_size, stride, padding, dilation, transposed, output_padding)
    cout = og * groups
    out = rt.empty((n, cout, *spatial), copies.dtype_of(x))
    total = out.size
    if total == 0:
        return out
    kdim = math.prod(kernel_size) * cg
    if x.size == 0 or kdim == 0:
        out[...] = 0
        return out
    xs, ws = _strides(x), _strides(w)
    rows = n * math.prod(spatial)
    if choose_kernel(rows, og, groups, kdim) == "gemm":
        src, work = gemm.render_conv_gemm(dtype, nd, bool(transposed)), gemm.tiles(rows, og, groups)
    else:
        src, work = render_convolution(dtype, nd, bool(transposed)), total
    values = [x.data.ptr, w.data.ptr, out.data.ptr, total, cout, cg, og, xs[0], xs[1], ws[0], ws[1]]
    values += [*spatial_in, *spatial, *kernel_size, *stride, *(p[0] for p in padding), *dilation, *xs[2:], *ws[2:]]
    launch.launch(rt, src, work, [(t, v) for (t, _), v in zip(src.params, values, strict=True)])
    return out
