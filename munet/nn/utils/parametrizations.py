"""``munet.nn.utils.parametrizations``: weight_norm, spectral_norm and orthogonal, as PyTorch's.

Each registers a parametrization with :func:`munet.nn.utils.parametrize.register_parametrization`,
so the state dict keys are PyTorch's: ``parametrizations.weight.original0`` (g) and
``original1`` (v) for weight_norm; ``parametrizations.weight.original`` plus the power-iteration
vectors ``parametrizations.weight.0._u`` / ``_v`` for spectral_norm; ``original`` and the buffer
``parametrizations.weight.0.base`` for orthogonal.
"""

from __future__ import annotations

import numpy as np

import munet
import munet.nn.functional as F
from munet._tensor import Tensor
from munet.autograd.grad_mode import no_grad
from munet.nn.module import Module
from munet.nn.utils import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm over every dimension but ``dim``, kept as size-1 dims (all of them when ``dim=-1``)."""
    if dim == -1:
        return munet.linalg.vector_norm(v)
    others = tuple(d for d in range(v.ndim) if d != dim)
    return munet.linalg.vector_norm(v, 2, dim=others, keepdim=True)


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """``weight = g * v / ||v||`` with the norm over every dim but ``dim`` (all of them for ``None``)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = munet.randn(h, dtype=weight.dtype, device=weight.device)
            v = munet.randn(w, dtype=weight.dtype, device=weight.device)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        with no_grad():
            weight_mat = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(munet.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(munet.mv(weight_mat.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = munet.vdot(u, munet.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Module:
    """``weight / sigma(weight)``, the largest singular value estimated by power iteration (one step
    per training-mode access); ``dim`` defaults to 1 for ConvTranspose layers, else 0. The starting
    vectors are random: load a state dict to reproduce PyTorch's numbers exactly."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        transposed = (munet.nn.ConvTranspose1d, munet.nn.ConvTranspose2d, munet.nn.ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of ``a``'s QR decomposition with the signs that make ``diag(R)`` positive."""
    q, r = munet.linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.size(-2), q.size(-1)
    eye = munet.eye(k, dtype=q.dtype, device=q.device)
    eps = 10.0 * n * float(np.finfo(q.dtype.np).eps)
    return bool(munet.allclose(q.mT @ q, eye, atol=eps))


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        n, k = x.size(-2), x.size(-1)
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:
                x = munet.cat([x, munet.zeros(*x.shape[:-2], n, n - k, dtype=x.dtype, device=x.device)], dim=-1)
            a = x - x.mT
            if self.orthogonal_map == "matrix_exp":
                q = munet.linalg.matrix_exp(a)
            else:
                eye = munet.eye(n, dtype=a.dtype, device=a.device)
                q = munet.linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (a * a).sum(dim=-2))
            q = munet.linalg.householder_product(a, tau)
            # the diagonal of x holds the signs (1 or -1); they are not differentiated
            q = q * x.diagonal(dim1=-2, dim2=-1).detach().to(munet.int32).to(q.dtype).unsqueeze(-2)
        if self._buffers.get("base") is not None:
            q = self.base @ q
        return q.mT if transposed else q

    def right_inverse(self, q: Tensor) -> Tensor:
        if tuple(q.shape) != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of shape {tuple(q.shape)}."
            )
        with no_grad():
            q_init = q
            n, k = q.size(-2), q.size(-1)
            if n < k:
                q = q.mT
                n, k = k, n
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:  # complete q into a full n x n orthogonal matrix
                filler = munet.randn(*q.shape[:-2], n, n - k, dtype=q.dtype, device=q.device)
                q = _make_orthogonal(munet.cat([q, filler], dim=-1))
            self.base = q
            # -Id: householder(zeros) is the identity, and the diagonal carries the signs
            neg_eye = munet.zeros_like(q_init)
            neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_eye


def orthogonal(
    module: Module, name: str = "weight", orthogonal_map: str | None = None, *, use_trivialization: bool = True
):
    """An orthogonal (or semi-orthogonal) ``weight``: ``"matrix_exp"`` (the default for square
    matrices), ``"cayley"`` or ``"householder"`` (the default otherwise), over a base matrix kept as
    the buffer ``base``. ``use_trivialization=False`` is refused (it needs ``geqrf``)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.size(-2) == weight.size(-1) else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}'
        )
    if not use_trivialization:
        raise RuntimeError(
            "orthogonal: use_trivialization=False is not supported by MuNet (its right inverse needs geqrf, "
            "which MuNet does not have); use the default use_trivialization=True"
        )
    orth = _Orthogonal(weight, orthogonal_map)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
