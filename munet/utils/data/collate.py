"""PyTorch's default collation: turn a list of samples into a batch."""

from __future__ import annotations

import collections.abc

import numpy as np

from munet._tensor import Tensor


def default_convert(data):
    """NumPy arrays and scalars become tensors, recursively; everything else is kept."""
    from munet.ops.creation import as_tensor

    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OSUa":
        return as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind not in "OSUa":
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return (
            type(data)({k: default_convert(v) for k, v in data.items()})
            if not isinstance(data, dict)
            else {k: default_convert(v) for k, v in data.items()}
        )
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return [default_convert(d) for d in data] if isinstance(data, list) else tuple(default_convert(d) for d in data)
    return data


def default_collate(batch):
    """Stack tensors/arrays, tensorize numbers, and recurse into dicts, tuples and lists."""
    from munet.ops.creation import as_tensor, tensor
    from munet.ops.movement import stack

    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSUa":
            raise TypeError(
                f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {elem.dtype}"
            )
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic):
        return as_tensor(np.asarray(batch))
    if isinstance(elem, bool):
        return tensor(batch)
    if isinstance(elem, float):
        from munet import _dtype as D

        return tensor(batch, dtype=D.float64)
    if isinstance(elem, int):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = [default_collate(list(samples)) for samples in zip(*batch)]
        return tuple(transposed) if isinstance(elem, tuple) else transposed
    raise TypeError(
        f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {type(elem).__name__}"
    )
