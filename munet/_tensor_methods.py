"""Binds op functions as Tensor methods and Python operators.

Every method is the op function itself (its first parameter is the tensor), so a method and
its ``munet.*`` function are one definition.
"""

from __future__ import annotations

import munet
from munet import ops
from munet._tensor import Tensor
from munet.ops import view
from munet.ops._registry import apply


def _bind_methods() -> None:
    for module in ops.MODULES:
        for name in getattr(module, "__tensor_methods__", ()):
            setattr(Tensor, name, getattr(module, name))
        # methods whose signature differs from the function's (Tensor.where(condition, y))
        for name, fn in getattr(module, "__tensor_method_impls__", {}).items():
            setattr(Tensor, name, fn)


def _call(name: str):
    """The munet function ``name`` itself: ``Tensor.__add__`` is ``munet.add``, no extra frame."""
    return getattr(munet, name)


def _reflected(name: str):
    def method(self, other):
        return getattr(munet, name)(other, self)

    method.__name__ = name
    return method


def _inplace(name: str):
    def method(self, other):
        return getattr(self, name)(other)

    return method


_BINARY = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "truediv": "div",
    "floordiv": "floor_divide",
    "mod": "remainder",
    "pow": "pow",
    "matmul": "matmul",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _bind_operators() -> None:
    for dunder, fn in _BINARY.items():
        setattr(Tensor, f"__{dunder}__", _call(fn))
        setattr(Tensor, f"__r{dunder}__", _reflected(fn))
        setattr(Tensor, f"__i{dunder}__", _inplace(f"{fn}_"))
    for dunder, fn in _COMPARE.items():
        setattr(Tensor, f"__{dunder}__", _call(fn))
    Tensor.__neg__ = _call("neg")
    Tensor.__pos__ = lambda self: self
    Tensor.__abs__ = _call("abs")
    Tensor.__invert__ = _call("bitwise_not")
    Tensor.__hash__ = lambda self: id(self)


def _getitem(self, index):
    spec = view.basic_index_spec(tuple(self._shape), index)  # (a tuple's indexing is cheaper than a Size's)
    if spec is not None:
        return apply(view.index_view_op, self, spec=spec)  # view.index_basic, inline
    return ops.indexing.index(self, index)


def _setitem(self, index, value) -> None:
    spec = view.basic_index_spec(tuple(self._shape), index)  # (a tuple's indexing is cheaper than a Size's)
    if spec is None:
        ops.indexing.index_put_(self, index, value)
        return
    target = view.index_basic(self, spec)
    if isinstance(value, Tensor):
        target.copy_(value)
    else:
        target.fill_(value)


@property
def _T(self):  # noqa: N802
    return view.permute(self, tuple(reversed(range(self.ndim))))


@property
def _mT(self):  # noqa: N802
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return view.transpose(self, -2, -1)


def bind() -> None:
    from munet import _tensor_surface
    from munet._compat import tensor_type
    from munet.sparse import tensor_methods as sparse_methods

    _bind_methods()
    _tensor_surface.bind()
    sparse_methods.bind()
    Tensor.type = tensor_type
    _bind_operators()
    Tensor.__getitem__ = _getitem
    Tensor.__setitem__ = _setitem
    Tensor.T = _T
    Tensor.mT = _mT
