"""``munet.backends.cuda.matmul``: PyTorch's settable cuBLAS flags.

``allow_tf32`` (default False, as in PyTorch) lets float32 matmuls on cuda use TF32 tensor cores
(a 10-bit mantissa for the products, float32 accumulation): read at each matmul, so setting it
takes effect at the next call. ``allow_fp16_reduced_precision_reduction`` and
``allow_bf16_reduced_precision_reduction`` (default True) let cuBLAS reduce the partial sums of a
split-K float16/bfloat16 GEMM in the output type; cleared, every reduction stays in float32
(``CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION``), as in PyTorch.
"""

from __future__ import annotations

_DEFAULTS = {
    "allow_tf32": False,
    "allow_fp16_reduced_precision_reduction": True,
    "allow_bf16_reduced_precision_reduction": True,
}


class MatmulFlags:
    """The flag namespace ``munet.backends.cuda.matmul`` (process-wide, as in PyTorch)."""

    __slots__ = tuple(_DEFAULTS)

    def __init__(self):
        for name, value in _DEFAULTS.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value) -> None:
        if name not in _DEFAULTS:
            raise AttributeError(f"Unknown attribute {name} (munet.backends.cuda.matmul has {sorted(_DEFAULTS)})")
        if not isinstance(value, bool):
            raise TypeError(f"munet.backends.cuda.matmul.{name}: expected a bool, got {type(value).__name__}")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return "munet.backends.cuda.matmul(" + ", ".join(f"{n}={getattr(self, n)}" for n in _DEFAULTS) + ")"


matmul = MatmulFlags()


def is_built() -> bool:
    """Whether this MuNet can drive CUDA devices: CuPy imports (a device need not be present; see
    ``munet.cuda.is_available``)."""
    import importlib.util

    return importlib.util.find_spec("cupy") is not None
