"""PyTorch's older torch-level norms: ``renorm`` (rescale slices whose norm exceeds a bound),
``norm_except_dim`` (weight norm's per-slice norm), and the deprecated ``frobenius_norm`` and
``nuclear_norm`` (PyTorch warns and computes ``linalg``'s). Composites of ``linalg`` norms."""

from __future__ import annotations

import warnings

from munet.ops._utils import wrap_dim
from munet.ops.elementwise import _float_input, _out, where
from munet.ops.linalg_norm import matrix_norm, vector_norm

__all__ = ["renorm", "norm_except_dim", "frobenius_norm", "nuclear_norm"]
__tensor_methods__ = ["renorm", "renorm_"]


def renorm(input, p: float, dim: int, maxnorm: float, *, out=None):
    """Each slice ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` scaled to norm
    ``maxnorm`` (by ``maxnorm / (norm + 1e-7)``, as PyTorch); the others unchanged."""
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    x = _float_input(input)
    d = wrap_dim(dim, x.ndim, "renorm")
    others = tuple(i for i in range(x.ndim) if i != d)
    norm = vector_norm(x, p, others, keepdim=True)
    factor = where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return _out(x * factor, out)


def renorm_(self, p: float, dim: int, maxnorm: float):
    return self.copy_(renorm(self.clone(), p, dim, maxnorm))  # the graph keeps the old values, not self


def norm_except_dim(v, pow: float = 2, dim: int = 0):  # noqa: A002 - PyTorch's name
    """The ``pow``-norm of ``v`` over every dim but ``dim``, shaped to broadcast against ``v``
    (``dim=-1``: the norm of all of ``v``)."""
    if dim == -1:
        return vector_norm(v, pow)
    d = wrap_dim(dim, v.ndim, "norm_except_dim")
    others = tuple(i for i in range(v.ndim) if i != d)
    return vector_norm(v, pow, others, keepdim=True)


def frobenius_norm(input, dim, keepdim: bool = False, *, out=None):
    """Deprecated in PyTorch: ``linalg.vector_norm(input, 2, dim, keepdim)``."""
    warnings.warn("frobenius_norm is deprecated; use linalg.vector_norm(A, 2., dim, keepdim)", UserWarning, 2)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"frobenius_norm: expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    return _out(vector_norm(input, 2, dims, keepdim=keepdim), out)


def nuclear_norm(input, dim=None, keepdim: bool = False, *, out=None):
    """Deprecated in PyTorch: ``linalg.matrix_norm(input, 'nuc', dim, keepdim)`` (``dim`` default
    (-2, -1) on a matrix); ``nuclear_norm(input, keepdim)`` is also accepted, as PyTorch."""
    warnings.warn("nuclear_norm is deprecated; use linalg.matrix_norm(A, 'nuc', dim, keepdim)", UserWarning, 2)
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(f"nuclear_norm: expected a 2D tensor, got {input.ndim}D")
        dim = (-2, -1)
    return _out(matrix_norm(input, "nuc", tuple(dim), keepdim=keepdim), out)
