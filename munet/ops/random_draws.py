"""Random draws PyTorch offers at the torch level and as in-place methods beyond ``random.py``'s:
``poisson``, ``binomial`` (the samplers of ``munet.distributions``), ``Tensor.cauchy_`` and
``Tensor.geometric_`` (inverse-CDF transforms of uniform draws, on ``generator``)."""

from __future__ import annotations

import math

__all__ = ["poisson", "binomial"]
__tensor_methods__ = ["cauchy_", "geometric_"]


def _no_generator(name: str, generator) -> None:
    if generator is not None:
        raise ValueError(f"{name}: generator= is not supported by MuNet's {name} sampler; seed it with "
                         f"munet.manual_seed instead")  # fmt: skip


def poisson(input, generator=None):
    """Poisson counts with rates ``input`` (a float tensor of the same dtype; no gradient)."""
    from munet.distributions import Poisson

    _no_generator("poisson", generator)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"poisson: expected a floating point tensor of rates, got {input.dtype.name}")
    if input.numel() and bool((input < 0).any()):
        raise RuntimeError("poisson: invalid Poisson rate, expected rate to be non-negative")
    return Poisson(input.detach(), validate_args=False).sample()


def binomial(count, prob, generator=None):
    """Binomial counts of ``count`` trials with success probability ``prob`` (float tensors)."""
    from munet.distributions import Binomial

    _no_generator("binomial", generator)
    if not count.dtype.is_floating_point or not prob.dtype.is_floating_point:
        raise RuntimeError(f"binomial: expected floating point count and prob, got {count.dtype.name} and "
                           f"{prob.dtype.name}")  # fmt: skip
    return Binomial(count.detach(), probs=prob.detach(), validate_args=False).sample().to(prob.dtype)


def _uniform_like(self, generator):
    import munet

    return munet.empty(self.shape, dtype=self.dtype, device=self.device).uniform_(generator=generator)


def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator=None):
    """Fill with Cauchy(median, sigma) draws: ``median + sigma * tan(pi (u - 1/2))``."""
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"cauchy_: expected a floating point tensor, got {self.dtype.name}")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_: expects sigma > 0.0, but found sigma={sigma}")
    u = _uniform_like(self, generator)
    return self.copy_(median + sigma * ((u - 0.5) * math.pi).tan())


def geometric_(self, p: float, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_: p must be > 0 and < 1, got {p}")
    u = _uniform_like(self.float() if not self.dtype.is_floating_point else self, generator)
    tiny = 2.0**-126
    return self.copy_((u.clamp_min(tiny).log() / math.log1p(-p)).ceil().clamp_min(1))
