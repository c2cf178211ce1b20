"""Invertible transforms with log-det-Jacobians, as ``torch.distributions.transforms``.

A ``Transform`` maps ``x`` to ``y = t(x)``; ``t.inv`` is its inverse and
``t.log_abs_det_jacobian(x, y)`` is ``log |dy/dx|`` summed over the transform's event dims.
``TransformedDistribution`` composes them with a base distribution.
"""

from .. import constraints as constraints  # PyTorch's transforms module exposes it too
from .matrix import CorrCholeskyTransform, LowerCholeskyTransform, PositiveDefiniteTransform
from .structural import CatTransform, IndependentTransform, ReshapeTransform, StackTransform
from .transform import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "CatTransform",
    "ComposeTransform",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "ExpTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "TanhTransform",
    "Transform",
    "identity_transform",
]
