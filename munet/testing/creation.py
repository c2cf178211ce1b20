"""``make_tensor``: a random tensor for tests, with ``torch.testing.make_tensor``'s ranges and options.

Floating values are uniform in ``[low, high)`` (default ``[-9, 9)``), integers uniform in
``[low, high)`` (default ``[-9, 10)``, clamped to the dtype's range) and bools uniform in {0, 1}.
``noncontiguous`` returns a view with stride 2 in the last dim, ``exclude_zero`` replaces zeros by
1 (integers) or the smallest normal number (floats).
"""

from __future__ import annotations

import collections.abc
import math
import warnings

import munet
from munet import _dtype as D

__all__ = ["make_tensor"]


def _clamp(a: float, low: float, high: float) -> float:
    return min(max(a, low), high)


def _low_high(dtype, low, high, *, lowest: float, highest: float, default_low: float, default_high: float):
    low = default_low if low is None else low
    high = default_high if high is None else high
    integral = not dtype.is_floating_point
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low!r} and high={high!r}")
    if low == high and not integral:
        warnings.warn(
            "Passing `low==high` to `torch.testing.make_tensor` for floating or complex types is deprecated since "
            "2.1 and will be removed in 2.3. Use `torch.full(...)` instead.",
            FutureWarning,
            stacklevel=3,
        )
    elif low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ValueError(
            f"The value interval specified by `low` and `high` is [{low}, {high}), but {dtype} only supports "
            f"[{lowest}, {highest})"
        )
    low, high = _clamp(low, lowest, highest), _clamp(high, lowest, highest)
    return (math.ceil(low), math.ceil(high)) if integral else (low, high)


def make_tensor(
    *shape,
    dtype,
    device,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format=None,
):
    """A tensor of ``shape`` filled with random values of ``dtype`` on ``device`` (see the module docstring)."""
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(
            "The parameters `noncontiguous` and `memory_format` are mutually exclusive, but got "
            f"noncontiguous={noncontiguous!r} and memory_format={memory_format!r}"
        )
    integral = not dtype.is_floating_point
    if requires_grad and integral:
        raise ValueError(
            f"`requires_grad=True` is not supported for boolean and integral dtypes, but got dtype={dtype!r}"
        )
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is D.bool_:
        low, high = _low_high(dtype, low, high, lowest=0, highest=2, default_low=0, default_high=2)
        result = munet.randint(low, high, shape, device=device).to(D.bool_)
    elif integral:
        info = munet.iinfo(dtype)
        highest = info.max + (1 if dtype is not D.int64 else 0)
        low, high = _low_high(dtype, low, high, lowest=info.min, highest=highest, default_low=-9, default_high=10)
        result = munet.randint(low, high, shape, dtype=dtype, device=device)
    else:
        info = munet.finfo(dtype)
        low, high = _low_high(dtype, low, high, lowest=info.min, highest=info.max, default_low=-9, default_high=9)
        result = munet.empty(shape, dtype=dtype, device=device)
        if high - low >= info.max:  # the width would overflow: draw half the interval and double it
            result.uniform_(low / 2, high / 2).mul_(2)
        else:
            result.uniform_(low, high)
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        replacement = 1 if integral else munet.finfo(dtype).tiny
        result.masked_fill_(result == 0, replacement)
    if not integral:
        result.requires_grad_(requires_grad)
    return result
