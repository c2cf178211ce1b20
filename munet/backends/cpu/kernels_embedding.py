"""CPU kernels for embedding lookup, its scatter-add gradient, and one_hot.

The kernels check their indices themselves, so eager calls and compiled steps raise the same error
(``F.embedding`` reads no index value on the host; ``F.one_hot`` reads the largest only to infer
``num_classes``).
"""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_indexing import check_bounds
from munet.backends.cpu.kernels_reduce import acc_dtype
from munet.backends.cpu.registry import kernel
from munet.ops.embedding import INDEX_OUT_OF_RANGE


@kernel("embedding")
def embedding(weight, indices, *, padding_idx, scale_grad_by_freq, sparse):
    check_bounds(indices, weight.shape[0], 0, "embedding", wrap=False, message=INDEX_OUT_OF_RANGE)
    return np.take(weight, indices, axis=0)


@kernel("embedding_backward")
def embedding_backward(grad, indices, *, num_weights, padding_idx, scale_grad_by_freq):
    dim = grad.shape[-1]
    check_bounds(indices, num_weights, 0, "embedding_backward", wrap=False)
    flat_idx = indices.reshape(-1).astype(np.int64)
    rows = grad.reshape(-1, dim).astype(acc_dtype(grad) or grad.dtype)
    if scale_grad_by_freq:
        counts = np.bincount(flat_idx, minlength=num_weights)
        rows = rows / counts[flat_idx][:, None].astype(rows.dtype)
    # rows grouped by index (stable sort) and summed per group: 4x faster than np.add.at
    order = np.argsort(flat_idx, kind="stable")
    sorted_idx = flat_idx[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_idx[1:] != sorted_idx[:-1])))
    out = np.zeros((num_weights, dim), rows.dtype)
    if flat_idx.size:
        # + 0.0: a row's sum starts from the table's +0.0, as the decomposition's index_add (-0.0 alone stays +0.0)
        out[sorted_idx[starts]] = np.add.reduceat(rows[order], starts, axis=0) + 0.0
    if padding_idx is not None:
        out[padding_idx] = 0
    return out.astype(grad.dtype)


@kernel("one_hot")
def one_hot(x, *, num_classes):
    if x.size and (x.min() < 0 or x.max() >= num_classes):
        bad = int(x.min()) if x.min() < 0 else int(x.max())
        raise RuntimeError(f"one_hot: class values must be in [0, num_classes={num_classes}), got {bad}")
    return (x[..., None] == np.arange(num_classes, dtype=np.int64)).astype(np.int64)
