"""QR factorization in LAPACK's compact form: ``geqrf`` (Householder reflectors below the
diagonal, R on and above it, and their scales ``tau``) and ``ormqr`` (multiplying a matrix by the
Q those reflectors define, without forming Q).

``geqrf`` is a primitive with one kernel per backend (NumPy's ``qr(mode='raw')`` on the CPU); as in
PyTorch it has no gradient. ``ormqr`` is a composite: one rank-1 update per reflector, in public
ops, so it is differentiable in all three inputs and runs on every device."""

from __future__ import annotations

from collections import namedtuple

from munet.ops._registry import Meta, apply, define
from munet.ops.creation import ones_like, zeros_like
from munet.ops.linalg_factor import check_matrix, outs
from munet.ops.movement import cat

__all__ = ["geqrf", "ormqr"]
__tensor_methods__ = ["geqrf", "ormqr"]

GeqrfResult = namedtuple("geqrf", "a tau")


def _geqrf_meta(a):
    check_matrix("geqrf", a)
    m, n = a.shape[-2:]
    return Meta(tuple(a.shape), a.dtype), Meta(tuple(a.shape[:-2]) + (min(m, n),), a.dtype)


def _geqrf_backward(ctx, grad_a, grad_tau):
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


geqrf_op = define("geqrf", inputs=("self",), outputs=("a", "tau"), meta=_geqrf_meta, backward=_geqrf_backward)


def geqrf(input, *, out=None):
    """``(a, tau)``: R in and above the diagonal of ``a``, the Householder vectors ``v_i`` (unit
    diagonal implied) below it, with ``Q = H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T`` (LAPACK's geqrf)."""
    return outs(GeqrfResult(*apply(geqrf_op, input)), out)


def _reflector(input, i: int):
    """``v_i``: column ``i`` of ``input`` below the diagonal, 1 on it, 0 above."""
    column = input[..., :, i]
    return cat([zeros_like(column[..., :i]), ones_like(column[..., i : i + 1]), column[..., i + 1 :]], -1)


def ormqr(input, tau, other, left: bool = True, transpose: bool = False, *, out=None):
    """``op(Q) @ other`` (``left``) or ``other @ op(Q)``, ``op`` the transpose when ``transpose``, with
    ``Q`` the product of ``geqrf``'s reflectors held in ``input`` and ``tau``."""
    check_matrix("ormqr", input)
    check_matrix("ormqr", other, role="other")
    k = tau.shape[-1] if tau.ndim else 0
    m = other.shape[-2] if left else other.shape[-1]
    if input.shape[-2] != m:
        raise RuntimeError(f"ormqr: input.shape[-2] must be equal to other.shape[{-2 if left else -1}], got "
                           f"{input.shape[-2]} and {m}")  # fmt: skip
    if k > input.shape[-1] or k > m:
        raise RuntimeError(f"ormqr: tau.shape[-1] must be less than or equal to input.shape[-1] and to {m}, got {k}")
    if tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise RuntimeError(f"ormqr: Expected batch dimensions of tau to be equal to input.shape[:-2], got "
                           f"{list(tau.shape)}")  # fmt: skip
    # Q C applies H_k first; Q^T C and C Q apply H_1 first; C Q^T applies H_k first
    order = range(k) if left == transpose else reversed(range(k))
    c = other
    for i in order:
        v = _reflector(input, i)
        scale = tau[..., i, None, None]
        if left:
            c = c - scale * (v.unsqueeze(-1) * (v.unsqueeze(-2) @ c))
        else:
            c = c - scale * ((c @ v.unsqueeze(-1)) * v.unsqueeze(-2))
    return outs(c, out)
