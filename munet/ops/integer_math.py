"""Number theory on integer tensors: ``gcd`` and ``lcm`` (and their in-place forms), by Euclid's
algorithm written in public elementwise ops (``fmod``, ``where``), so every device runs them.

Euclid's loop ends when every remainder is zero; the check reads the data on the host once per
step (at most about 1.45 * bits steps), so these two cannot be compiled by ``munet.compile``."""

from __future__ import annotations

from munet import _dtype as D
from munet.ops._utils import is_tensor
from munet.ops.elementwise import _out, where

__all__ = ["gcd", "gcd_", "lcm", "lcm_"]
__tensor_methods__ = ["gcd", "gcd_", "lcm", "lcm_"]


def _integer_pair(name: str, input, other):
    import munet

    if not is_tensor(other):
        other = munet.tensor(other, device=input.device)
    for t in (input, other):
        if t.dtype.is_floating_point or t.dtype is D.bool_:
            raise RuntimeError(f"{name}: expected integer tensors, got {t.dtype.name}")
    dtype = D.promote_types(input.dtype, other.dtype)
    return input.to(dtype), other.to(dtype)


def gcd(input, other, *, out=None):
    """The greatest common divisor of integer tensors (broadcast), non-negative; ``gcd(0, 0) = 0``."""
    a, b = _integer_pair("gcd", input, other)
    a, b = a.abs(), b.abs()
    a, b = a + b * 0, b + a * 0  # both in the broadcast shape
    while b.numel() and bool((b != 0).any()):
        nonzero = b != 0
        remainder = a.fmod(where(nonzero, b, 1))
        a, b = where(nonzero, b, a), where(nonzero, remainder, 0)
    return _out(a, out)


def lcm(input, other, *, out=None):
    """The least common multiple of integer tensors (broadcast), non-negative; 0 if either is 0."""
    a, b = _integer_pair("lcm", input, other)
    divisor = gcd(a, b)
    wide = D.int64  # as PyTorch's C++ int arithmetic: the product overflows only in the final cast
    multiple = (a.to(wide) // where(divisor == 0, 1, divisor).to(wide) * b.to(wide)).abs()
    return _out(where(divisor == 0, 0, multiple).to(a.dtype), out)


def gcd_(self, other):
    return self.copy_(gcd(self, other))


def lcm_(self, other):
    return self.copy_(lcm(self, other))
