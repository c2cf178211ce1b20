"""CPU kernels for the movement family: cat, flip, roll, tril/triu and constant padding."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.registry import kernel


@kernel("cat")
def cat(tensors, *, dim, sizes):
    kept = [a for a, s in zip(tensors, sizes) if s is not None]
    if not kept:
        return np.empty((0,), dtype=tensors[0].dtype)
    return np.concatenate(kept, axis=dim)


@kernel("flip")
def flip(x, *, dims):
    return np.flip(x, axis=dims).copy() if dims else np.array(x, copy=True)


@kernel("roll")
def roll(x, *, shifts, dims):
    if dims is None:
        return np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    return np.roll(x, shifts, axis=dims)


def _tri_mask(shape, diagonal: int, lower: bool) -> np.ndarray:
    rows = np.arange(shape[-2])[:, None]
    cols = np.arange(shape[-1])[None, :]
    return cols - rows <= diagonal if lower else cols - rows >= diagonal


@kernel("tril")
def tril(x, *, diagonal):
    return np.where(_tri_mask(x.shape, diagonal, True), x, np.zeros((), x.dtype))


@kernel("triu")
def triu(x, *, diagonal):
    return np.where(_tri_mask(x.shape, diagonal, False), x, np.zeros((), x.dtype))


@kernel("tril_")
def tril_(out, *, diagonal):
    out[..., ~_tri_mask(out.shape, diagonal, True)] = 0


@kernel("triu_")
def triu_(out, *, diagonal):
    out[..., ~_tri_mask(out.shape, diagonal, False)] = 0


@kernel("constant_pad_nd")
def constant_pad_nd(x, *, pad, value):
    out = np.full(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pad)), value, dtype=x.dtype)
    out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, pad))] = x
    return out
