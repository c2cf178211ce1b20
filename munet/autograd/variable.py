"""The legacy ``Variable`` API: since PyTorch 0.4 a Variable is a Tensor.

``Variable(t, requires_grad=False)`` returns a new tensor sharing ``t``'s data (detached from its
graph) with the given ``requires_grad``, and ``isinstance(t, Variable)`` is true for every tensor,
as in PyTorch. ``variable(...)`` raises, pointing to ``munet.tensor``, as PyTorch's does.
"""

from __future__ import annotations

from munet._tensor import Tensor

__all__ = ["Variable", "variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False)``: ``data`` detached, with ``requires_grad`` set."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)


def variable(*args, **kwargs):
    """Removed from PyTorch: raises ``RuntimeError`` as PyTorch does."""
    raise RuntimeError("torch.autograd.variable(...) is deprecated, use torch.tensor(...) instead")
