"""``munet.backends.cuda.preferred_blas_library`` and ``preferred_linalg_library``: which vendor
library MuNet's cuda ops call.

Matmuls on cuda call cuBLAS (``cublasGemmStridedBatchedEx``, ``kernels_blas.py``), so the BLAS
answer is ``Cublas`` and asking for cuBLASLt or CK raises, as PyTorch does where it was built
without them. The cuda factorizations call cuSOLVER (through CuPy, ``kernels_linalg.py``), so the
linalg preference is PyTorch's ``Default`` until ``"cusolver"`` is asked for (both mean cuSOLVER
here), and asking for MAGMA raises.
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


_linalg_preference = [LinalgBackend.Default]


def preferred_linalg_library(backend=None) -> LinalgBackend:
    """The preferred linear-algebra library of cuda ops, as PyTorch: ``Default`` until set; ``"cusolver"``
    and ``"default"`` may be set (MuNet's cuda factorizations call cuSOLVER either way)."""
    if backend is not None:
        chosen = _chosen(backend, _LINALG_NAMES, LinalgBackend, "preferred_linalg_library")
        if chosen not in (LinalgBackend.Default, LinalgBackend.Cusolver):
            raise RuntimeError(
                f"Cannot set preferred backend to {chosen.name}: MuNet's cuda linear algebra calls cuSOLVER"
            )
        _linalg_preference[0] = chosen
    return _linalg_preference[0]
