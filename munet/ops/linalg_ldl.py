"""``linalg.ldl_factor``, ``ldl_factor_ex`` and ``ldl_solve``: the symmetric indefinite factorization
``A = P L D L^T P^T`` with Bunch-Kaufman pivoting, packed as LAPACK's ``sytrf`` packs it.

``LD`` holds the unit lower-triangular ``L`` below its diagonal and the 1x1 and 2x2 diagonal blocks
of ``D``; ``pivots`` (int32, 1-based) is ``k`` for a 1x1 block whose row and column were swapped with
``k``, and ``-k`` on both rows of a 2x2 block swapped with ``k`` (LAPACK's ``ipiv``). The algorithm
is LAPACK's unblocked ``sytf2`` (lower) and the solve is ``sytrs``, evaluated on the host (NumPy)
in the input's dtype; PyTorch calls LAPACK's ``sytrf``, whose blocked form makes the same pivot
choices, so pivots are PyTorch's and factors agree to rounding. As in PyTorch there is no
gradient, and only the lower triangle is read. Not traceable by ``munet.compile`` (host loop).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from munet import _dtype as D
from munet.ops.checks import LinAlgError
from munet.ops.creation import tensor
from munet.ops.linalg_factor import check_matrix, outs

__all__: list[str] = []
__linalg__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve"]

LdlFactor = namedtuple("linalg_ldl_factor", "LD pivots")
LdlFactorEx = namedtuple("linalg_ldl_factor_ex", "LD pivots info")

_ALPHA = (1 + math.sqrt(17)) / 8  # Bunch-Kaufman's growth bound


def _first_argmax(values: np.ndarray) -> int:
    return int(np.argmax(np.abs(values)))  # LAPACK's IDAMAX: the first of equal maxima


def _swap_symmetric(a: np.ndarray, k: int, kk: int, kp: int, kstep: int) -> None:
    """Interchange rows and columns ``kk`` and ``kp`` of the trailing lower triangle (``sytf2``)."""
    n = a.shape[0]
    if kp < n - 1:
        a[kp + 1 :, [kk, kp]] = a[kp + 1 :, [kp, kk]]
    column = a[kk + 1 : kp, kk].copy()
    a[kk + 1 : kp, kk] = a[kp, kk + 1 : kp]
    a[kp, kk + 1 : kp] = column
    a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
    if kstep == 2:
        a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]


def _choose_pivot(a: np.ndarray, k: int) -> tuple[int, int, bool]:
    """``(kp, kstep, singular)`` for column ``k`` (0-based), as ``sytf2``."""
    n = a.shape[0]
    absakk = abs(a[k, k])
    imax = k + 1 + _first_argmax(a[k + 1 :, k]) if k < n - 1 else k
    colmax = abs(a[imax, k]) if k < n - 1 else 0.0
    if max(absakk, colmax) == 0 or np.isnan(absakk):
        return k, 1, True
    if absakk >= _ALPHA * colmax:
        return k, 1, False
    jmax = k + _first_argmax(a[imax, k:imax])
    rowmax = abs(a[imax, jmax])
    if imax < n - 1:
        jmax = imax + 1 + _first_argmax(a[imax + 1 :, imax])
        rowmax = max(rowmax, abs(a[jmax, imax]))
    if absakk >= _ALPHA * colmax * (colmax / rowmax):
        return k, 1, False
    if abs(a[imax, imax]) >= _ALPHA * rowmax:
        return imax, 1, False
    return imax, 2, False


def _sytf2(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """LAPACK's ``sytf2`` with ``uplo='L'`` on one matrix: ``(LD, ipiv, info)``."""
    a = np.tril(a).copy()
    n = a.shape[0]
    ipiv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kp, kstep, singular = _choose_pivot(a, k)
        if singular and info == 0:
            info = k + 1
        kk = k + kstep - 1
        if not singular and kp != kk:
            _swap_symmetric(a, k, kk, kp, kstep)
        if not singular and kstep == 1 and k < n - 1:
            d11 = 1 / a[k, k]
            x = a[k + 1 :, k].copy()
            a[k + 1 :, k + 1 :] -= np.tril(d11 * np.outer(x, x))
            a[k + 1 :, k] *= d11
        elif not singular and kstep == 2 and k < n - 2:
            d21 = a[k + 1, k]
            d11 = a[k + 1, k + 1] / d21
            d22 = a[k, k] / d21
            t = 1 / (d11 * d22 - 1)
            d21 = t / d21
            wk = d21 * (d11 * a[k + 2 :, k] - a[k + 2 :, k + 1])
            wkp1 = d21 * (d22 * a[k + 2 :, k + 1] - a[k + 2 :, k])
            a[k + 2 :, k + 2 :] -= np.tril(np.outer(a[k + 2 :, k], wk) + np.outer(a[k + 2 :, k + 1], wkp1))
            a[k + 2 :, k], a[k + 2 :, k + 1] = wk, wkp1
        if kstep == 1:
            ipiv[k] = kp + 1
        else:
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return a, ipiv, info


def _sytrs(ld: np.ndarray, ipiv: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LAPACK's ``sytrs`` with ``uplo='L'``: ``X`` with ``A X = B`` from ``sytf2``'s factors."""
    b = b.copy()
    n = ld.shape[0]
    k = 0
    while k < n:  # L D Y = P^T B
        if ipiv[k] > 0:
            kp = ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1 :] -= np.outer(ld[k + 1 :, k], b[k])
            b[k] /= ld[k, k]
            k += 1
            continue
        kp = -ipiv[k] - 1
        b[[k + 1, kp]] = b[[kp, k + 1]]
        if k < n - 2:
            b[k + 2 :] -= np.outer(ld[k + 2 :, k], b[k]) + np.outer(ld[k + 2 :, k + 1], b[k + 1])
        akm1k = ld[k + 1, k]
        akm1, ak = ld[k, k] / akm1k, ld[k + 1, k + 1] / akm1k
        denom = akm1 * ak - 1
        bkm1, bk = b[k] / akm1k, b[k + 1] / akm1k
        b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
        k += 2
    k = n - 1
    while k >= 0:  # L^T P^T X = Y
        if ipiv[k] > 0:
            b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
            kp = ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
            continue
        if k < n - 1:
            b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
            b[k - 1] -= ld[k + 1 :, k - 1] @ b[k + 1 :]
        kp = -ipiv[k] - 1
        b[[k, kp]] = b[[kp, k]]
        k -= 2
    return b


def _host(A) -> np.ndarray:
    return A.detach().cpu().numpy()


def ldl_factor_ex(A, *, hermitian: bool = False, check_errors: bool = False, out=None):
    """``(LD, pivots, info)``: see the module docstring; ``info`` is 0 or the 1-based index of the
    first exactly zero diagonal block of ``D`` (the factorization is then still complete)."""
    op = "linalg.ldl_factor_ex"
    check_matrix(op, A, square=True)
    values = _host(A)
    batch = values.shape[:-2]
    flat = values.reshape((-1,) + values.shape[-2:])
    results = [_sytf2(m) for m in flat]
    n = values.shape[-1]
    ld = np.stack([r[0] for r in results]).reshape(values.shape) if results else values.copy()
    pivots = np.stack([r[1] for r in results]).reshape(batch + (n,)) if results else np.zeros(batch + (n,), np.int32)
    info = np.array([r[2] for r in results], dtype=np.int32).reshape(batch)
    if check_errors and np.any(info > 0):
        raise LinAlgError(f"{op}: The factorization could not be completed because the input is singular: "
                          f"the diagonal element {int(info.reshape(-1)[np.argmax(info.reshape(-1) > 0)])} of D is zero.")  # fmt: skip
    device = A.device
    result = LdlFactorEx(tensor(ld, dtype=A.dtype, device=device), tensor(pivots, dtype=D.int32, device=device),
                         tensor(info, dtype=D.int32, device=device))  # fmt: skip
    return outs(result, out)


def ldl_factor(A, *, hermitian: bool = False, out=None):
    """``(LD, pivots)`` of symmetric ``A`` (see the module docstring); raises ``LinAlgError`` for a singular ``D``."""
    ld, pivots, _ = ldl_factor_ex(A, hermitian=hermitian, check_errors=True)
    return outs(LdlFactor(ld, pivots), out)


def ldl_solve(LD, pivots, B, *, hermitian: bool = False, out=None):
    """``X`` with ``A X = B`` from ``ldl_factor``'s ``(LD, pivots)``; batch dims broadcast."""
    op = "linalg.ldl_solve"
    check_matrix(op, LD, role="LD", square=True)
    check_matrix(op, B, role="B")
    if LD.dtype is not B.dtype:
        raise RuntimeError(f"{op}: LD dtype {LD.dtype.name} does not match B dtype {B.dtype.name}")
    if pivots.dtype is not D.int32:
        raise RuntimeError(f"{op}: Expected pivots to be integers. Got {pivots.dtype.name}")
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(
            f"{op}: LD.shape[:-1] must equal pivots.shape, got {list(LD.shape)} and {list(pivots.shape)}"
        )
    if B.shape[-2] != LD.shape[-1]:
        raise RuntimeError(f"{op}: LD.shape[-1] must equal B.shape[-2], got {LD.shape[-1]} and {B.shape[-2]}")
    ld, piv, b = _host(LD), _host(pivots), _host(B)
    batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    ld = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape((-1,) + ld.shape[-2:])
    piv = np.broadcast_to(piv, batch + piv.shape[-1:]).reshape((-1,) + piv.shape[-1:])
    rhs = np.broadcast_to(b, batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    x = np.stack([_sytrs(f, p, r) for f, p, r in zip(ld, piv, rhs)]) if len(rhs) else rhs.copy()
    return outs(tensor(x.reshape(batch + b.shape[-2:]), dtype=B.dtype, device=B.device), out)
