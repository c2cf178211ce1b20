"""Gradient clipping by total norm and by value, as ``torch.nn.utils`` does it."""

from __future__ import annotations

import warnings

import munet
from munet._tensor import Tensor
from munet.autograd.grad_mode import no_grad


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


@no_grad()
def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together, as if concatenated."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = [t for t in tensors if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return munet.tensor(0.0)
    # as PyTorch: per-tensor norms in each tensor's dtype, then the norm of those norms
    norms = [munet.linalg.vector_norm(t.detach(), norm_type) for t in tensors]
    dtype = norms[0].dtype
    for n in norms[1:]:
        dtype = munet.promote_types(dtype, n.dtype)
    total = munet.linalg.vector_norm(munet.stack([n.to(dtype) for n in norms]), norm_type)
    if error_if_nonfinite and not bool(munet.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`"
        )
    return total


@no_grad()
def clip_grad_norm_(
    parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None
) -> Tensor:
    """Scale all gradients so their total norm is at most ``max_norm``; returns the norm before clipping."""
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = _grads(parameters)
    if any(g.is_sparse for g in grads):  # PyTorch's norms refuse them too
        raise RuntimeError(
            "clip_grad_norm_: sparse gradients are not supported, as in PyTorch (whose vector norms refuse sparse "
            "tensors); compute a norm from g.coalesce()._values() and scale with clip_grads_with_norm_"
        )
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


@no_grad()
def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale all gradients by ``min(1, max_norm / (total_norm + 1e-6))``, ``total_norm`` computed beforehand
    (for example with ``get_total_norm``, possibly over several groups)."""
    grads = _grads(parameters)
    if not grads:
        return
    coef = (float(max_norm) / (munet.as_tensor(total_norm) + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(g.dtype))


def clip_grad_norm(
    parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None
) -> Tensor:
    """Deprecated alias of ``clip_grad_norm_`` (warns ``FutureWarning``, as PyTorch)."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(-clip_value, clip_value)
