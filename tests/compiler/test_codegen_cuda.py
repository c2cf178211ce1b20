"""The CUDA C renderer of the kernel IR (munet/compiler/codegen/cuda.py) on hand-built kernels:
layouts, index width, what it refuses; numbers under the CPU emulation header against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from munet.backends.cuda import emulation, nvrtc
from munet.compiler.codegen.cuda import (
    UnsupportedKernelError,
    index_bits,
    reduction_layout,
    render_cuda,
    takes_fault_record,
)
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
    complex_input = Kernel("k_complex", (4,), (), ["complex64"], [], ["f32"], [Store(0, Const(1.0, "f32"))])
    with pytest.raises(UnsupportedKernelError, match="dtype 'complex64' has no CUDA C type"):
        render_cuda(complex_input)
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


def _integer_division(dtype: str) -> Kernel:
    a, b = Load(0, (1,), 0, dtype), Load(1, (1,), 0, dtype)
    return Kernel(f"k_div_{dtype}", (5,), (), [dtype, dtype], [], [dtype, dtype],
                  [Store(0, Apply("floor_divide", (a, b), dtype)), Store(1, Apply("fmod", (a, b), dtype))])  # fmt: skip


def test_an_integer_division_takes_the_fault_record_and_others_do_not():
    src = render_cuda(_integer_division("i64"))
    assert takes_fault_record(src) and src.params[-1] == ("unsigned long long *", "munet_fault_record")
    assert not takes_fault_record(render_cuda(_row_softmax_denominator(3, 40)))
    for arch in ("sm_80", "sm_90"):
        assert nvrtc.compile_source(src.source, arch).data[:4] == b"\x7fELF"


@needs_cxx
@pytest.mark.parametrize("dtype", ["i64", "i32"])
def test_a_fused_integer_division_floors_and_records_a_zero_divisor(dtype):
    from munet.backends.cuda.device_asserts import ZERO_DIVISION_SITE

    src = render_cuda(_integer_division(dtype))
    np_type = np.int64 if dtype == "i64" else np.int32
    a, b = np.array([7, -7, 7, -8, 9], np_type), np.array([2, 2, -3, -1, 0], np_type)
    quotient, remainder, record = np.full(5, 5, np_type), np.full(5, 5, np_type), np.zeros(3, np.int64)
    emulation.emulate(src, 5, [a, b, quotient, remainder, np.zeros(1), record])
    np.testing.assert_array_equal(quotient, [3, -4, -3, 8, 0])  # Python's floor; a zero divisor gives 0
    np.testing.assert_array_equal(remainder, [1, -1, 1, 0, 0])  # C's truncated remainder
    assert record[0] == ZERO_DIVISION_SITE
