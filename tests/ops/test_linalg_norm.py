"""munet.linalg.vector_norm, matrix_norm and norm vs torch.linalg: every ord, dims, keepdim,
dtype=, batched and non-contiguous inputs, size-0 dims, gradients, errors."""

import math

import numpy as np
import pytest
import torch

import munet
from tests.ops.test_linalg_factor import DTYPES, ref
from tests.reference import check, noncontiguous, randn

LA = munet.linalg

VECTOR_ORDS = [2, 1, 3, 0.5, 0, math.inf, -math.inf, -1]
MATRIX_ORDS = ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ord", VECTOR_ORDS)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (-1, False), ((0, 2), True), (1, True)])
def test_vector_norm(dtype, ord, dim, keepdim):
    x = randn(2, 3, 4, dtype=dtype, seed=1)
    fm = lambda t: LA.vector_norm(t, ord, dim, keepdim)  # noqa: E731
    ft = lambda t: torch.linalg.vector_norm(t, ord, dim, keepdim)  # noqa: E731
    check(fm, ft, x)
    check(fm, ft, noncontiguous(x))


def test_vector_norm_zero_dtype_and_errors():
    check(lambda t: LA.vector_norm(t), lambda t: torch.linalg.vector_norm(t), np.zeros((3,), np.float32))  # grad 0 at 0
    check(lambda t: LA.vector_norm(t, dim=1), lambda t: torch.linalg.vector_norm(t, dim=1), randn(0, 3))
    x = randn(3, 4, seed=2)
    check(
        lambda t: LA.vector_norm(t, dtype=munet.float64), lambda t: torch.linalg.vector_norm(t, dtype=torch.float64), x
    )
    with pytest.raises(
        RuntimeError, match="linalg.vector_norm: Expected a floating point or complex tensor as input. Got int64"
    ):
        LA.vector_norm(munet.ones(3, dtype=munet.int64))
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on an empty tensor"):
        LA.vector_norm(munet.zeros(0, 3), math.inf)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ord", MATRIX_ORDS)
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((-2, -1), True), ((2, 0), False), ((0, 2), True)])
def test_matrix_norm(dtype, ord, dim, keepdim):
    x = randn(3, 2, 4, dtype=dtype, seed=3)
    fm = lambda t: LA.matrix_norm(t, ord, dim, keepdim)  # noqa: E731
    ft = lambda t: torch.linalg.matrix_norm(t, ord, dim, keepdim)  # noqa: E731
    check(fm, ft, x, **ref(dtype))
    check(fm, ft, noncontiguous(x), **ref(dtype))


def test_matrix_norm_errors():
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: The input tensor A must have at least 2 dimensions"):
        LA.matrix_norm(munet.ones(3), ord=2)
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: Order 3 not supported"):
        LA.matrix_norm(munet.ones(3, 3), ord=3)
    with pytest.raises(RuntimeError, match="dims must be different"):
        LA.matrix_norm(munet.ones(3, 3), dim=(0, -2))


@pytest.mark.parametrize(
    "shape,ord,dim",
    [((2, 3, 4), None, None), ((4,), 3, None), ((3, 4), "nuc", None), ((3, 4), 1, None), ((3, 4), None, 1),
     ((2, 3, 4), 2, (0, 1)), ((2, 3, 4), -math.inf, -1), ((0, 3), None, None)],
)  # fmt: skip
@pytest.mark.parametrize("keepdim", [False, True])
def test_norm(shape, ord, dim, keepdim):
    x = randn(*shape, dtype="float64", seed=4)
    check(lambda t: LA.norm(t, ord, dim, keepdim), lambda t: torch.linalg.norm(t, ord, dim, keepdim), x)


def test_norm_errors():
    with pytest.raises(
        RuntimeError, match="linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D."
    ):
        LA.norm(munet.ones(2, 3, 4), ord=2)
