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

import numpy as np
import pytest

from munet.backends.cuda import emulation
from munet.backends.cuda import kernels_conv as C
from munet.backends.cuda import kernels_conv_gemm as G
from tests.backends import fake_cupy
from tests.backends.cuda_cases import (
    CONV_GEMM_CASES,
    CONV_SPLIT_CASES,
    CONV_SPLITS,
    assert_gemm_convolution,
    conv_operands,
    gemm_launch,
    np_dtype,
)

fake_cupy.skip_without_emulation()

VARIANTS = [(dt, nd, t) for dt in G.DTYPES for nd in (1, 2, 3) for t in (False, True)]


@pytest.fixture(scope="module")
def emulator():
    return emulation.Emulator([*(G.render_conv_gemm(*v) for v in VARIANTS), *map(G.render_split_sum, G.DTYPES)])


def _run(emulator, dtype, x, w, geometry, splits=1) -> np.ndarray:
    def empty(shape, dt):  # unwritten outputs stay NaN
        return np.full(shape, np.nan, np_dtype(dt))

    launches = gemm_launch(dtype, x, w, geometry, empty, splits)
    for src, work, values in launches:
        emulator.run(src, work, values)
    return launches[0][2][2]


@pytest.mark.parametrize("dtype", G.DTYPES)
@pytest.mark.parametrize("case", CONV_GEMM_CASES)
def test_every_variant_matches_torch_within_the_summation_bound(emulator, case, dtype):
    x_shape, w_shape, geometry, layout = CONV_GEMM_CASES[case]
    x, w = conv_operands(x_shape, w_shape, dtype, layout, seed=len(case))
    assert_gemm_convolution(_run(emulator, dtype, x, w, geometry), x, w, geometry, dtype, case)


@pytest.mark.parametrize("splits", CONV_SPLITS)
@pytest.mark.parametrize("dtype", G.DTYPES)
@pytest.mark.parametrize("case", CONV_SPLIT_CASES)
def test_a_split_reduction_matches_torch(emulator, case, dtype, splits):
    x_shape, w_shape, geometry, layout = CONV_SPLIT_CASES[case]
    x, w = conv_operands(x_shape, w_shape, dtype, layout, seed=splits)
    assert_gemm_convolution(_run(emulator, dtype, x, w, geometry, splits), x, w, geometry, dtype, case)


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


def test_the_k_split_rule():
    # ResNet's forward fills the GPU unsplit; its weight gradient (9 tiles, K = batch x 3136) splits
    assert G.splits_for(m=32 * 56 * 56, og=64, groups=1, kdim=64 * 9) == 1
    assert G.splits_for(m=64 * 9, og=64, groups=1, kdim=32 * 56 * 56) == -(-G.FILL_BLOCKS // 9)
    # a split gets MIN_SPLIT_STEPS K steps at least
    assert G.splits_for(m=64, og=64, groups=1, kdim=G.BK * G.MIN_SPLIT_STEPS * 3) == 3
    assert G.splits_for(m=64, og=64, groups=1, kdim=G.BK * (G.MIN_SPLIT_STEPS - 1)) == 1
