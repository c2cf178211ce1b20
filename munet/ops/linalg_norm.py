"""``linalg.vector_norm``, ``matrix_norm`` and ``norm``: composites of the reductions (the
vector p-norms are ``munet.norm``'s) and, for the spectral and nuclear norms, of ``svdvals``."""

from __future__ import annotations

import math

from munet.ops._autocast import float32_region_under_autocast
from munet.ops._utils import wrap_dim
from munet.ops.linalg_factor import outs, svdvals
from munet.ops.reduce import amax, amin, reduce_dims
from munet.ops.reduce import norm as p_norm
from munet.ops.reduce import sum as sum_

__all__: list[str] = []
__linalg__ = ["vector_norm", "matrix_norm", "norm"]

_MATRIX_ORDS = ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)


def _check_float(op: str, x) -> None:
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {x.dtype.name}")


@float32_region_under_autocast
def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None):  # noqa: A002 - PyTorch's name
    """``sum(|x|^ord)^(1/ord)`` over ``dim`` (all elements when None); ``ord`` inf/-inf is the
    largest/smallest ``|x|``, 0 the count of nonzeros. ``dtype`` casts ``x`` first."""
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype.is_complex:  # the norm of the magnitudes
        x = x.abs()
    _check_float("linalg.vector_norm", x)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    dims = reduce_dims(x, dim, "linalg.vector_norm")
    if ord in (math.inf, -math.inf) and any(x.shape[d] == 0 for d in dims):
        raise RuntimeError(
            f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor because the operation does not have "
            "an identity"
        )
    return outs(p_norm(x, ord, dims if dims else None, keepdim), out)


def _matrix_dims(A, dim, op: str) -> tuple[int, int]:
    if not isinstance(dim, (list, tuple)) or len(dim) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple. Got {dim!r}")
    d0, d1 = (wrap_dim(d, A.ndim, op) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{op}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


@float32_region_under_autocast
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None):  # noqa: A002
    """Frobenius ('fro'), nuclear ('nuc'), spectral (2/-2: largest/smallest singular value),
    max column sum (1/-1) or max row sum (inf/-inf) of the matrices over ``dim``."""
    op = "linalg.matrix_norm"
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    _check_float(op, A)
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"{op}: Order {ord} not supported.")
    d0, d1 = _matrix_dims(A, dim, op)
    if ord == "fro":
        return outs(vector_norm(A, 2, (d0, d1), keepdim), out)
    if ord in ("nuc", 2, -2):
        values = svdvals(A.movedim((d0, d1), (-2, -1)))
        result = sum_(values, -1) if ord == "nuc" else (amax if ord == 2 else amin)(values, -1)
        for d in sorted((d0, d1)) if keepdim else ():
            result = result.unsqueeze(d)
        return outs(result, out)
    summed, picked = (d0, d1) if abs(ord) == 1 else (d1, d0)
    pick = amax if ord > 0 else amin
    result = pick(sum_(A.abs(), summed, keepdim=True), picked, keepdim=True)
    return outs(result if keepdim else result.squeeze((d0, d1)), out)


@float32_region_under_autocast
def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None, out=None):  # noqa: A002
    """A vector norm over one dim (or all elements when ``dim`` and ``ord`` are None), a matrix
    norm over two; with ``dim=None`` and ``ord`` given, ``A`` must be 1-D or 2-D."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype, out=out)
    if dim is not None or ord is None:
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")
