"""PyTorch's function forms of in-place tensor methods: ``munet.abs_(x)`` is ``x.abs_()``, the
same function object, so autograd and the version counter behave as for the method. Also
``munet.fill`` (an out-of-place fill) and ``munet.detach``/``detach_``."""

from __future__ import annotations

from munet import _dtype as D
from munet._tensor import Tensor
from munet._tensor_surface import resize_as_
from munet.ops.copy import fill_, zero_
from munet.ops.elementwise import (
    abs_,
    clamp_,
    clamp_max_,
    clamp_min_,
    clip_,
    exp_,
    nan_to_num_,
    neg_,
    negative_,
)
from munet.ops.elementwise_math import (
    acos_,
    acosh_,
    arccos_,
    arccosh_,
    arcsin_,
    arcsinh_,
    arctan_,
    arctanh_,
    asin_,
    asinh_,
    atan_,
    atanh_,
    ceil_,
    cos_,
    cosh_,
    deg2rad_,
    erf_,
    erfc_,
    exp2_,
    expm1_,
    fix_,
    floor_,
    frac_,
    log1p_,
    log2_,
    log10_,
    log_,
    logit_,
    rad2deg_,
    reciprocal_,
    round_,
    rsqrt_,
    sigmoid_,
    sin_,
    sinh_,
    sqrt_,
    square_,
    tan_,
    tanh_,
    trunc_,
    xlogy_,
)
from munet.ops.linalg import addmv_
from munet.ops.special import i0_, ldexp_, sinc_

__all__ = [
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
    "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
    "deg2rad_", "detach", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill", "fill_", "fix_", "floor_",
    "frac_", "i0_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_",
    "rad2deg_", "reciprocal_", "resize_as_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
    "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_",
]  # fmt: skip

detach = Tensor.detach
detach_ = Tensor.detach_


def fill(input: Tensor, value) -> Tensor:
    """A new tensor shaped like ``input`` with every element ``value`` (a number or a 0-dim tensor,
    which receives the summed gradient; ``input`` receives zeros), as ``torch.fill``."""
    from munet.ops.creation import zeros_like
    from munet.ops.elementwise import where

    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(
                f"fill only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
        value = value.to(input.dtype)
    else:
        value = input.new_full((), value)
    return where(zeros_like(input, dtype=D.bool_), input, value)
