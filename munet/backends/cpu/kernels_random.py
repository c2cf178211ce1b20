"""CPU kernels for random ops: Philox4x64-10 bits (NumPy's ``Philox``) and fixed transforms.

Each kernel takes the op's ``generator`` attr and asks it for counter blocks
(``generator.philox_advance(blocks)`` -> ``(key, counter)``); block ``counter + 1 + i``
yields words ``4 i .. 4 i + 3`` of the stream (NumPy increments before generating). The
transforms below are part of the stream's definition, so another backend that implements
Philox and the same transforms reproduces CPU numbers exactly.
"""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.registry import kernel


def random_words(generator, n: int) -> np.ndarray:
    """``n`` uint64 words of the generator's stream; advances it by ``ceil(n / 4)`` blocks."""
    key, counter = generator.philox_advance((n + 3) // 4)
    if n == 0:
        return np.empty(0, np.uint64)
    return np.random.Philox(key=key, counter=counter).random_raw(n)


# Significand bits per float dtype: uniforms use that many top bits of a word, so every
# value is exact in the target dtype and 1.0 is never produced by rounding.
_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}


def uniform_open(words: np.ndarray, np_dtype) -> np.ndarray:
    """Uniform in [0, 1) from the top bits of each word: float64 for float64, else float32."""
    bits = _BITS.get(np.dtype(np_dtype).name, 24)
    acc = np.float64 if bits == 53 else np.float32
    return (words >> np.uint64(64 - bits)).astype(acc) * acc(1.0 / (1 << bits))


def _compute_dtype(np_dtype):
    return np.float64 if np.dtype(np_dtype) == np.float64 else np.float32


def standard_normal(generator, n: int) -> np.ndarray:
    """Box-Muller in float64: words [0, m) give radii, words [m, 2m) angles (m = ceil(n / 2))."""
    m = (n + 1) // 2
    words = random_words(generator, 2 * m)
    u1 = ((words[:m] >> np.uint64(11)).astype(np.float64) + 1.0) * (1.0 / (1 << 53))  # (0, 1]
    u2 = uniform_open(words[m:], np.float64)
    radius = np.sqrt(-2.0 * np.log(u1))
    angle = 2.0 * np.pi * u2
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:n]


@kernel("uniform")
def uniform(*, shape, dtype, low, high, generator):
    n = int(np.prod(shape))
    u = uniform_open(random_words(generator, n), dtype.np)
    out = u * (high - low) + low
    return out.astype(dtype.np).reshape(shape)


@kernel("normal")
def normal(*, shape, dtype, mean, std, generator):
    z = standard_normal(generator, int(np.prod(shape)))
    return (z * std + mean).astype(dtype.np).reshape(shape)


@kernel("normal_tensor")
def normal_tensor(mean, std, *, generator):
    std_arr = np.asarray(std)
    if np.any(std_arr < 0) or np.any(np.isnan(std_arr)):
        raise RuntimeError("normal: expects all elements of std >= 0.0")
    shape = np.broadcast_shapes(np.shape(mean), np.shape(std))
    z = standard_normal(generator, int(np.prod(shape))).reshape(shape)
    dtype = (mean if isinstance(mean, np.ndarray) else std).dtype
    acc = _compute_dtype(dtype)
    return (z.astype(acc) * np.asarray(std, dtype=acc) + np.asarray(mean, dtype=acc)).astype(dtype)


@kernel("exponential")
def exponential(*, shape, dtype, lambd, generator):
    u = uniform_open(random_words(generator, int(np.prod(shape))), np.float64)
    return (-np.log1p(-u) / lambd).astype(dtype.np).reshape(shape)


@kernel("randint")
def randint(*, shape, dtype, low, high, generator):
    words = random_words(generator, int(np.prod(shape)))
    span = high - low
    if span > (1 << 64):
        raise RuntimeError(f"randint: range [{low}, {high}) is wider than 2**64")
    # Modulo of a 64-bit word: the bias is below span / 2**64 (negligible for real ranges).
    offsets = words % np.uint64(span) if span < (1 << 64) else words
    # Wrapping uint64 addition, read back as int64 when low is negative.
    values = offsets + np.uint64(low % (1 << 64))
    if low < 0:
        values = values.view(np.int64)
    return values.astype(dtype.np).reshape(shape)


@kernel("randperm")
def randperm(*, n, dtype, generator):
    # Sorting random keys; a stable sort makes ties (probability ~ n^2 / 2^65) deterministic.
    return np.argsort(random_words(generator, n), kind="stable").astype(dtype.np)


@kernel("bernoulli")
def bernoulli(p, *, generator):
    p64 = np.asarray(p, dtype=np.float64)
    if np.any(~((p64 >= 0) & (p64 <= 1))):
        raise RuntimeError("bernoulli: expected all probabilities in [0, 1] (got values outside, or NaN)")
    u = uniform_open(random_words(generator, p64.size), np.float64).reshape(p64.shape)
    return (u < p64).astype(p.dtype)


@kernel("multinomial")
def multinomial(probs, *, num_samples, replacement, generator):
    rows = np.asarray(probs, dtype=np.float64).reshape(-1, probs.shape[-1])
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
    totals = rows.sum(axis=1)
    if np.any(totals <= 0):
        raise RuntimeError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement:
        u = uniform_open(random_words(generator, rows.shape[0] * num_samples), np.float64)
        samples = _inverse_cdf(rows / totals[:, None], u.reshape(rows.shape[0], num_samples))
    else:
        if np.any(np.count_nonzero(rows, axis=1) < num_samples):
            raise RuntimeError(
                "multinomial: invalid multinomial distribution (with replacement=False, not enough non-negative "
                f"category to sample {num_samples} samples)"
            )
        samples = _without_replacement(rows, generator, num_samples)
    return samples.reshape(tuple(probs.shape[:-1]) + (num_samples,))


def _inverse_cdf(rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Per row, the first category whose cumulative probability exceeds ``u`` (one searchsorted)."""
    n_rows, k = rows.shape
    cdf = np.cumsum(rows, axis=1)
    cdf[:, -1] = 1.0
    shift = np.arange(n_rows, dtype=np.float64)[:, None]
    flat = (cdf + shift).reshape(-1)  # rows stacked into one increasing sequence
    idx = np.searchsorted(flat, (u + shift).reshape(-1), side="right").reshape(u.shape)
    idx -= np.arange(n_rows, dtype=np.int64)[:, None] * k
    return np.clip(idx, 0, k - 1).astype(np.int64)


def _without_replacement(rows: np.ndarray, generator, num_samples: int) -> np.ndarray:
    """Exponential races: the ``num_samples`` smallest of ``E_j / p_j`` (E ~ Exp(1)), in order."""
    u = uniform_open(random_words(generator, rows.size), np.float64).reshape(rows.shape)
    with np.errstate(divide="ignore"):
        keys = -np.log1p(-u) / rows  # p = 0 -> inf: never chosen
    if num_samples < keys.shape[1]:
        chosen = np.argpartition(keys, num_samples - 1, axis=1)[:, :num_samples]
    else:
        chosen = np.broadcast_to(np.arange(keys.shape[1]), keys.shape)
    order = np.argsort(np.take_along_axis(keys, chosen, axis=1), axis=1, kind="stable")
    return np.take_along_axis(chosen, order, axis=1).astype(np.int64)
