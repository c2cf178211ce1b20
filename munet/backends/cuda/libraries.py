"""``munet.backends.cuda.preferred_blas_library`` and ``preferred_linalg_library``: which vendor
library MuNet's cuda ops call.

Matmuls on cuda call cuBLAS (``cublasGemmStridedBatchedEx``, ``kernels_blas.py``), so the BLAS
answer is ``Cublas`` and asking for cuBLASLt or CK raises, as PyTorch does where it was built
without them. MuNet's cuda linear algebra calls neither cuSOLVER nor MAGMA, so the linalg answer is
``Default`` and asking for either raises.
"""

from __future__ import annotations

import enum


class BlasBackend(enum.Enum):
    """PyTorch's ``torch._C._BlasBackend`` values."""

    Default = 0
    Cublas = 1
    Cublaslt = 2
    Ck = 3


class LinalgBackend(enum.Enum):
    """PyTorch's ``torch._C._LinalgBackend`` values."""

    Default = 0
    Cusolver = 1
    Magma = 2


_BLAS_NAMES = {"default": BlasBackend.Default, "cublas": BlasBackend.Cublas, "hipblas": BlasBackend.Cublas,
               "cublaslt": BlasBackend.Cublaslt, "hipblaslt": BlasBackend.Cublaslt, "ck": BlasBackend.Ck}  # fmt: skip
_LINALG_NAMES = {"default": LinalgBackend.Default, "cusolver": LinalgBackend.Cusolver, "magma": LinalgBackend.Magma}


def _chosen(backend, names: dict, kind: type, op: str):
    if isinstance(backend, kind):
        return backend
    if isinstance(backend, str) and backend.lower() in names:
        return names[backend.lower()]
    raise RuntimeError(f"{op}: unknown backend {backend!r}; choose one of {sorted(names)}")


def preferred_blas_library(backend=None) -> BlasBackend:
    """The BLAS library of cuda matmuls: cuBLAS (``"cublas"`` or ``"default"`` may be asked for)."""
    if backend is not None:
        chosen = _chosen(backend, _BLAS_NAMES, BlasBackend, "preferred_blas_library")
        if chosen not in (BlasBackend.Default, BlasBackend.Cublas):
            raise RuntimeError(f"Cannot set preferred backend to {chosen.name}: MuNet's cuda matmuls call cuBLAS")
    return BlasBackend.Cublas


def preferred_linalg_library(backend=None) -> LinalgBackend:
    """The linear-algebra library of cuda ops: MuNet's own (``Default``); only ``"default"`` may be asked for."""
    if backend is not None:
        chosen = _chosen(backend, _LINALG_NAMES, LinalgBackend, "preferred_linalg_library")
        if chosen is not LinalgBackend.Default:
            raise RuntimeError(
                f"Cannot set preferred backend to {chosen.name}: MuNet's cuda linear algebra calls neither cuSOLVER "
                "nor MAGMA"
            )
    return LinalgBackend.Default
