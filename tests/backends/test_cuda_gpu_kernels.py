"""On a GPU (``cuda`` marker; ``scripts/gpu_check.sh`` runs these): the rendered eager kernels,
compiled by NVRTC for the device's architecture and launched through CuPy, compute what the CPU
backend computes (the same cases as the CPU emulation in test_cuda_emulation.py).

Independent of the device backend: only CuPy's module loader and launcher are used, so these
check the renderer and ``nvrtc.py`` on real hardware.
"""

from __future__ import annotations

import numpy as np
import pytest

from munet.backends.cuda import kernels_conv_gemm as G
from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import nvrtc
from munet.ops._registry import OPS
from tests.backends.cuda_cases import (
    CONV_GEMM_CASES,
    CONV_SPLIT_CASES,
    CONV_SPLITS,
    assert_gemm_convolution,
    assert_matches,
    conv_operands,
    cpu_kernel,
    formula_cases,
    formula_source,
    gemm_launch,
    np_dtype,
    random_values,
)
from tests.cancellation import term_scale

pytestmark = pytest.mark.cuda

_VALUES = {"long long": np.int64, "unsigned": np.uint32, "int": np.int32, "short": np.int16, "signed char": np.int8,
           "unsigned char": np.uint8, "bool": np.bool_, "float": np.float32, "double": np.float64}  # fmt: skip


@pytest.fixture(scope="module")
def cupy(tmp_path_factory):
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError as error:
        pytest.skip(f"no CUDA device or driver: {error}")
    return cp


def _launch(cp, src, n, values, tmp_path):
    capability = cp.cuda.Device().compute_capability
    cubin = nvrtc.compile_source(src.source, nvrtc.arch_for((int(capability[:-1]), int(capability[-1]))))
    path = tmp_path / f"{src.name}.cubin"
    path.write_bytes(cubin.data)
    function = cp.RawModule(path=str(path)).get_function(src.name)
    args = [v if ctype.endswith("*") else _VALUES[ctype](v) for (ctype, _), v in zip(src.params, values)]
    function((src.grid(n),), (src.block,), tuple(args))
    cp.cuda.Device().synchronize()


@pytest.mark.parametrize(
    ("name", "dtype"), [c for c in formula_cases() if c[1] in ("float32", "float16", "int64")][:60]
)
def test_eager_kernels_on_the_gpu_match_the_emulated_and_cpu_results(cupy, name, dtype, tmp_path):
    op = OPS[name]
    gen = np.random.default_rng(0)
    shape = (5, 7)
    src = formula_source(name, dtype, 32)
    operands = [
        random_values("bool" if r == "condition" else dtype, shape, gen, name, i) for i, r in enumerate(op.inputs)
    ]
    want = np.asarray(cpu_kernel(name)(*operands, **E.sample_attrs(op))).astype(np_dtype(src.out_dtype))
    device = [cupy.asarray(a) for a in operands]
    out = cupy.empty(shape, np_dtype(src.out_dtype))
    geometry = [(d, [s // d.itemsize for s in d.strides], 0) for d in device]
    record = cupy.zeros(3, cupy.int64)  # the fault record of an integer division (no zero divisors here)
    arguments = src.arguments(
        shape, (out, [s // out.itemsize for s in out.strides], 0), geometry, record.data.ptr if src.faults else None
    )
    _launch(cupy, src, out.size, [v for _, v in arguments], tmp_path)
    scale = term_scale(name, operands, E.sample_attrs(op))
    assert_matches(cupy.asnumpy(out), want, src.out_dtype, f"{name} {dtype} on the GPU", scale)
    assert not cupy.asnumpy(record).any(), f"{name} {dtype} recorded a fault"


def _gemm_convolution(cupy, dtype, case, splits, tmp_path) -> None:
    x_shape, w_shape, geometry, layout = {**CONV_GEMM_CASES, **CONV_SPLIT_CASES}[case]
    x, w = conv_operands(x_shape, w_shape, dtype, layout, seed=len(case), to=cupy.asarray)

    def empty(shape, dt):  # unwritten outputs stay NaN (bfloat16 travels as its bits)
        host = np.full(shape, np.nan, np_dtype(dt))
        return cupy.asarray(host.view(np.uint16) if dt == "bfloat16" else host)

    launches = gemm_launch(dtype, x, w, geometry, empty, splits)
    for src, work, values in launches:
        _launch(cupy, src, work, values, tmp_path)
    x, w, out = (cupy.asnumpy(a).view(np_dtype(dtype)) for a in (x, w, launches[0][2][2]))
    assert_gemm_convolution(out, x, w, geometry, dtype, f"{case} on the GPU, K split {splits} ways")


@pytest.mark.parametrize("dtype", G.DTYPES)
@pytest.mark.parametrize("case", CONV_GEMM_CASES)
def test_the_implicit_gemm_convolution_on_the_gpu(cupy, case, dtype, tmp_path):
    _gemm_convolution(cupy, dtype, case, 1, tmp_path)


@pytest.mark.parametrize("splits", CONV_SPLITS)
@pytest.mark.parametrize("dtype", G.DTYPES)
@pytest.mark.parametrize("case", CONV_SPLIT_CASES)
def test_a_split_implicit_gemm_convolution_on_the_gpu(cupy, case, dtype, splits, tmp_path):
    _gemm_convolution(cupy, dtype, case, splits, tmp_path)
