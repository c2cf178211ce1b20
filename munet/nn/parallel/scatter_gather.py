"""Split a call's arguments over devices and join the replicas' outputs (``torch.nn.parallel``'s
``scatter``, ``scatter_kwargs`` and ``gather``). Both directions are differentiable."""

from __future__ import annotations

import warnings

from munet._tensor import Tensor
from munet.ops.convert import to_device
from munet.ops.movement import cat, chunk


def scatter(inputs, target_devices: list, dim: int = 0) -> list:
    """One piece of ``inputs`` per device: tensors chunked along ``dim`` and moved, lists, tuples and
    dicts split item by item, anything else repeated. Fewer pieces come back when a tensor has
    fewer than ``len(target_devices)`` rows along ``dim``."""

    def scatter_map(obj):
        if isinstance(obj, Tensor):
            return [
                to_device(piece, device) for piece, device in zip(chunk(obj, len(target_devices), dim), target_devices)
            ]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(piece) for piece in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(piece) for piece in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in target_devices]

    return scatter_map(inputs)


def scatter_kwargs(inputs: tuple, kwargs: dict | None, target_devices: list, dim: int = 0) -> tuple:
    """``scatter`` of positional and keyword arguments, padded to the same number of pieces."""
    scattered_inputs = scatter(inputs, target_devices, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_devices, dim) if kwargs else []
    scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def gather(outputs: list, target_device, dim: int = 0):
    """Join the replicas' outputs on ``target_device``: tensors concatenated along ``dim`` (0-dim
    ones stacked into a vector, with PyTorch's warning), containers joined item by item."""

    def gather_map(pieces):
        first = pieces[0]
        if isinstance(first, Tensor):
            if first.ndim == 0:
                warnings.warn(
                    "Was asked to gather along dimension 0, but all input tensors were scalars; will instead "
                    "unsqueeze and return a vector.",
                    stacklevel=3,
                )
                pieces = [p.reshape(1) for p in pieces]
            return cat([to_device(p, target_device) for p in pieces], dim)
        if first is None:
            return None
        if isinstance(first, dict):
            if any(len(first) != len(p) or set(first) != set(p) for p in pieces):
                raise ValueError("gather: all dicts must have the same number of keys")
            return type(first)((k, gather_map([p[k] for p in pieces])) for k in first)
        if isinstance(first, (list, tuple)):
            joined = [gather_map(list(items)) for items in zip(*pieces)]
            return type(first)(*joined) if hasattr(first, "_fields") else type(first)(joined)
        raise TypeError(
            f"gather: replica outputs must be tensors, None, or lists, tuples and dicts of them; got {type(first).__name__}"
        )

    return gather_map(outputs)
