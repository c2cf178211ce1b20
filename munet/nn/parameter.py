"""``nn.Parameter`` and ``nn.Buffer``: tensors that modules register automatically."""

from __future__ import annotations

from munet._tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that a ``Module`` registers as a parameter when assigned as an attribute.

    ``Parameter(data)`` shares ``data``'s storage; ``requires_grad`` defaults to True.
    """

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from munet.ops.creation import empty

            data = empty(0)
        self._init_from(_dense_data(data, "Parameter").detach())
        self.requires_grad = requires_grad

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        from munet.autograd.grad_mode import no_grad

        with no_grad():
            result = Parameter(self.clone(), self.requires_grad)
        memo[id(self)] = result
        return result


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute."""

    def __init__(self, data: Tensor, *, persistent: bool = True):
        self._init_from(_dense_data(data, "Buffer").detach())
        self.persistent = persistent


def _dense_data(data, what: str) -> Tensor:
    """``data`` if it is a dense tensor: MuNet's parameters and buffers are strided (a sparse COO
    tensor can be a parameter's gradient, not the parameter)."""
    if not isinstance(data, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(data).__name__}")
    if data.is_sparse:
        raise RuntimeError(f"{what}: MuNet's parameters and buffers are dense tensors, got a sparse COO tensor")
    return data
