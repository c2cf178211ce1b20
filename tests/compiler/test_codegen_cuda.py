"""The CUDA C renderer of the kernel IR (munet/compiler/codegen/cuda.py) on hand-built kernels:
layouts, index width, what it refuses; numbers under the CPU emulation header against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from munet.backends.cuda import emulation, nvrtc
from munet.compiler.codegen.cuda import UnsupportedKernelError, index_bits, reduction_layout, render_cuda
from munet.compiler.codegen.kernel import Apply, Const, Kernel, Load, Param, Reduce, Store

try:
    emulation.find_cxx()
    HAS_CXX = True
except emulation.EmulationUnavailableError:  # pragma: no cover - CI has g++
    HAS_CXX = False
needs_cxx = pytest.mark.skipif(not HAS_CXX, reason="no C++ compiler for the CUDA emulation")


def _row_softmax_denominator(rows: int, cols: int) -> Kernel:
    """out[i] = p0 / sum_j exp(x[i, j]) over a (rows, cols) input."""
    x = Load(0, (cols, 1), 0, "f32")
    total = Reduce("sum", Apply("exp", (x,), "f32"), "f32")
    return Kernel("k_rows", (rows,), (cols,), ["f32"], ["f64"], ["f32"],
                  [Store(0, Apply("div", (Param(0, "f32"), total), "f32"))])  # fmt: skip


def test_layouts_follow_the_row_length_and_contiguity():
    assert reduction_layout(_row_softmax_denominator(3, 1000)) == "rows"
    assert reduction_layout(_row_softmax_denominator(3, 40)) == "outputs"
    column = Kernel("k_cols", (1000,), (500,), ["f32"], [], ["f32"],
                    [Store(0, Reduce("sum", Load(0, (1, 1000), 0, "f32"), "f32"))])  # fmt: skip
    assert reduction_layout(column) == "outputs"  # neighbouring threads read neighbouring columns


def test_index_arithmetic_widens_past_two_to_the_31():
    small = Kernel("k_small", (4, 5), (), ["f32"], [], ["f32"], [Store(0, Load(0, (5, 1), 0, "f32"))])
    big = Kernel("k_big", (2**16, 2**16), (), ["f32"], [], ["f32"], [Store(0, Load(0, (1, 2**16), 0, "f32"))])
    assert index_bits(small) == 32 and "typedef unsigned munet_idx;" in render_cuda(small).source
    assert index_bits(big) == 64 and "typedef long long munet_idx;" in render_cuda(big).source
    assert nvrtc.compile_source(render_cuda(big).source, "sm_90").data[:4] == b"\x7fELF"


def test_what_has_no_cuda_form_is_refused_by_name():
    ints = Kernel("k_div", (4,), (), ["i64", "i64"], [], ["i64"],
                  [Store(0, Apply("floor_divide", (Load(0, (1,), 0, "i64"), Load(1, (1,), 0, "i64")), "i64"))])  # fmt: skip
    with pytest.raises(UnsupportedKernelError, match="floor_divide"):
        render_cuda(ints)
    no_dtype = Kernel("k_none", (4,), (), [None], [], ["f32"], [Store(0, Const(1.0, "f32"))])
    with pytest.raises(UnsupportedKernelError, match="input 0"):
        render_cuda(no_dtype)


@needs_cxx
@pytest.mark.parametrize("cols", [40, 1000])
def test_reduction_kernels_compute_numpys_values(cols):
    kernel = _row_softmax_denominator(3, cols)
    src = render_cuda(kernel)
    x = np.random.default_rng(0).standard_normal((3, cols)).astype(np.float32)
    out = np.full(3, np.nan, np.float32)
    emulation.emulate(src, kernel.numel, [x, out, np.array([2.0])])
    want = 2.0 / np.exp(x.astype(np.float64)).sum(axis=1)
    np.testing.assert_allclose(out, want.astype(np.float32), rtol=2e-6)
