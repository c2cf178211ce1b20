"""The ``torch.*`` spellings of linear algebra whose signatures differ from ``torch.linalg``'s:
``cholesky``, ``svd`` (returns V, ``some=``), ``qr`` (``some=``), ``lu``, ``lu_solve`` and ``cross``
(``dim=None``). Each is a thin call of the ``munet.linalg`` function."""

from __future__ import annotations

import warnings
from collections import namedtuple

from munet.ops import linalg_factor as factor
from munet.ops import linalg_func as func
from munet.ops import linalg_solve as solve
from munet.ops._autocast import float32_region_under_autocast
from munet.ops.creation import zeros

__all__ = ["cholesky", "svd", "qr", "lu", "lu_solve", "cross"]
__tensor_methods__ = ["cholesky", "svd", "qr", "lu", "lu_solve", "cross"]

SvdResult = namedtuple("svd", "U S V")
QrResult = namedtuple("qr", "Q R")


@float32_region_under_autocast
def cholesky(input, upper: bool = False, *, out=None):
    """``torch.cholesky`` (deprecated in PyTorch): :func:`munet.linalg.cholesky`."""
    return factor.cholesky(input, upper=upper, out=out)


@float32_region_under_autocast
def svd(input, some: bool = True, compute_uv: bool = True, *, out=None):
    """``torch.svd``: ``(U, S, V)`` with ``input = U diag(S) V^T`` (V, not Vh). ``some=False``
    gives full U and V; ``compute_uv=False`` gives zero-filled U (m x m) and V (n x n)."""
    if not compute_uv:
        S = factor.svdvals(input)
        m, n = input.shape[-2:]
        batch = tuple(input.shape[:-2])
        U = zeros(batch + (m, m), dtype=input.dtype, device=input.device)
        V = zeros(batch + (n, n), dtype=input.dtype, device=input.device)
        return factor.outs(SvdResult(U, S, V), out)
    U, S, Vh = factor.svd(input, full_matrices=not some)
    return factor.outs(SvdResult(U, S, Vh.transpose(-2, -1)), out)


@float32_region_under_autocast
def qr(input, some: bool = True, *, out=None):
    """``torch.qr``: :func:`munet.linalg.qr` with ``some=True`` as mode 'reduced', else 'complete'."""
    return factor.outs(QrResult(*factor.qr(input, "reduced" if some else "complete")), out)


@float32_region_under_autocast
def lu(A, pivot: bool = True, get_infos: bool = False, out=None):
    """``torch.lu`` (deprecated in PyTorch): ``(LU, pivots)``, plus ``infos`` when ``get_infos``."""
    LU, pivots, info = factor.lu_factor_ex(A, pivot=pivot)
    if not get_infos and A.shape[-1] == A.shape[-2]:
        factor.raise_for_info("torch.linalg.lu_factor", info, factor.singular_u, RuntimeError)
    result = (LU, pivots, info) if get_infos else (LU, pivots)
    return factor.outs(result, out)


@float32_region_under_autocast
def lu_solve(b, LU_data, LU_pivots, *, out=None):  # noqa: N803 - PyTorch's names
    """``torch.lu_solve(b, LU_data, LU_pivots)``: :func:`munet.linalg.lu_solve` with b first."""
    return solve.lu_solve(LU_data, LU_pivots, b, out=out)


def cross(input, other, dim=None, *, out=None):
    """``torch.cross``: :func:`munet.linalg.cross`, but ``dim=None`` takes the first dim of size 3
    (with PyTorch's deprecation warning)."""
    if dim is None:
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim explicitly "
            "or simply use torch.linalg.cross.\nThe default value of dim will change to agree with that of "
            "linalg.cross in a future release.",
            UserWarning,
            stacklevel=2,
        )
        sizes = list(input.shape)
        if 3 not in sizes:
            raise RuntimeError(f"cross: no dimension of size 3 in input, got shape {sizes}")
        dim = sizes.index(3)
    return func.cross(input, other, dim=dim, out=out)
