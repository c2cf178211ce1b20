"""Matrix functions and products of ``munet.linalg``: ``matrix_exp`` (a primitive: its number of
squarings depends on the data, which a traced graph cannot branch on) and composites in public
ops, whose gradients come from autograd: matrix_power, multi_dot, cross, vecdot, vander (and the
``linalg.matmul``/``linalg.diagonal`` spellings)."""

from __future__ import annotations

import math

from munet import _dtype as D
from munet.ops._autocast import float32_region_under_autocast
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import wrap_dim
from munet.ops.creation import eye, full, ones, zeros_like
from munet.ops.elementwise import where
from munet.ops.linalg import matmul
from munet.ops.linalg_factor import outs, svdvals
from munet.ops.linalg_norm import matrix_norm
from munet.ops.linalg_solve import inv, inv_ex, solve
from munet.ops.movement import cat
from munet.ops.movement import diagonal as _diagonal
from munet.ops.reduce import sum as sum_

__all__ = ["matrix_power", "matrix_exp", "orgqr"]
__linalg__ = [
    "matrix_power", "matrix_exp", "multi_dot", "cross", "vecdot", "vander", "matmul", "diagonal", "cond", "tensorinv",
    "tensorsolve", "householder_product",
]  # fmt: skip
__tensor_methods__ = ["matrix_power", "matrix_exp", "orgqr"]


def _check_square(op: str, A) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"{op}: A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} matrices"
        )


def matrix_power(A, n: int, *, out=None):
    """``A`` to the integer power ``n`` by repeated squaring: ``n = 0`` gives the identity (with a
    zero gradient), ``n < 0`` powers ``inv(A)``. Integer matrices take ``n >= 0``."""
    _check_square("linalg.matrix_power", A)
    n = int(n)
    if n == 0:
        identity = eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(A.shape)
        return outs(where(identity == identity, identity, A), out)  # A's gradient: zeros, as PyTorch's
    if n < 0:
        A, n = inv(A), -n
    result, square = None, A
    while n:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if n:
            square = matmul(square, square)
    return outs(result.clone() if result is A else result, out)


def _matrix_exp_meta(A):
    _check_square("linalg.matrix_exp", A)
    if A.dtype not in (D.float32, D.float64):
        raise RuntimeError(
            f"linalg.matrix_exp: Expected a floating point or complex tensor as input. Got {A.dtype.name}"
        )
    return Meta(tuple(A.shape), A.dtype)


def _matrix_exp_backward(ctx, g):
    """The Frechet derivative's adjoint: the top-right block of ``exp([[A^T, g], [0, A^T]])``."""
    At = ctx.saved_tensor("A").transpose(-2, -1)
    n = At.shape[-1]
    block = cat([cat([At, g], -1), cat([zeros_like(At), At], -1)], -2)
    return matrix_exp(block)[..., :n, n:]


matrix_exp_op = define(
    "linalg_matrix_exp",
    inputs=("A",),
    meta=_matrix_exp_meta,
    backward=_matrix_exp_backward,
    saves=("A",),
    backward_name="LinalgMatrixExpBackward0",
)


@float32_region_under_autocast
def matrix_exp(A):
    """``exp(A) = sum_k A^k / k!`` (batched), by scaling and squaring; differentiable, and its
    gradient is again a matrix exponential (of a block matrix twice A's size)."""
    return apply(matrix_exp_op, A)


def _chain_order(sizes: list[int]) -> list[list[int]]:
    """The cheapest parenthesization of a matrix chain (classic dynamic programming):
    ``split[i][j]`` is where the product of matrices i..j splits."""
    n = len(sizes) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors, *, out=None):
    """``tensors[0] @ tensors[1] @ ...`` in the order with the fewest multiplications; the first
    tensor may be 1-D (a row vector) and the last 1-D (a column vector), the others are 2-D."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in allowed:
            which = "first" if i == 0 else "last" if i == len(tensors) - 1 else None
            what = f"the {which} tensor must be 1D or 2D" if which else f"tensor {i} must be 2D"
            raise RuntimeError(f"multi_dot(): {what} but got {t.ndim}D")
        if t.dtype is not tensors[0].dtype:
            raise RuntimeError(
                f"multi_dot(): all tensors must have be the same dtype but tensor 0 is {tensors[0].dtype.name} "
                f"and tensor {i} is {t.dtype.name}"
            )
    row, col = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = [
        tensors[0].unsqueeze(0) if row else tensors[0],
        *tensors[1:-1],
        tensors[-1].unsqueeze(-1) if col else tensors[-1],
    ]
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                f"{list(tensors[i + 1].shape)} cannot be multiplied"
            )
    split = _chain_order([mats[0].shape[0]] + [m.shape[1] for m in mats])

    def product(i: int, j: int):
        if i == j:
            return mats[i]
        k = split[i][j]
        return matmul(product(i, k), product(k + 1, j))

    result = product(0, len(mats) - 1)
    if row:
        result = result.squeeze(0)
    if col:
        result = result.squeeze(-1)
    return outs(result, out)


def _cross(op: str, input, other, dim: int):
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(
            f"{op}: inputs dimension {dim} must have length 3. Got {input.shape[dim]} and {other.shape[dim]}"
        )
    a = [input.narrow(dim, i, 1) for i in range(3)]
    b = [other.narrow(dim, i, 1) for i in range(3)]
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], dim)


def cross(input, other, *, dim: int = -1, out=None):
    """The 3-D cross product along ``dim``; the other dims broadcast (the ranks must be equal)."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = wrap_dim(dim, input.ndim, "linalg.cross")
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and {other.shape[d]}"
        )
    a = [input.narrow(d, i, 1) for i in range(3)]
    b = [other.narrow(d, i, 1) for i in range(3)]
    return outs(cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d), out)


def vecdot(x, y, *, dim: int = -1, out=None):
    """``sum(conj(x) * y, dim)`` with broadcasting."""
    from munet.ops.complex import conj

    if x.dtype is not y.dtype:
        raise RuntimeError(
            f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type {x.dtype.name} and y of type "
            f"{y.dtype.name} instead"
        )
    return outs(sum_(conj(x) * y, dim), out)


def vander(x, *, N=None):  # noqa: N803 - PyTorch's name
    """The Vandermonde matrix ``x[..., i] ** j`` for ``j`` in 0..N-1 (N defaults to x's length)."""
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else int(N)
    if n <= 1:
        raise RuntimeError(f"linalg.vander: N must be greater than 1, got {n}")
    powers = x.unsqueeze(-1).expand(tuple(x.shape) + (n - 1,))
    first = ones(tuple(x.shape) + (1,), dtype=x.dtype, device=x.device)
    return cat([first, powers], -1).cumprod(-1)


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """``linalg.diagonal``: :func:`munet.diagonal` with the last two dims as defaults."""
    return _diagonal(A, offset, dim1, dim2)


@float32_region_under_autocast
def cond(A, p=None, *, out=None):
    """The condition number ``norm(A, p) * norm(inv(A), p)``: for ``p`` None/2/-2 the ratio of the
    extreme singular values (any shape), else through the inverse (square A; inf where singular)."""
    if p in (None, 2, -2):
        s = svdvals(A)
        largest, smallest = s[..., 0], s[..., -1]
        return outs(largest / smallest if p != -2 else smallest / largest, out)
    _check_square("linalg.cond", A)
    inverse, info = inv_ex(A)
    singular = info > 0
    inverse = where(singular.unsqueeze(-1).unsqueeze(-1), zeros_like(inverse), inverse)  # no inf/nan into the norm
    result = matrix_norm(A, p) * matrix_norm(inverse, p)
    return outs(where(singular, full((), math.inf, dtype=result.dtype, device=result.device), result), out)


@float32_region_under_autocast
def tensorinv(A, ind: int = 2, *, out=None):
    """The inverse of ``A`` seen as a matrix of its first ``ind`` dims by the rest (whose sizes
    must multiply to the same number); the result has shape ``A.shape[ind:] + A.shape[:ind]``."""
    if ind <= 0:
        raise RuntimeError(f"linalg.tensorinv: Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError(
            f"linalg.tensorinv: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
            f"prod(self.shape[:ind]), but got {cols} != {rows}"
        )
    result = inv(A.reshape(rows, cols)).reshape(tuple(A.shape[ind:]) + tuple(A.shape[:ind]))
    return outs(result, out)


@float32_region_under_autocast
def tensorsolve(A, B, dims=None, *, out=None):
    """``X`` with ``tensordot(A, X, X.ndim) = B``: ``A`` seen as a matrix of ``B``'s dims by the
    rest; ``dims`` of ``A`` are moved to the end first."""
    if dims is not None:
        dims = [wrap_dim(d, A.ndim, "linalg.tensorsolve") for d in dims]
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    rest = tuple(A.shape[B.ndim :])
    if tuple(A.shape[: B.ndim]) != tuple(B.shape) or math.prod(rest) != B.numel():
        raise RuntimeError(
            f"linalg.tensorsolve: Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
            f"prod(self.shape[:other.ndim]), got A of shape {list(A.shape)} and B of shape {list(B.shape)}"
        )
    return outs(solve(A.reshape(B.numel(), -1), B.reshape(-1)).reshape(rest), out)


@float32_region_under_autocast
def householder_product(A, tau, *, out=None):
    """The first n columns of ``H_1 ... H_k`` with ``H_i = I - tau_i v_i v_i^T``, ``v_i`` column i of
    ``A`` below the diagonal with a 1 on it (LAPACK's orgqr: Q from ``geqrf``'s reflectors)."""
    op = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    k = tau.shape[-1] if tau.ndim else 0
    if m < n:
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < k:
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau.ndim != A.ndim - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(
            f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], got {list(tau.shape)}"
        )
    batch = tuple(A.shape[:-2])
    basis = eye(m, dtype=A.dtype, device=A.device)
    q = basis[:, :n].expand(batch + (m, n))
    for i in reversed(range(k)):
        v = cat([zeros_like(A[..., : i + 1, i]), A[..., i + 1 :, i]], -1) + basis[i]
        q = q - tau[..., i, None, None] * (v.unsqueeze(-1) * matmul(v.unsqueeze(-2), q))
    return outs(q, out)


def orgqr(input, tau):
    """``torch.orgqr``: :func:`munet.linalg.householder_product`."""
    return householder_product(input, tau)
