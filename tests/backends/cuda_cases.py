"""The cuda kernels the renderers produce for the registered op set, shared by the cuda tests.

``eager_sources()``: with 32-bit indices, every formula op x every dtype its formula takes
(rank 2), every cast between two cuda dtypes and every strided copy (rank 3), every reduction x
dtype x layout; with 64-bit indices (the same renderer with another index type) a sample of each
family: ``wide_cases()``; and every convolution kernel (dtype x 1-3 spatial dims x transposed).
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

import munet
from munet._device import get_backend
from munet.backends.cuda import kernels_conv as C
from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import kernels_reduce as R
from munet.ops._registry import OPS

REDUCTION_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "bool")
WIDE_FORMULAS = (("add", "float32"), ("where", "float16"), ("lerp", "bfloat16"), ("mul", "int64"), ("erfinv", "float64"))  # fmt: skip
WIDE_CASTS = (("float32", "bfloat16"), ("int64", "float16"), ("float64", "int32"))


def formula_operands(op, dtype: str) -> tuple:
    return tuple("bool" if role == "condition" else dtype for role in op.inputs)


def reduction_out(op: str, dtype: str) -> str:
    if op.startswith("arg"):
        return "int64"
    if op in ("sum", "prod") and dtype in ("bool", "int32", "int8", "int16", "uint8"):
        return "int64"
    return dtype


@functools.cache
def formula_cases() -> tuple:
    """``(op name, dtype)`` of every formula op and dtype the cuda renderer gives a kernel."""
    return tuple(
        (name, dt) for name, op in OPS.items() if op.formula is not None for dt in E.DTYPES if E.supports(name, dt)
    )


def formula_source(name: str, dtype: str, index_bits: int = 32):
    op = OPS[name]
    return E.render_elementwise(
        name, formula_operands(op, dtype), rank=2, attrs=E.sample_attrs(op), index_bits=index_bits
    )


def reduction_source(op: str, dtype: str, layout: str, index_bits: int = 32):
    return R.render_reduction(
        op, dtype, reduction_out(op, dtype), kept_rank=2, reduced_rank=2, layout=layout, index_bits=index_bits
    )


@functools.cache
def eager_sources() -> tuple:
    sources = [formula_source(name, dt) for name, dt in formula_cases()]
    sources += [E.render_cast(a, b, rank=3, index_bits=32) for a in E.DTYPES for b in E.DTYPES if a != b]
    sources += [E.render_copy(dt, rank=3, index_bits=32) for dt in E.DTYPES]
    sources += [
        reduction_source(op, dt, layout) for op in R.OPS for dt in REDUCTION_DTYPES for layout in ("outputs", "rows")
    ]
    # 64-bit indices: a sample of each family
    sources += [formula_source(name, dt, 64) for name, dt in WIDE_FORMULAS]
    sources += [E.render_cast(a, b, rank=3) for a, b in WIDE_CASTS]
    sources += [E.render_copy(dt, rank=3) for dt in ("float16", "int8")]
    sources += [
        reduction_source(op, dt, lay, 64) for op in R.OPS for dt in ("float32", "int64") for lay in ("outputs", "rows")
    ]
    sources += [C.render_convolution(dt, nd, t) for dt in C.DTYPES for nd in (1, 2, 3) for t in (False, True)]
    return tuple(sources)


# helpers of the numerical checks (emulated and on a GPU) ---------------------------------------------

NP = {"bfloat16": ml_dtypes.bfloat16}
RTOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2**-10, "bfloat16": 2**-7}
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5]


def np_dtype(name: str):
    return np.dtype(NP.get(name, name))


def is_float(dt) -> bool:
    return np.dtype(dt).kind == "f" or np.dtype(dt) == np.dtype(ml_dtypes.bfloat16)


def cpu_kernel(name):
    return get_backend(munet.device("cpu")).kernels[name]


def random_values(dtype: str, shape, gen, name: str = "", position: int = 0) -> np.ndarray:
    if dtype == "bool":
        return gen.integers(0, 2, shape).astype(bool)
    if np_dtype(dtype).kind in "iu":
        if name in ("bitwise_left_shift", "bitwise_right_shift", "pow") and position == 1:
            return gen.integers(0, 6, shape).astype(dtype)
        info = np.iinfo(np_dtype(dtype))
        return gen.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)
    x = gen.standard_normal(shape) * 3
    flat = x.reshape(-1)
    k = min(len(SPECIAL), flat.size // 2)
    flat[gen.choice(flat.size, k, replace=False)] = gen.permutation(SPECIAL)[:k]
    return x.astype(np_dtype(dtype))


def assert_matches(got: np.ndarray, want: np.ndarray, dtype: str, what: str):
    assert got.dtype == want.dtype, what
    if not is_float(want.dtype):
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=what)
    finite = np.isfinite(w)
    np.testing.assert_array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)], err_msg=what)
    np.testing.assert_allclose(g[finite], w[finite], rtol=RTOL[dtype], atol=RTOL[dtype] * 1e-30, err_msg=what)


def pair(shape, dtype="float32", seed=0, scale=3.0, device="cuda:0"):
    """The same random tensor on the cpu and on ``device``."""
    values = np.random.default_rng(seed).standard_normal(shape) * scale
    host = munet.tensor(values).to(getattr(munet, dtype))
    return host, host.to(device)


def same(cuda_result, cpu_result, exact=True):
    """A cuda result equals the cpu's (``exact``) or is within 1e-6."""
    assert cuda_result.device.type == "cuda" and cuda_result.dtype is cpu_result.dtype
    assert tuple(cuda_result.shape) == tuple(cpu_result.shape)
    got = cuda_result.cpu().float().numpy() if cpu_result.dtype is munet.bfloat16 else cuda_result.cpu().numpy()
    want = cpu_result.float().numpy() if cpu_result.dtype is munet.bfloat16 else cpu_result.numpy()
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# eager ops run on a cuda device and compared with the cpu's (emulated and GPU tests): (x, y) -> result
EAGER_ELEMENTWISE = {
    "add, broadcast": lambda x, y: x + y[0],
    "mul by a python number, transposed": lambda x, y: x.t() * 2.5,
    "where with a python number": lambda x, y: munet.where(x > 0, x, 0.0),
    "clamp with a missing max": lambda x, y: munet.clamp(x, min=y[1]),
    "lerp with a python weight": lambda x, y: munet.lerp(x, y, 0.25),
    "comparison to bool": lambda x, y: x.t() >= y.t(),
    "leaky_relu attribute": lambda x, y: munet.nn.functional.leaky_relu(x, 0.2),
    "sliced operand": lambda x, y: x[:, 1::2] - y[:, ::2],
}


# x -> result; a sum is exact only up to its rounding order
EAGER_REDUCTIONS = {
    "sum over a transposed dim": lambda x: x.t().sum(1),
    "sum of everything, keepdim": lambda x: x.sum(dim=(0, 1), keepdim=True),
    "sum of a long row (one block per row)": lambda x: x.reshape(3, 80).sum(1),
    "amax": lambda x: x.amax(0),
    "amin keepdim": lambda x: x.amin(1, keepdim=True),
    "argmax over everything": lambda x: x.argmax(),
    "argmin along a dim": lambda x: x.argmin(0),
}
