"""The eigendecomposition of a general square matrix: ``munet.linalg.eig`` and ``eigvals``.

One primitive, ``linalg_eig``, computes both results with LAPACK's ``geev`` (NumPy's, on the cpu):
complex eigenvalues ``L`` and eigenvectors ``V`` with ``A V = V diag(L)``, each column of ``V`` of
unit Euclidean norm (and its largest component real, as LAPACK normalizes it). The results are
complex for real input too (float32 gives complex64, float64 complex128), and complex tensors live
on the cpu and run eagerly (docs/fft.md), so these functions do as well.

The gradient is PyTorch's (``linalg_eig_backward``), in its convention for complex gradients::

    gA = V^-H (diag(gL) + offdiag((V^H gV - V^H V diag(Re(diag(V^H gV)))) / conj(E))) V^H

with ``E_ij = L_j - L_i``; a real ``A`` gets the real part. An eigenvector is defined only up to a
phase ``e^{i phi}``, so the gradient exists only for losses that do not depend on it: where
``Im(diag(V^H gV))`` is not near zero backward raises, as PyTorch's does. It is finite only for
distinct eigenvalues. ``V^-H`` is a complex solve, done as the real solve of twice the size
(``[[Re, -Im], [Im, Re]]``) through ``linalg.solve``, so the rule is public ops and differentiable
again.
"""

from __future__ import annotations

from collections import namedtuple

from munet.ops import complex as C
from munet.ops._autocast import float32_region_under_autocast
from munet.ops._registry import Meta, apply
from munet.ops.creation import eye
from munet.ops.linalg import matmul
from munet.ops.linalg_factor import check_matrix, outs
from munet.ops.linalg_solve import solve
from munet.ops.movement import cat, diag_embed, diagonal

__linalg__ = ["eig", "eigvals"]
__all__ = []

Eig = namedtuple("linalg_eig", "eigenvalues eigenvectors")


def _check_eig_input(op: str, A) -> None:
    if A.dtype.is_complex:  # check_matrix speaks of the real dtypes the factorizations take
        if A.ndim < 2:
            raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
        if A.shape[-1] != A.shape[-2]:
            raise RuntimeError(
                f"{op}: A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} matrices"
            )
        return
    check_matrix(op, A, square=True)


def _eig_meta(A):
    _check_eig_input("linalg.eig", A)
    dtype = A.dtype if A.dtype.is_complex else A.dtype.to_complex()
    return Meta(tuple(A.shape[:-1]), dtype), Meta(tuple(A.shape), dtype)


def complex_solve(A, B):
    """``X`` with ``A X = B`` for complex square ``A`` (batched): the real system of twice the size
    ``[[Re A, -Im A], [Im A, Re A]] [Re X; Im X] = [Re B; Im B]`` through ``linalg.solve``."""
    Ar, Ai, Br, Bi = C.real(A), C.imag(A), C.real(B), C.imag(B)
    n = A.shape[-1]
    blocks = cat([cat([Ar, -Ai], -1), cat([Ai, Ar], -1)], -2)
    X = solve(blocks, cat([Br, Bi], -2))
    return C.complex(X[..., :n, :], X[..., n:, :])


PHASE_TOLERANCE = 1e-2  # PyTorch's: allclose(Im(diag(V^H gV)), 0, rtol=1e-2, atol=1e-2)


def _check_phase_invariant(diag_VhgV) -> None:  # noqa: N803 - the formula's name
    """Raise where the loss depends on the eigenvectors' phases (a host read: eig runs eagerly)."""
    im = C.imag(diag_VhgV)
    if im.numel() and not bool((im.abs() <= PHASE_TOLERANCE).all()):
        raise RuntimeError(
            "linalg_eig_backward: The eigenvectors in the complex case are specified up to multiplication by "
            "e^{i phi}. The specified loss function depends on this quantity, so it is ill-defined."
        )


def _eig_backward(ctx, gL, gV):  # noqa: N803 - the formula's names
    L, V = ctx.saved_tensor("eigenvalues"), ctx.saved_tensor("eigenvectors")
    Vh = C.adjoint(V)
    if gV is None:
        gA = complex_solve(Vh, gL.unsqueeze(-1) * Vh)
    else:
        VhgV = matmul(Vh, gV)
        d = diagonal(VhgV, 0, -2, -1)
        _check_phase_invariant(d)
        n = L.shape[-1]
        identity = eye(n, dtype=L.dtype.to_real(), device=L.device)
        Lc = C.conj(L)
        E = Lc.unsqueeze(-2) - Lc.unsqueeze(-1) + identity  # conj(l_j - l_i), 1 on the diagonal
        inner = (VhgV - matmul(Vh, V * C.real(d).unsqueeze(-2))) / E * (1 - identity)
        if gL is not None:
            inner = inner + diag_embed(gL)
        gA = complex_solve(Vh, matmul(inner, Vh))
    return gA if ctx.input_dtypes[0].is_complex else C.real(gA)


eig_op = C.define_wirtinger(
    "linalg_eig",
    inputs=("A",),
    outputs=("eigenvalues", "eigenvectors"),
    meta=_eig_meta,
    backward=_eig_backward,
    saves=("eigenvalues", "eigenvectors"),
    backward_name="LinalgEigBackward0",
)


def _check_out_dtypes(op: str, result, out) -> None:
    """PyTorch refuses ``out=`` tensors that the complex results cannot be cast to."""
    if out is None:
        return
    names = ("eigenvalues", "eigenvectors")
    pairs = zip(names, result, out) if isinstance(out, (tuple, list)) else [(names[0], result[0], out)]
    for name, r, o in pairs:
        if hasattr(o, "dtype") and not o.dtype.is_complex:
            raise RuntimeError(
                f"{op}: Expected {name} to be safely castable from {r.dtype.name} dtype, but got {name} with dtype "
                f"{o.dtype.name}"
            )


@float32_region_under_autocast
def eig(A, *, out=None):
    """``(eigenvalues, eigenvectors)`` of square ``A`` (batched): complex, ``A V = V diag(L)``, each
    column of V of unit norm, in LAPACK's order. The gradient is defined only for losses that do not
    depend on the eigenvectors' phases (backward raises otherwise) and distinct eigenvalues.

    >>> L, V = munet.linalg.eig(munet.tensor([[0.0, -1.0], [1.0, 0.0]]))  # L = [i, -i]
    """
    _check_eig_input("linalg.eig", A)
    result = Eig(*apply(eig_op, A))
    _check_out_dtypes("linalg.eig", result, out)
    return outs(result, out)


@float32_region_under_autocast
def eigvals(A, *, out=None):
    """The complex eigenvalues of square ``A`` (batched), in LAPACK's order, as :func:`eig`'s."""
    _check_eig_input("linalg.eigvals", A)
    L = apply(eig_op, A)[0]
    _check_out_dtypes("linalg.eigvals", (L,), out)
    return outs(L, out)
