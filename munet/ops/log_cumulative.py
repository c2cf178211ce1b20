"""``logcumsumexp``: the running ``log(sum(exp(x)))`` along a dim, as a log-depth (Hillis-Steele)
scan of ``logaddexp`` over shifted copies, so each prefix is exact in float32 however far its
values lie below the overall maximum (``log(cumsum(exp(x - max)))`` would underflow there)."""

from __future__ import annotations

import math

from munet.ops._utils import wrap_dim
from munet.ops.elementwise import _float_input, _out
from munet.ops.movement import cat
from munet.ops.special import logaddexp

__all__ = ["logcumsumexp"]
__tensor_methods__ = ["logcumsumexp"]


def logcumsumexp(input, dim: int, *, out=None):
    """``log(cumsum(exp(input), dim))`` computed stably; ``-inf`` entries add nothing."""
    import munet

    x = _float_input(input)
    if x.ndim == 0:
        return _out(x.clone(), out)
    d = wrap_dim(dim, x.ndim, "logcumsumexp")
    n = x.shape[d]
    shift = 1
    while shift < n:
        shape = list(x.shape)
        shape[d] = shift
        padding = munet.full(shape, -math.inf, dtype=x.dtype, device=x.device)
        x = logaddexp(x, cat([padding, x.narrow(d, 0, n - shift)], d))
        shift *= 2
    return _out(x, out)
