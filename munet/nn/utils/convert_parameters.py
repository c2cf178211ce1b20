"""Flatten parameters into one vector and back."""

from __future__ import annotations

import munet
from munet.autograd.grad_mode import no_grad


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-D tensor (differentiable)."""
    return munet.cat([p.reshape(-1) for p in parameters])


@no_grad()
def vector_to_parameters(vec, parameters) -> None:
    """Copy consecutive slices of ``vec`` into ``parameters`` (in place)."""
    if not isinstance(vec, munet.Tensor) or vec.ndim != 1:
        raise TypeError(f"vector_to_parameters: expected a 1-D tensor, got {type(vec).__name__}")
    offset = 0
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.numel() != total:
        raise ValueError(f"vector_to_parameters: vector has {vec.numel()} elements, parameters need {total}")
    for p in params:
        n = p.numel()
        p.copy_(vec[offset : offset + n].view_as(p))
        offset += n
