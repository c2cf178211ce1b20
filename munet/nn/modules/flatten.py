"""``Flatten`` and ``Unflatten``: reshape a range of dims into one, or one dim into several."""

from __future__ import annotations

from munet.nn.module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten dims ``start_dim..end_dim`` (default: all but the batch dim) into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dim ``dim`` into ``unflattened_size`` (a tuple or list of ints, one may be -1)."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"Unflatten: invalid type of dim {type(dim).__name__}, expected an int")
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(
                f"Unflatten: unflattened_size must be a tuple or list of ints, got {type(unflattened_size).__name__}"
            )
        for i, size in enumerate(unflattened_size):
            if not isinstance(size, int) or isinstance(size, bool):
                raise TypeError(
                    f"Unflatten: unflattened_size must be tuple of ints, but found element of type "
                    f"{type(size).__name__} at pos {i}"
                )
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
