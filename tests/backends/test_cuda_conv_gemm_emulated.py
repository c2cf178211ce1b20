"""The implicit-GEMM convolution kernel (``munet/backends/cuda/kernels_conv_gemm.py``) under the CPU
emulation: every variant (4 dtypes x 1-3 spatial dims x transposed) built in one C++ library and
launched on NumPy buffers over geometries chosen for the kernel's corners (stride, per-side padding,
dilation, groups and depthwise, batch 1, single channels, operands read through non-contiguous
strides, and rows, columns and reductions that are not multiples of the tile), against PyTorch in
float64 within the summation bound (``cuda_cases.assert_within_sum_bound``); and the rule
``kernels_conv.choose_kernel`` dispatches by. NVRTC compiles the same variants for sm_80 and sm_90
(``test_cuda_nvrtc.py``); the eager path and the gradients are in ``test_cuda_conv_emulated.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from munet.backends.cuda import emulation
from munet.backends.cuda import kernels_conv as C
from munet.backends.cuda import kernels_conv_gemm as G
from munet.ops.conv import conv_output_spatial
from tests.backends import fake_cupy
from tests.backends.cuda_cases import assert_within_sum_bound, np_dtype, torch_convolution

fake_cupy.skip_without_emulation()

VARIANTS = [(dt, nd, t) for dt in G.DTYPES for nd in (1, 2, 3) for t in (False, True)]


@pytest.fixture(scope="module")
def emulator():
    return emulation.Emulator([G.render_conv_gemm(*v) for v in VARIANTS])


def _case(x, w, stride=1, padding=0, dilation=1, groups=1, transposed=False, output_padding=0, layout="plain"):
    nd = len(w) - 2

    def per_dim(v):
        return tuple(v) if isinstance(v, tuple) else (v,) * nd

    pads = tuple(p if isinstance(p, tuple) else (p, p) for p in per_dim(padding))
    geometry = dict(stride=per_dim(stride), padding=pads, dilation=per_dim(dilation), groups=groups)
    return x, w, {**geometry, "transposed": transposed, "output_padding": per_dim(output_padding)}, layout


# x shape, w shape, geometry; layout "strided": x channels-last and w every other filter of a larger one
CASES = {
    "2d, two row and two column tiles, K remainder": _case((2, 9, 7, 6), (70, 9, 3, 3), padding=1),
    "2d stride, dilation, per-side padding": _case((1, 5, 9, 8), (17, 5, 2, 3), (2, 1), ((1, 0), (2, 1)), (1, 2)),
    "2d groups, strided operands": _case((2, 6, 5, 5), (12, 2, 3, 3), groups=3, layout="strided"),
    "2d depthwise": _case((1, 4, 6, 5), (4, 1, 3, 3), padding=1, groups=4),
    "2d single channels, batch 3": _case((3, 1, 5, 4), (1, 1, 2, 2)),
    "2d 1x1, 66 filters": _case((1, 20, 3, 5), (66, 20, 1, 1)),
    "1d stride 2, groups": _case((2, 16, 9), (18, 8, 3), 2, 1, groups=2, layout="strided"),
    "3d": _case((1, 3, 4, 5, 3), (9, 3, 2, 3, 1), (1, 2, 1), ((1, 0), (0, 1), (0, 0))),
    "transposed 2d stride 2, output padding": _case(
        (2, 9, 4, 5), (9, 66, 3, 3), 2, 1, transposed=True, output_padding=1
    ),
    "transposed 2d dilation, per-side padding, groups": _case(
        (1, 6, 5, 4), (6, 3, 3, 2), (1, 2), ((2, 0), (0, 1)), (2, 1), 2, True, layout="strided"
    ),
    "transposed 2d depthwise": _case((1, 3, 4, 4), (3, 1, 3, 3), 2, groups=3, transposed=True),
    "transposed 1d": _case((2, 4, 6), (4, 5, 3), 3, 2, 2, transposed=True, output_padding=2),
    "transposed 3d, strided operands": _case(
        (1, 4, 3, 2, 3), (4, 6, 2, 2, 3), (2, 1, 1), 1, transposed=True, layout="strided"
    ),
}


def _operands(x_shape, w_shape, dtype, layout, seed):
    rng = np.random.default_rng(seed)
    if layout == "strided":  # channels-last input, every other filter of a weight twice as tall
        x = np.moveaxis(rng.standard_normal((x_shape[0], *x_shape[2:], x_shape[1])), -1, 1)
        w = rng.standard_normal((2 * w_shape[0], *w_shape[1:]))[::2]
    else:
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    return x.astype(np_dtype(dtype)), w.astype(np_dtype(dtype))


def _strides(a) -> tuple:
    return tuple(s // a.itemsize for s in a.strides)


def _run_gemm(emulator, dtype, x, w, geometry) -> np.ndarray:
    nd = w.ndim - 2
    spatial = conv_output_spatial(x.shape[2:], w.shape[2:], *(geometry[k] for k in ("stride", "padding", "dilation")),
                                  geometry["transposed"], geometry["output_padding"])  # fmt: skip
    cg, og = C.channels_per_group(x.shape, w.shape, geometry["groups"], geometry["transposed"])
    out = np.full((x.shape[0], og * geometry["groups"], *spatial), np.nan, x.dtype)
    values = C.argument_values(
        (x, w, out), (x.shape, w.shape, out.shape), (_strides(x), _strides(w)),
        **{k: v for k, v in geometry.items() if k != "output_padding"},
    )  # fmt: skip
    src = G.render_conv_gemm(dtype, nd, geometry["transposed"])
    emulator.run(src, G.tiles(x.shape[0] * math.prod(spatial), og, geometry["groups"]), values)
    return out


@pytest.mark.parametrize("dtype", G.DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_every_variant_matches_torch_within_the_summation_bound(emulator, case, dtype):
    x_shape, w_shape, geometry, layout = CASES[case]
    x, w = _operands(x_shape, w_shape, dtype, layout, seed=len(case))
    got = _run_gemm(emulator, dtype, x, w, geometry)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    reference = torch_convolution(x64, w64, **geometry)
    magnitude = torch_convolution(np.abs(x64), np.abs(w64), **geometry)
    cg, _ = C.channels_per_group(x.shape, w.shape, geometry["groups"], geometry["transposed"])
    assert_within_sum_bound(got, reference, magnitude, cg * math.prod(w.shape[2:]), dtype, case)


def test_the_dispatch_rule():
    # ResNet's 3x3 and 1x1 convolutions, their input gradients and (small batch) weight gradients
    assert C.choose_kernel(rows=32 * 56 * 56, og=64, groups=1, kdim=64 * 9) == "gemm"
    assert C.choose_kernel(rows=32 * 56 * 56, og=256, groups=1, kdim=64) == "gemm"
    assert C.choose_kernel(rows=64 * 9, og=64, groups=1, kdim=1 * 56 * 56) == "gemm"
    # the RGB stem: 3 channels, but a 7x7 window fills the K steps
    assert C.choose_kernel(rows=112 * 112, og=64, groups=1, kdim=3 * 49) == "gemm"
    # depthwise and few-filter convolutions fill a few of a tile's 64 columns
    assert C.choose_kernel(rows=56 * 56, og=1, groups=64, kdim=9) == "direct"
    assert C.choose_kernel(rows=56 * 56, og=4, groups=1, kdim=64 * 9) == "direct"
    # beyond 32-bit reductions or grids only the direct kernel runs
    assert C.choose_kernel(rows=64, og=64, groups=1, kdim=2**31) == "direct"
    assert C.choose_kernel(rows=2**31 * 64, og=64, groups=1, kdim=64) == "direct"
    # the threshold itself: exactly MIN_FILL of the issued multiply-adds real
    assert C.choose_kernel(rows=64, og=8, groups=1, kdim=16) == "gemm"
    assert C.choose_kernel(rows=64, og=7, groups=1, kdim=16) == "direct"
