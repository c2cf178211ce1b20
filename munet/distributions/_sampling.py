"""Samplers munet has no primitive for, written in public ops on munet's generator.

``standard_gamma`` is Marsaglia and Tsang's rejection sampler, vectorized: every round draws a
normal and a uniform for the elements still pending and accepts where the squeeze test holds;
shapes below 1 use the boost ``Gamma(a) = Gamma(a + 1) * U ** (1 / a)``. Its gradient with
respect to the concentration is the implicit reparameterization ``dx/da = -(dF/da) / f(x)``
(F the regularized lower incomplete gamma, f the density), as PyTorch's ``_standard_gamma_grad``.
``poisson`` counts unit-rate exponential arrivals below the rate for small rates and uses the
Gamma-Poisson split ("Ahrens-Dieter" recursion) otherwise; ``binomial`` sums Bernoulli draws.
"""

import munet

from ._special import digamma, lgamma, series_terms

_MAX_ROUNDS = 1000


def _marsaglia_tsang(alpha):
    """Gamma(alpha, 1) draws for ``alpha >= 1`` (no gradient)."""
    d = alpha - 1.0 / 3.0
    c = 1.0 / (9.0 * d).sqrt()
    result = munet.zeros_like(alpha)
    pending = munet.ones_like(alpha, dtype=munet.bool)
    for _ in range(_MAX_ROUNDS):
        z = munet.randn(alpha.shape, dtype=alpha.dtype, device=alpha.device)
        u = munet.rand(alpha.shape, dtype=alpha.dtype, device=alpha.device)
        v = (1.0 + c * z) ** 3
        log_accept = 0.5 * z * z + d - d * v + d * munet.log(v.clamp(min=1e-30))
        accepted = pending & (v > 0) & (munet.log(u) < log_accept)
        result = munet.where(accepted, d * v, result)
        pending = pending & ~accepted
        if not bool(pending.any()):
            return result
    raise RuntimeError(f"standard_gamma: rejection sampler did not finish in {_MAX_ROUNDS} rounds")


def _gamma_sample(alpha):
    boosted = alpha < 1
    draw = _marsaglia_tsang(munet.where(boosted, alpha + 1, alpha))
    u = munet.rand(alpha.shape, dtype=alpha.dtype, device=alpha.device)
    boost = munet.where(boosted, u ** (1.0 / alpha), munet.ones_like(alpha))
    tiny = 2.0**-126 if alpha.dtype == munet.float32 else 2.0**-1022
    return (draw * boost).clamp(min=tiny)


def _incomplete_gamma_grad(alpha, x):
    """``d/dalpha P(alpha, x)`` from the series ``P = sum_n x^(a+n) e^-x / Gamma(a+n+1)``."""
    a, xs = alpha, x
    log_term = a * munet.log(xs) - xs - lgamma(a + 1)
    psi = digamma(a + 1)
    log_x = munet.log(xs)
    total = munet.zeros_like(a)
    for n in range(series_terms(xs)):
        if n:
            log_term = log_term + log_x - munet.log(a + n)
            psi = psi + 1.0 / (a + n)
        total = total + munet.exp(log_term) * (log_x - psi)
    return total


def standard_gamma_grad(alpha, x):
    """``dx/dalpha`` of a Gamma(alpha, 1) draw ``x`` at fixed CDF value.

    The series has terms of both signs, so it is summed in float64 on the CPU (a device without
    float64, such as Vulkan, gets the result back in ``alpha``'s dtype).
    """
    a, xs = alpha.detach().cpu().double(), x.detach().cpu().double()
    log_density = (a - 1) * munet.log(xs) - xs - lgamma(a)
    grad = -_incomplete_gamma_grad(a, xs) / munet.exp(log_density)
    return grad.to(alpha.dtype).to(alpha.device)


class _StandardGamma(munet.autograd.Function):
    @staticmethod
    def forward(ctx, alpha):
        x = _gamma_sample(alpha.detach())
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * standard_gamma_grad(alpha, x)


def standard_gamma(alpha):
    """Gamma(alpha, 1) draws, differentiable with respect to ``alpha`` (implicit reparameterization)."""
    return _StandardGamma.apply(alpha)


def poisson(rate):
    """Poisson(rate) counts as a float tensor of ``rate``'s dtype (no gradient)."""
    rate = rate.detach()
    counts = munet.zeros_like(rate)
    remaining = rate
    # Split off large rates: the arrival time of the m-th event is Gamma(m); if it falls before
    # the remaining rate the count gains m and the rest is Poisson(rate - T), else Binomial(m-1, rate/T).
    while bool((remaining > 16).any()):
        big = remaining > 16
        m = munet.where(big, munet.floor(remaining * 0.875), munet.ones_like(remaining))
        arrival = _gamma_sample(m)
        before = big & (arrival < remaining)
        after = big & ~before
        counts = counts + munet.where(before, m, munet.zeros_like(m))
        thinned = binomial(
            munet.where(after, m - 1, munet.zeros_like(m)), munet.where(after, remaining / arrival, munet.zeros_like(m))
        )
        counts = counts + thinned
        remaining = munet.where(before, remaining - arrival, munet.where(after, munet.zeros_like(remaining), remaining))
    elapsed = munet.zeros_like(rate)
    active = remaining > 0
    while bool(active.any()):
        elapsed = elapsed - munet.log(munet.rand(rate.shape, dtype=rate.dtype, device=rate.device))
        active = active & (elapsed < remaining)
        counts = counts + active.to(rate.dtype)
    return counts


def binomial(total_count, probs):
    """Binomial(total_count, probs) counts as a float tensor (no gradient): a sum of Bernoulli draws."""
    total_count, probs = munet.broadcast_tensors(total_count.detach(), probs.detach())
    n_max = int(float(total_count.max())) if total_count.numel() else 0
    counts = munet.zeros_like(probs)
    for k in range(n_max):
        hit = (munet.rand(probs.shape, dtype=probs.dtype, device=probs.device) < probs) & (total_count > k)
        counts = counts + hit.to(probs.dtype)
    return counts
