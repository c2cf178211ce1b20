"""``convolution`` on cuda (1-3 spatial dims, stride, per-side padding, dilation, groups,
transposed; float32, float64, float16, bfloat16): the kernel-table entry and the choice between
its two CUDA C kernels, which take the same arguments (the GEMM two more, for split K).

- The implicit GEMM (``kernels_conv_gemm.py``): tiles of output pixels x output channels staged
  through shared memory, the default; an output of few tiles over a long reduction (a weight
  gradient) splits its K loop (``kernels_conv_gemm.splits_for``) and adds the partials after.
- The direct kernel (``kernels_conv_direct.py``): one thread per output element. It runs where the
  GEMM's tiles would be mostly empty (:func:`choose_kernel`: less than ``MIN_FILL`` of the
  multiply-adds its tiles issue are real, as in depthwise or few-filter convolutions, whose
  handful of output channels fill a few of a tile's 64 columns), and where the GEMM cannot: a
  reduction of ``2**31`` or more terms per output, or ``2**31`` or more tiles.

Transposed convolutions (so every input gradient) take the same rule: the GEMM gathers their input
through ``(p + pad - k * d) / s``, dense at stride 1, with ``prod(stride) - 1`` of every
``prod(stride)`` terms zero otherwise (the direct kernel skips the same terms one by one). Gradients
are convolutions (``munet/ops/conv.py``), so they are dispatched the same way.
"""

from __future__ import annotations

import math

from munet import _dtype as D
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


def channels_per_group(x_shape, w_shape, groups: int, transposed: bool) -> tuple:
    """``(cg, og)``: input and output channels per group."""
    return (x_shape[1] // groups, w_shape[1]) if transposed else (w_shape[1], w_shape[0] // groups)


def plan(dtype: str, x_shape, w_shape, out_shape, groups: int, transposed: bool) -> tuple:
    """``(CudaSource, work items, K splits)`` of the kernel that computes this convolution
    (``choose_kernel``; splits: ``kernels_conv_gemm.splits_for``, None for the direct kernel)."""
    nd = len(w_shape) - 2
    cg, og = channels_per_group(x_shape, w_shape, groups, transposed)
    rows, kdim = out_shape[0] * math.prod(out_shape[2:]), cg * math.prod(w_shape[2:])
    if choose_kernel(rows, og, groups, kdim) == "gemm":
        splits = gemm.splits_for(rows, og, groups, kdim)
        return gemm.render_conv_gemm(dtype, nd, transposed), gemm.tiles(rows, og, groups, splits), splits
    return render_convolution(dtype, nd, transposed), math.prod(out_shape), None


def argument_values(pointers, shapes, strides, *, stride, padding, dilation, groups, transposed) -> list:
    """The values of both kernels' parameters (``conv_params``' order): ``pointers`` of ``x``, ``w``
    and the C-contiguous output, ``shapes`` of all three, ``strides`` (in elements) of ``x`` and ``w``,
    ``padding`` per side."""
    (x_shape, w_shape, out_shape), (xs, ws) = shapes, strides
    cg, og = channels_per_group(x_shape, w_shape, groups, transposed)
    values = [*pointers, math.prod(out_shape), out_shape[1], cg, og, xs[0], xs[1], ws[0], ws[1]]
    return values + [
        *x_shape[2:], *out_shape[2:], *w_shape[2:], *stride, *(p[0] for p in padding), *dilation, *xs[2:], *ws[2:]
    ]  # fmt: skip


@kernel("convolution")
def convolution(rt, x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    from munet.backends.cuda import copies

    dtype = copies.dtype_of(x).name
    nd = w.ndim - 2
    if dtype not in DTYPES:
        raise DeviceError(f"convolution: no kernel for device '{rt.label}' (dtype {dtype}; floating dtypes only)")
    if not 1 <= nd <= 3:
        raise DeviceError(f"convolution: {nd} spatial dims; the cuda kernel supports 1 to 3")
    cg, og = channels_per_group(x.shape, w.shape, groups, transposed)
    spatial = conv_output_spatial(x.shape[2:], w.shape[2:], stride, padding, dilation, transposed, output_padding)
    out = rt.empty((x.shape[0], og * groups, *spatial), copies.dtype_of(x))
    if out.size == 0:
        return out
    if x.size == 0 or math.prod(w.shape[2:]) * cg == 0:
        out[...] = 0
        return out
    src, work, splits = plan(dtype, x.shape, w.shape, out.shape, groups, bool(transposed))
    values = argument_values(
        (x.data.ptr, w.data.ptr, out.data.ptr),
        (x.shape, w.shape, out.shape),
        (_strides(x), _strides(w)),
        stride=stride, padding=padding, dilation=dilation, groups=groups, transposed=transposed,
    )  # fmt: skip
    if splits is None:
        _run(rt, src, work, values)
        return out
    part = rt.empty((splits, *out.shape), D.float64 if dtype == "float64" else D.float32) if splits > 1 else None
    _run(rt, src, work, [*values, part.data.ptr if part is not None else 0, splits])
    if part is not None:  # the splits' partial sums, added in split order
        _run(rt, gemm.render_split_sum(dtype), out.size, [part.data.ptr, out.data.ptr, out.size, splits])
    return out


def _run(rt, src, work: int, values) -> None:
    launch.launch(rt, src, work, [(t, v) for (t, _), v in zip(src.params, values, strict=True)])
