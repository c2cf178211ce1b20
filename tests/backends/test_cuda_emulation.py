"""The generated CUDA C computes the CPU backend's numbers: kernels run on the CPU under the
compatibility header (``munet/backends/cuda/emulation.py``), compiled by the system C++ compiler.

The eager elementwise suite (every formula op x dtype, random inputs with NaN, infinities and
zeros, a transposed and a broadcast operand through the kernels' stride arguments), casts, copies
and reductions are compared with the CPU backend's kernels; fused kernels of a compiled MLP
training step with the C renderer's. Tolerances: integers and bools exact; float64 rtol 1e-12;
float32 rtol 1e-5 (CUDA's and the C library's ``expf``... are within a few ulp of NumPy's);
16-bit floats one unit of their last place (both round a float32 value once, which may differ by
an ulp of float32 across a rounding boundary).
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest

from munet.backends.cuda import emulation
from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import kernels_reduce as R
from munet.ops._registry import OPS
from tests.backends.cuda_cases import (
    REDUCTION_DTYPES,
    WIDE_FORMULAS,
    assert_matches,
    cpu_kernel,
    eager_sources,
    formula_cases,
    formula_operands,
    formula_source,
    is_float,
    np_dtype,
    random_values,
    reduction_out,
    reduction_source,
)
from tests.cancellation import term_scale

try:
    emulation.find_cxx()
except emulation.EmulationUnavailableError as error:  # pragma: no cover - CI has g++
    pytest.skip(str(error), allow_module_level=True)


def _strided(a: np.ndarray):
    return (a, [s // a.itemsize for s in a.strides], 0)


@functools.cache
def _suite() -> emulation.Emulator:
    """Every eager kernel of the suite, compiled by one compiler run."""
    extra = [
        E.render_elementwise("mul", (dt, dt), rank=2, scalars=(1,))
        for dt in ("float32", "float16", "bfloat16", "int64")
    ]
    extra += [E.render_cast("float64", dt, rank=1) for dt in ("float16", "bfloat16")]
    for bits in (32, 64):
        extra += [E.render_cast(a, b, rank=3, index_bits=bits) for a in CAST_DTYPES for b in CAST_DTYPES if a != b]
        extra += [E.render_copy(dt, rank=3, index_bits=bits) for dt in CAST_DTYPES]
        extra += [reduction_source(op, dt, "outputs", bits) for op in R.OPS for dt in REDUCTION_DTYPES]
    extra += [formula_source(name, dt, 64) for name, dt in WIDE_FORMULAS]
    return emulation.Emulator(eager_sources() + tuple(extra))


def _run_strided(src, shape, out, inputs):
    record = np.zeros(3, np.int64)  # the fault record of an integer division
    arguments = src.arguments(
        shape,
        _strided(out),
        [_strided(a) if isinstance(a, np.ndarray) else a for a in inputs],
        record.ctypes.data if src.faults else None,
    )
    _suite().run(src, out.size, [v for _, v in arguments])
    return record


@pytest.mark.parametrize(("name", "dtype"), formula_cases(), ids=[f"{n}-{d}" for n, d in formula_cases()])
def test_elementwise_kernel_matches_the_cpu_backend(name, dtype):
    _check_formula(name, dtype, 32)


@pytest.mark.parametrize(("name", "dtype"), WIDE_FORMULAS)
def test_elementwise_kernel_with_64_bit_indices_matches_the_cpu_backend(name, dtype):
    _check_formula(name, dtype, 64)


def _check_formula(name, dtype, index_bits):
    op = OPS[name]
    attrs = E.sample_attrs(op)
    operands = formula_operands(op, dtype)
    gen = np.random.default_rng(zlib.crc32(f"{name} {dtype}".encode()))  # the same inputs in every process
    shape = (5, 7)
    # operand 0 a transposed view, operand 1 broadcast along dim 0, the rest contiguous
    inputs = []
    for i, dt in enumerate(operands):
        if i == 0:
            inputs.append(random_values(dt, shape[::-1], gen, name, i).T)
        elif i == 1:
            inputs.append(np.broadcast_to(random_values(dt, (1, shape[1]), gen, name, i), shape))
        else:
            inputs.append(random_values(dt, shape, gen, name, i))
    src = formula_source(name, dtype, index_bits)
    with np.errstate(over="ignore"):  # float32 results beyond a 16-bit float's range become inf
        want = np.asarray(cpu_kernel(name)(*inputs, **attrs)).astype(np_dtype(src.out_dtype))
    out = np.empty(shape, np_dtype(src.out_dtype))
    with np.errstate(all="ignore"):
        record = _run_strided(src, shape, out, inputs)
    assert_matches(out, want, src.out_dtype, f"{name} {dtype}", term_scale(name, inputs, attrs))
    assert not record.any(), f"{name} {dtype} recorded a fault"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64"])
def test_a_python_number_operand_is_a_by_value_scalar(dtype):
    gen = np.random.default_rng(0)
    x = random_values(dtype, (4, 6), gen)
    src = E.render_elementwise("mul", (dtype, dtype), rank=2, scalars=(1,))
    out = np.empty((4, 6), np_dtype(dtype))
    number = 3 if dtype == "int64" else 2.5
    _run_strided(src, (4, 6), out, [x, number])
    want = cpu_kernel("mul")(x, number)
    assert_matches(out, np.asarray(want).astype(out.dtype), dtype, "mul by a number")


CAST_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool")


@pytest.mark.parametrize("index_bits", [32, 64])
@pytest.mark.parametrize("target", CAST_DTYPES)
@pytest.mark.parametrize("source", CAST_DTYPES)
def test_casts_and_copies_match_numpy(source, target, index_bits):
    gen = np.random.default_rng(1)
    if is_float(np_dtype(source)) and np_dtype(target).kind in "iu":
        x = gen.uniform(-100, 100, (6, 4, 3)) if np_dtype(target).kind == "i" else gen.uniform(0, 200, (6, 4, 3))
        x = x.astype(np_dtype(source))  # in range and finite: out-of-range float -> int is the hardware's
    elif is_float(np_dtype(source)):
        x = random_values(source, (6, 4, 3), gen) * np.array(1e3 if target != "bool" else 1, dtype=np_dtype(source))
    else:
        x = random_values(source, (6, 4, 3), gen)
    view = x.transpose(2, 0, 1)
    if source == target:
        src = E.render_copy(source, rank=3, index_bits=index_bits)
    else:
        src = E.render_cast(source, target, rank=3, index_bits=index_bits)
    out = np.empty(view.shape, np_dtype(target))
    with np.errstate(all="ignore"):
        _run_strided(src, view.shape, out, [view])
        want = view.astype(np_dtype(target))
    if source == target and source in ("float16", "bfloat16"):
        assert out.tobytes() == np.ascontiguousarray(view).tobytes()  # bits moved, NaN payloads too
    assert_matches(out, want, target, f"{source} -> {target}")


def test_float16_rounding_is_to_nearest_even_at_the_boundaries():
    # halfway cases, subnormals, overflow: float64 -> float16 rounds once (NumPy's astype)
    values = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65504.0, 65520.0, 65519.99, 2**-25, 2**-24 * 1.5, 6e-8, -0.0,
                       np.nan, np.inf, 1e-300], np.float64)  # fmt: skip
    for target in ("float16", "bfloat16"):
        src = E.render_cast("float64", target, rank=1)
        out = np.empty(values.shape, np_dtype(target))
        _run_strided(src, values.shape, out, [values])
        with np.errstate(over="ignore"):
            want = values.astype(np_dtype(target))
        assert np.array_equal(out.view(np.uint16)[:-3], want.view(np.uint16)[:-3]), target
        assert np.isnan(out[-3].astype(np.float32)) and out[-2] == want[-2] and out[-1] == want[-1]


def _reference_reduction(op, x, axes):
    with np.errstate(all="ignore"):
        if op == "sum":
            return x.astype(np.float64 if is_float(x.dtype) else np.int64).sum(axis=axes)
        if op == "prod":
            return x.astype(np.float64 if is_float(x.dtype) else np.int64).prod(axis=axes)
        if op in ("amax", "amin"):
            return (np.max if op == "amax" else np.min)(x.astype(np.float64) if is_float(x.dtype) else x, axis=axes)
        moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
        flat = moved.reshape(moved.shape[: x.ndim - len(axes)] + (-1,)).astype(np.float64)
        nan = np.isnan(flat)
        pick = np.argmax(flat, -1) if op == "argmax" else np.argmin(flat, -1)
        return np.where(nan.any(-1), np.argmax(nan, -1), pick)


@pytest.mark.parametrize("index_bits", [32, 64])
@pytest.mark.parametrize("dtype", REDUCTION_DTYPES)
@pytest.mark.parametrize("op", R.OPS)
def test_reductions_match_numpy(op, dtype, index_bits):
    if dtype == "bool" and op not in ("sum", "amax", "amin"):
        pytest.skip("bool reduces by sum/amax/amin only")
    gen = np.random.default_rng(2)
    x = random_values(dtype, (4, 5, 3, 6), gen)
    if is_float(np_dtype(dtype)):
        x = (x / np.array(3, x.dtype)).astype(x.dtype)
        x[0, 0, 0, 0], x[1, 2, 1, 3] = np.inf, np.nan  # one row with NaN, one with inf
    if op == "prod" and np_dtype(dtype).kind in "iu":
        x = (x % 3).astype(x.dtype)
    axes = (1, 3)
    src = reduction_source(op, dtype, "outputs", index_bits)
    strides = [s // x.itemsize for s in x.strides]
    kept, red = (x.shape[0], x.shape[2]), (x.shape[1], x.shape[3])
    out = np.empty(kept, np_dtype(reduction_out(op, dtype)))
    args = src.arguments(kept, red, out, (x, (strides[0], strides[2]), (strides[1], strides[3]), 0))
    with np.errstate(all="ignore"):
        _suite().run(src, out.size, [v for _, v in args])
    want = np.asarray(_reference_reduction(op, x, axes)).astype(out.dtype)
    assert_matches(out, want, reduction_out(op, dtype), f"{op} {dtype}")


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool"])
@pytest.mark.parametrize("op", R.OPS)
def test_block_reductions_with_shared_memory_match_numpy(op, dtype):
    """The one-block-per-output layout (strided partial rows, a shared-memory tree): a row of 700
    elements is more than two rounds of 256 threads; NaN and a tie sit in the same row."""
    if dtype == "bool" and op not in ("sum", "amax", "amin"):
        pytest.skip("bool reduces by sum/amax/amin only")
    gen = np.random.default_rng(3)
    x = random_values(dtype, (3, 700), gen)
    if is_float(np_dtype(dtype)):
        x[1, 600], x[2, 5], x[2, 650] = np.nan, 9.0, 9.0  # a late NaN; a tie: the first index wins
        x[0] = np.abs(x[0]) / np.array(4, x.dtype) + np.array(0.5, x.dtype)  # a finite product
        x[0, :3] = [np.inf, np.inf, 1.0]
    src = reduction_source(op, dtype, "rows", 32)
    out = np.empty((3, 1), np_dtype(reduction_out(op, dtype)))
    args = src.arguments((3, 1), (700, 1), out, (x, (x.strides[0] // x.itemsize, 0), (1, 0), 0))
    with np.errstate(all="ignore"):
        _suite().run(src, 3, [v for _, v in args])
        want = np.asarray(_reference_reduction(op, x, (1,))).astype(out.dtype)
    # the tree adds in another order than NumPy: float sums agree to float64 rounding, then one rounding
    assert_matches(out[:, 0], want, reduction_out(op, dtype), f"{op} {dtype}")
